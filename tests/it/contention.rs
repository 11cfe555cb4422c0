//! `GET /contention`: the names a gateway's requests wait for most, with who waits now and
//! how long waits and holds last; scoped as listings are, refusing bad queries without
//! repeating them.

use std::time::Duration;

use lockgate::access::ApiKeys;
use serde_json::json;

use crate::support::answers::Answered;
use crate::support::eventually;
use crate::support::gateway::{Gateway, redis_config};
use crate::support::redis::RedisServer;

const KEYS: &str = r#"[
    {"name": "team-a", "key": "team-a-key-0123456789", "prefixes": ["team-a:"]},
    {"name": "team-b", "key": "team-b-key-0123456789", "prefixes": ["team-b:"]}
]"#;

/// The hottest names come first, each with its waiters now and its waits' and holds'
/// percentiles; a key sees only the names it may inspect.
#[tokio::test]
async fn the_names_waited_for_most_are_shown_to_the_keys_that_may_see_them() {
    let redis = RedisServer::start();
    let mut config = redis_config(&redis.url());
    config.api_keys = Some(ApiKeys::from_json(KEYS).expect("valid keys"));
    let gw = Gateway::start(config).await;
    let (a, b) = (
        gw.client_as("team-a-key-0123456789"),
        gw.client_as("team-b-key-0123456789"),
    );
    let busy = gw_locks(&a)
        .acquire("team-a:busy", json!({}))
        .await
        .done(201);
    gw_locks(&b)
        .acquire("team-b:other", json!({}))
        .await
        .done(201);
    // Two waits that run out on team-a:busy (300 ms in line), one on team-b:other (100 ms).
    for _ in 0..2 {
        gw_locks(&a)
            .acquire("team-a:busy", json!({"wait_ms": 300}))
            .await
            .refused(409, "lock-held");
    }
    gw_locks(&b)
        .acquire("team-b:other", json!({"wait_ms": 100}))
        .await
        .refused(409, "lock-held");

    // A waiter now, then its grant and its release (a hold of a name in the table).
    let waiter = {
        let a = gw_locks(&a);
        tokio::spawn(async move { a.acquire("team-a:busy", json!({"wait_ms": 10_000})).await })
    };
    eventually(Duration::from_secs(5), "the waiter is shown", || async {
        let hot = a.contention(&[]).await.done(200);
        (hot.names.first().map(|n| n.waiting) == Some(1)).then_some(())
    })
    .await;
    gw_locks(&a)
        .release("team-a:busy", &busy.token)
        .await
        .done(204);
    let next = waiter.await.expect("join").done(201);
    gw_locks(&a)
        .release("team-a:busy", &next.token)
        .await
        .done(204);

    let seen_by_a = a.contention(&[]).await.done(200);
    assert_eq!(seen_by_a.capacity, 64);
    assert_eq!(seen_by_a.half_life_ms, 300_000);
    let names: Vec<&str> = seen_by_a.names.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["team-a:busy"], "team-a sees only its own names");
    let busy = &seen_by_a.names[0];
    assert_eq!((busy.kind.as_str(), busy.waiting), ("lock", 0));
    assert_eq!((busy.waits, busy.timeouts), (3, 2));
    assert!(busy.waited_ms >= 600, "{busy:?}");
    // 300 ms lies in the bucket bounded by 2^(17/2) ≈ 362 ms.
    assert_eq!(busy.wait_p99_ms, Some(362), "{busy:?}");
    // Both releases came after the name's first wait: the first holder's and the waiter's.
    assert_eq!(busy.holds, 2, "{busy:?}");
    assert!(busy.hold_p50_ms.is_some(), "{busy:?}");

    let seen_by_b = b.contention(&[]).await.done(200);
    let names: Vec<&str> = seen_by_b.names.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["team-b:other"]);
    // A prefix narrows, a limit cuts.
    let unkeyed = gw.client();
    unkeyed.contention(&[]).await.refused(401, "unauthorized");
    assert!(
        a.contention(&[("prefix", "team-a:x")])
            .await
            .done(200)
            .names
            .is_empty()
    );
    assert_eq!(
        a.contention(&[("limit", "1")]).await.done(200).names.len(),
        1
    );
}

/// A bad query is a 400 problem that repeats nothing of it.
#[tokio::test]
async fn a_bad_query_is_refused_without_an_echo() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    let client = gw.client();
    for query in [
        [("limit", "0")],
        [("limit", "65")],
        [("prefix", "<script>evil")],
        [("cursor", "echo-me-please")],
    ] {
        let problem = client
            .contention(&query)
            .await
            .refused(400, "invalid-request");
        let text = format!("{problem:?}");
        assert!(
            !text.contains("script") && !text.contains("echo-me"),
            "{text}"
        );
    }
}

fn gw_locks(client: &lockgate::client::Client) -> crate::support::answers::Locks {
    crate::support::answers::Locks(client.clone())
}
