//! Tests of `backend/memory/mod.rs`.

use super::*;
use crate::backend::fence::token;
use crate::backend::grant_set::{BESIDE_FOR_TESTS as BESIDE, LIMITED_FOR_TESTS as LIMITED};
use crate::backend::{Lease, LeaseRequest, RenewAttempt, Withdrawal};

const TTL: Duration = Duration::from_secs(10);
/// A request for a lease of [`TTL`], and nothing else.
static TTL_ONLY: std::sync::LazyLock<LeaseRequest> =
    std::sync::LazyLock::new(|| LeaseRequest::for_ttl(TTL));

fn renewal(token: &str) -> RenewAttempt<'_> {
    RenewAttempt {
        token,
        ttl: TTL,
        ack: None,
        one_more_hold: false,
    }
}

fn lease(outcome: AcquireOutcome) -> Lease {
    match outcome {
        AcquireOutcome::Granted(lease) | AcquireOutcome::AlreadyHeld(lease) => lease,
        AcquireOutcome::Held { .. }
        | AcquireOutcome::Overtakable { .. }
        | AcquireOutcome::LimitDiffers { .. }
        | AcquireOutcome::KeyReused
        | AcquireOutcome::Queued { .. } => panic!("expected a grant, got {outcome:?}"),
    }
}

async fn grant(b: &MemoryBackend, name: &str, stem: &str) -> String {
    let fence = lease(
        b.acquire_lock(name, GrantAttempt::new(stem, &TTL_ONLY))
            .await
            .expect("acquire"),
    )
    .fence;
    token(stem, fence)
}

/// Only the holder's token releases or renews; others are told who is wrong.
#[tokio::test(start_paused = true)]
async fn release_and_renew_are_for_the_holder_only() {
    let b = MemoryBackend::new();
    let t1 = grant(&b, "a", "s1").await;
    assert_eq!(
        b.acquire_lock("a", GrantAttempt::new("s2", &TTL_ONLY))
            .await,
        Ok(AcquireOutcome::Held { ttl: Some(TTL) })
    );
    assert_eq!(
        b.release_lock("a", "s1").await,
        Ok(ReleaseOutcome::NotOwner)
    );
    assert_eq!(
        b.renew_lock("a", renewal("s2.1")).await,
        Ok(RenewOutcome::NotOwner)
    );
    assert!(matches!(
        b.renew_lock("a", renewal(&t1)).await,
        Ok(RenewOutcome::Renewed(_))
    ));
    assert_eq!(b.release_lock("a", &t1).await, Ok(ReleaseOutcome::Released));
    assert_eq!(b.release_lock("a", &t1).await, Ok(ReleaseOutcome::NotHeld));
    assert_eq!(
        b.renew_lock("a", renewal(&t1)).await,
        Ok(RenewOutcome::NotHeld)
    );
}

/// A lease ends at its ttl, and a renewal moves the end.
#[tokio::test(start_paused = true)]
async fn leases_expire_and_renewals_extend_them() {
    let b = MemoryBackend::new();
    let t1 = grant(&b, "a", "s1").await;
    tokio::time::advance(Duration::from_secs(6)).await;
    b.renew_lock("a", renewal(&t1)).await.expect("renew");
    tokio::time::advance(Duration::from_secs(6)).await;
    let seen = b.inspect("a").await.expect("inspect").expect("still held");
    assert_eq!(seen.ttl, Some(Duration::from_secs(4)));
    assert_eq!(seen.fence, fence_of(&t1));
    tokio::time::advance(Duration::from_secs(4)).await;
    assert_eq!(b.inspect("a").await, Ok(None));
    assert!(matches!(
        b.acquire_lock("a", GrantAttempt::new("s2", &TTL_ONLY))
            .await,
        Ok(AcquireOutcome::Granted(_))
    ));
}

/// Fences increase with every grant, across names sharing the counter.
#[tokio::test(start_paused = true)]
async fn fences_increase_across_grants() {
    let b = MemoryBackend::new();
    let mut last = 0;
    for (i, name) in ["a", "b", "a", "a", "c"].iter().enumerate() {
        let token = grant(&b, name, &format!("s{i}")).await;
        let fence = fence_of(&token).expect("fence");
        assert!(fence > last, "{fence} after {last}");
        last = fence;
        b.release_lock(name, &token).await.expect("release");
    }
}

/// The same stem acquiring again gets its own grant back: same fence, remaining ttl.
#[tokio::test(start_paused = true)]
async fn a_repeated_acquire_with_the_same_stem_is_a_replay() {
    let b = MemoryBackend::new();
    let fence = lease(
        b.acquire_lock("a", GrantAttempt::new("s1", &TTL_ONLY))
            .await
            .expect("acquire"),
    )
    .fence;
    tokio::time::advance(Duration::from_secs(3)).await;
    let replay = b
        .acquire_lock("a", GrantAttempt::new("s1", &TTL_ONLY))
        .await
        .expect("replay");
    let expected = Lease {
        fence,
        ttl: Duration::from_secs(7),
        replicas_acked: None,
    };
    assert_eq!(replay, AcquireOutcome::AlreadyHeld(expected));
}

/// An attempt of `stem` that claims its grant with `claim`.
fn claimed(stem: &str, claim: Claim) -> GrantAttempt<'_> {
    GrantAttempt {
        claim: Some(claim),
        ..GrantAttempt::new(stem, &TTL_ONLY)
    }
}

fn withdrawal(stem: &str, claim: Option<Claim>) -> Withdrawal<'_> {
    Withdrawal { stem, claim }
}

/// A withdrawal removes a grant of its stem only, and with a claim only while that claim is
/// the grant's last: a replay by a later attempt protects the grant from an earlier
/// attempt's withdrawal.
#[tokio::test(start_paused = true)]
async fn withdrawals_respect_stems_and_claims() {
    let b = MemoryBackend::new();
    grant(&b, "a", "s1").await;
    assert_eq!(
        b.withdraw_lock("a", withdrawal("s2", None)).await,
        Ok(false)
    );
    assert_eq!(b.withdraw_lock("a", withdrawal("s1", None)).await, Ok(true));
    assert_eq!(b.inspect("a").await, Ok(None));

    b.acquire_lock("a", claimed("k", Claim(1)))
        .await
        .expect("first");
    b.acquire_lock("a", claimed("k", Claim(2)))
        .await
        .expect("replay");
    assert_eq!(
        b.withdraw_lock("a", withdrawal("k", Some(Claim(1)))).await,
        Ok(false)
    );
    assert!(b.inspect("a").await.expect("inspect").is_some());
    assert_eq!(
        b.withdraw_lock("a", withdrawal("k", Some(Claim(2)))).await,
        Ok(true)
    );
}

/// A release is announced to watchers of the name, and only to them.
#[tokio::test(start_paused = true)]
async fn releases_are_announced_to_watchers() {
    let b = MemoryBackend::new();
    let a = LockName::parse("a").expect("a name");
    let feed = b.watch(Watched::Releases(Leased::Lock(&a))).await;
    let mut rx = feed.receiver();
    rx.borrow_and_update();
    let ta = grant(&b, "a", "s1").await;
    let tb = grant(&b, "b", "s1").await;
    b.release_lock("b", &tb).await.expect("release");
    assert!(
        !rx.has_changed().expect("open"),
        "another name's release is not ours"
    );
    b.release_lock("a", "s2.1").await.expect("release");
    assert!(
        !rx.has_changed().expect("open"),
        "a refused release announces nothing"
    );
    b.release_lock("a", &ta).await.expect("release");
    assert!(rx.has_changed().expect("open"));
    drop((rx, feed));
    assert!(
        b.watched.lock().expect("lock").is_empty(),
        "unwatched names are forgotten"
    );
}

/// Expired entries do not accumulate.
#[tokio::test(start_paused = true)]
async fn expired_entries_are_swept() {
    /// Takes `name` for 10 ms.
    async fn take_briefly(b: &MemoryBackend, name: &str) {
        let brief = LeaseRequest::for_ttl(Duration::from_millis(10));
        (b.acquire_lock(name, GrantAttempt::new("s", &brief)).await).expect("acquire");
    }
    let b = MemoryBackend::new();
    for i in 0..2000 {
        take_briefly(&b, &format!("n{i}")).await;
    }
    tokio::time::advance(Duration::from_secs(2)).await;
    for i in 0..2100 {
        take_briefly(&b, &format!("m{i}")).await;
        tokio::time::advance(Duration::from_millis(1)).await;
    }
    let state = b.state();
    assert!(state.locks.len() < 2100, "{} locks left", state.locks.len());
    assert!(state.locks.keys().all(|k| k.starts_with('m')));
}

/// Listing grants held at once finds the names of the set asked for only: a set kept beside
/// the lock (as a read/write lock's readers are), a limited kind's grants.
#[tokio::test(start_paused = true)]
async fn grant_listings_find_the_names_of_their_own_set() {
    let b = MemoryBackend::new();
    b.acquire_grant(&BESIDE, "doc:1", 0, GrantAttempt::new("r1", &TTL_ONLY))
        .await
        .expect("a reader");
    b.acquire_grant(&LIMITED, "pool:1", 2, GrantAttempt::new("p1", &TTL_ONLY))
        .await
        .expect("a permit");
    let listed = |of| {
        let b = &b;
        async move {
            let request = PageRequest {
                prefix: "",
                limit: 10,
                ..PageRequest::default()
            };
            let page = b.list_grants(of, request).await.expect("a page");
            page.found
                .into_iter()
                .map(|(name, seen)| (name, seen.grants.len(), seen.limit))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(&BESIDE).await, [("doc:1".to_owned(), 1, None)]);
    assert_eq!(listed(&LIMITED).await, [("pool:1".to_owned(), 1, Some(2))]);
}

const GRANT_TTL: Duration = Duration::from_secs(10);

async fn take(backend: &MemoryBackend, limit: u32, stem: &str) -> AcquireOutcome {
    backend
        .acquire_grant(
            &LIMITED,
            "s",
            limit,
            GrantAttempt::new(stem, &LeaseRequest::for_ttl(GRANT_TTL)),
        )
        .await
        .expect("memory answers")
}

#[tokio::test(start_paused = true)]
async fn grants_of_a_limited_kind_are_given_up_to_the_limit_and_reclaimed_at_expiry() {
    let backend = MemoryBackend::new();
    assert!(matches!(
        take(&backend, 2, "a").await,
        AcquireOutcome::Granted(_)
    ));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(matches!(
        take(&backend, 2, "b").await,
        AcquireOutcome::Granted(_)
    ));
    // The first permit held runs out in 9 s: that is what a third caller is told.
    assert_eq!(
        take(&backend, 2, "c").await,
        AcquireOutcome::Held {
            ttl: Some(Duration::from_secs(9))
        }
    );
    assert_eq!(
        take(&backend, 3, "c").await,
        AcquireOutcome::LimitDiffers { limit: 2 }
    );
    tokio::time::advance(Duration::from_secs(9)).await;
    assert!(matches!(
        take(&backend, 2, "c").await,
        AcquireOutcome::Granted(_)
    ));
    let seen = backend.grant_views(&LIMITED, "s");
    assert_eq!(seen.limit, Some(2));
    assert_eq!(seen.grants.len(), 2);
    // Once every permit is gone, the next grant sets a new limit.
    tokio::time::advance(GRANT_TTL).await;
    assert!(matches!(
        take(&backend, 5, "d").await,
        AcquireOutcome::Granted(_)
    ));
}

#[tokio::test(start_paused = true)]
async fn a_grant_of_a_set_is_renewed_and_released_by_its_token_only() {
    let backend = MemoryBackend::new();
    let AcquireOutcome::Granted(lease) = take(&backend, 1, "a").await else {
        panic!("granted");
    };
    let mine = token("a", lease.fence);
    assert_eq!(
        backend
            .renew_grant(
                &LIMITED,
                "s",
                RenewAttempt {
                    token: "a.1",
                    ttl: GRANT_TTL,
                    ack: None,
                    one_more_hold: false,
                }
            )
            .await,
        Ok(RenewOutcome::NotHeld)
    );
    assert!(matches!(
        backend
            .renew_grant(
                &LIMITED,
                "s",
                RenewAttempt {
                    token: &mine,
                    ttl: GRANT_TTL,
                    ack: None,
                    one_more_hold: false,
                }
            )
            .await,
        Ok(RenewOutcome::Renewed(_))
    ));
    assert_eq!(
        backend.release_grant(&LIMITED, "s", "a.1").await,
        Ok(ReleaseOutcome::NotHeld)
    );
    assert_eq!(
        backend.release_grant(&LIMITED, "s", &mine).await,
        Ok(ReleaseOutcome::Released)
    );
    assert_eq!(backend.grant_views(&LIMITED, "s"), Grants::default());
}
