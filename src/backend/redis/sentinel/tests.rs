//! Tests of `backend/redis/sentinel.rs`.

use super::*;

fn known(epoch: u64, port: u16) -> Known {
    Known {
        epoch,
        host: "127.0.0.1".into(),
        port,
    }
}

fn shared() -> Shared {
    Shared {
        master: "locks".into(),
        known: Mutex::new(None),
        generation: watch::channel(0).0,
    }
}

/// Newer epochs move the master (and the generation); older or equal ones are ignored.
#[test]
fn the_newest_epoch_wins() {
    let s = shared();
    s.observe(known(1, 6379));
    assert_eq!(*s.generation.borrow(), 0, "the first answer is not a move");
    s.observe(known(2, 6380));
    assert_eq!(*s.generation.borrow(), 1);
    s.observe(known(1, 6379));
    s.observe(known(2, 6381));
    assert_eq!(s.known().clone(), Some(known(2, 6380)));
    assert_eq!(*s.generation.borrow(), 1);
    s.observe(known(3, 6380));
    assert_eq!(*s.generation.borrow(), 1, "a new epoch, the same master");
}

/// Failures in a row lengthen the pause before reconnecting, up to the most; a
/// subscription that held starts it over.
#[test]
fn the_backoff_starts_over_after_a_subscription_that_held() {
    let mut last = None;
    let mut pauses = Vec::new();
    for _ in 0..7 {
        let pause = pause_before_reconnect(last, false);
        pauses.push(pause.as_millis());
        last = Some(pause);
    }
    assert_eq!(pauses, [100, 200, 400, 800, 1600, 2000, 2000]);
    assert_eq!(pause_before_reconnect(last, true), MIN_BACKOFF);
}

#[test]
fn sentinel_master_replies_are_read() {
    let fields: HashMap<String, String> = [
        ("name", "locks"),
        ("ip", "10.0.0.7"),
        ("port", "6380"),
        ("config-epoch", "4"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(
        read_master(&fields),
        Some(Known {
            epoch: 4,
            host: "10.0.0.7".into(),
            port: 6380
        })
    );
}
