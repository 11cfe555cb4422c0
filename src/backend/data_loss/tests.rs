//! Tests of `backend/data_loss.rs`.

use super::*;

fn guard(hold_back: bool) -> DataLossGuard {
    DataLossGuard::new(DataLossOptions {
        hold_back,
        max_ttl: Duration::from_secs(60),
        longest: Arc::default(),
        metrics: Arc::new(Metrics::default()),
    })
}

/// Asserts that `guard` holds grants back for `until`, to the millisecond (the clock is
/// paused; the guard counts from instants it took).
fn held_back_for(guard: &DataLossGuard, until: Duration) {
    let left = guard.held_back().expect("held back");
    assert!(
        left > until - Duration::from_millis(1) && left <= until,
        "{left:?}, not {until:?}"
    );
}

fn marker(id: &str, lease_s: u64, made: bool) -> Marker {
    Marker {
        id: id.into(),
        lease: Duration::from_secs(lease_s),
        made,
    }
}

/// A first look, even at an empty node, holds nothing back; the same id again neither.
#[test]
fn a_first_look_and_the_same_marker_are_no_loss() {
    let guard = guard(true);
    assert!(!guard.observe("n", marker("a", 30, true)));
    assert!(!guard.observe("n", marker("a", 30, false)));
    assert_eq!(guard.held_back(), None);
}

/// Another id is a loss: grants are held back for the longest lease last read, at most
/// --max-ttl; not at all with the hold-back off.
#[test]
fn another_marker_holds_grants_back_for_the_longest_lease() {
    let guard = guard(true);
    guard.observe("n", marker("a", 30, false));
    assert!(guard.observe("n", marker("b", 0, true)));
    let left = guard.held_back().expect("held back");
    assert!(left > Duration::from_secs(29) && left <= Duration::from_secs(30));

    let capped = self::guard(true);
    capped.observe("n", marker("a", 3600, false));
    assert!(capped.observe("n", marker("b", 0, true)));
    assert!(capped.held_back().expect("held back") <= Duration::from_secs(60));

    let off = self::guard(false);
    off.observe("n", marker("a", 30, false));
    assert!(off.observe("n", marker("b", 0, true)));
    assert_eq!(off.held_back(), None);
}

/// After a loss the hold-back lasts at least MERGE_FOR, and a longer lease that another
/// gateway put into the new marker extends it to the loss's detection plus that lease (the
/// simulation's seed: a 965 ms lease granted by the other gateway just before the node
/// restarted): also when it is read after MERGE_FOR by a gateway that could not look
/// meanwhile (holds' world seed 14165), not after three looks over MERGE_FOR, never past
/// the detection plus `--max-ttl`, and not at all once that lease has run out.
#[tokio::test(start_paused = true)]
async fn a_loss_takes_in_the_longest_lease_the_other_gateways_knew() {
    let guard = guard(true);
    guard.observe("n", marker("a", 0, true));
    assert!(guard.observe("n", marker("b", 0, true)));
    let left = guard.held_back().expect("held back");
    assert!(left >= MERGE_FOR - Duration::from_millis(1), "{left:?}");

    tokio::time::advance(CLOCK_CHECK_EVERY).await;
    assert!(!guard.observe("n", marker("b", 30, false)));
    held_back_for(&guard, Duration::from_secs(30) - CLOCK_CHECK_EVERY);

    let late = self::guard(true);
    late.observe("n", marker("a", 0, true));
    late.observe("n", marker("b", 0, true));
    tokio::time::advance(MERGE_FOR * 2).await;
    assert_eq!(late.held_back(), None);
    assert!(!late.observe("n", marker("b", 30, false)));
    held_back_for(&late, Duration::from_secs(30) - MERGE_FOR * 2);

    // Three looks over MERGE_FOR, then a longer lease in the marker: one granted after the
    // loss (the node keeps it), which holds nothing back.
    let settled = self::guard(true);
    settled.observe("n", marker("a", 0, true));
    settled.observe("n", marker("b", 0, true));
    for _ in 0..MERGE_LOOKS {
        tokio::time::advance(CLOCK_CHECK_EVERY).await;
        assert!(!settled.observe("n", marker("b", 0, false)));
    }
    tokio::time::advance(MERGE_FOR).await;
    assert!(!settled.observe("n", marker("b", 30, false)));
    assert_eq!(settled.held_back(), None);

    let over = self::guard(true);
    over.observe("n", marker("a", 0, true));
    over.observe("n", marker("b", 0, true));
    tokio::time::advance(MERGE_FOR * 2).await;
    assert!(!over.observe("n", marker("b", 2, false)));
    assert_eq!(over.held_back(), None, "a 2 s lease ended 1 s ago");
    tokio::time::advance(Duration::from_secs(60)).await;
    assert!(!over.observe("n", marker("b", 3600, false)));
    assert_eq!(over.held_back(), None, "past --max-ttl after the detection");
}
