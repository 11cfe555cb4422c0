//! Reentrant locks: `POST /locks/{name}` with `reentrant: true`, taken again by its holder
//! with its `Lock-Token` (200, same token and fence, `hold_count`), given back one hold per
//! `DELETE`, free after the last. On the memory backend, standalone Redis, Sentinel and
//! Cluster; Redlock answers 501 `not-offered`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::answers::Answered;
use crate::support::backends::on_backends;
use crate::support::gateway::{Gateway, redis_config, redlock_trio};
use crate::support::redis::RedisServer;
use lockgate::client::Client;

use crate::support::answers::json_of;
use crate::support::{assert_problem, eventually, status_json, token};

// The answers are read as JSON (`json_of`): what this file checks includes fields that must
// be absent (a plain lock's `hold_count`), and a release's 200 with a body.

/// `POST /locks/{name}` with `body`.
async fn acquire(gw: &Gateway, name: &str, body: Value) -> (u16, Value) {
    json_of(gw.client().acquire(name, &body, None, None).await)
}

/// The client of the holder of `token`: its acquires are re-entries (`Lock-Token` on POST).
fn holder(gw: &Gateway, token: &str) -> Client {
    gw.client()
        .header("Lock-Token", token)
        .expect("a token header")
}

/// `POST /locks/{name}` with `body` and the holder's `Lock-Token`.
async fn reenter(gw: &Gateway, name: &str, token: &str, body: Value) -> (u16, Value) {
    json_of(holder(gw, token).acquire(name, &body, None, None).await)
}

/// `DELETE /locks/{name}`: the status and the body, if any.
async fn release(gw: &Gateway, name: &str, token: &str) -> (u16, Value) {
    json_of(gw.client().release(name, token, None).await)
}

/// Acquire ×3 with the token, release ×3: held until the third release; a waiter is granted
/// right after it. The walk every backend must pass.
async fn held_as_often_as_taken(gw: &Gateway) {
    let name = "reentrant:walk";
    let (status, first) = acquire(
        gw,
        name,
        json!({"reentrant": true, "ttl_ms": 10_000, "owner": "worker-1"}),
    )
    .await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(first["hold_count"], 1, "{first}");
    let held = token(&first);
    for count in 2..=3 {
        let (status, again) = reenter(gw, name, &held, json!({"reentrant": true})).await;
        assert_eq!(status, 200, "{again}");
        assert_eq!(again["token"], first["token"], "the same token: {again}");
        assert_eq!(again["fence"], first["fence"], "the same fence: {again}");
        assert_eq!(again["hold_count"], count, "{again}");
        // The lease lasts at least the default ttl (30 s) asked by this re-entry.
        assert!(again["ttl_ms"].as_u64().unwrap() > 20_000, "{again}");
    }

    // Another client waits for it.
    let waiter = {
        let client = gw.client();
        tokio::spawn(async move {
            let body = json!({"wait_ms": 20_000});
            json_of(client.acquire(name, &body, None, None).await)
        })
    };

    // A wrong token is refused, and counts nothing.
    let other = if held.starts_with('A') { 'B' } else { 'A' };
    let wrong = format!("{other}{}", &held[1..]);
    let (status, problem) = reenter(gw, name, &wrong, json!({"reentrant": true})).await;
    assert_problem(status, &problem, 409, "not-owner");
    let (status, problem) = release(gw, name, &wrong).await;
    assert_problem(status, &problem, 409, "not-owner");

    // A renewal extends the lease, not the count.
    gw.locks()
        .renew(name, &held, json!({"ttl_ms": 10_000}))
        .await
        .done(200);

    for left in [2, 1] {
        let (status, body) = release(gw, name, &held).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["hold_count"], left, "{body}");
        assert_eq!(body["name"], name, "{body}");
        let (status, seen) = status_json(gw.inspect(name).await).await;
        assert_eq!(status, 200, "still held after giving back one hold: {seen}");
        assert_eq!(seen["fence"], first["fence"], "{seen}");
        assert_eq!(seen["hold_count"], left, "inspect shows the count: {seen}");
        assert_eq!(seen["owner"], "worker-1", "{seen}");
        assert!(!waiter.is_finished(), "the waiter got a lock still held");
    }
    let (status, body) = release(gw, name, &held).await;
    assert_eq!(status, 204, "{body}");
    let (status, granted) = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter is granted right after the last release")
        .expect("waiter task");
    assert_eq!(status, 201, "{granted}");
    assert!(granted["fence"].as_u64() > first["fence"].as_u64());
    // The old token holds nothing any more.
    let (status, problem) = reenter(gw, name, &held, json!({"reentrant": true})).await;
    assert_problem(status, &problem, 409, "not-owner");
    assert_eq!(
        release(gw, name, &token(&granted)).await.0,
        204,
        "the waiter's lock is a plain one"
    );
    let (status, problem) = reenter(gw, name, &held, json!({"reentrant": true})).await;
    assert_problem(status, &problem, 404, "lock-not-held");
}

/// What a re-entry refuses: a lock not taken reentrant, a shared grant, a hold stream, an
/// idempotency key; and a revoked lock takes its count with it.
async fn refusals(gw: &Gateway) {
    let (status, plain) = acquire(gw, "reentrant:plain", json!({})).await;
    assert_eq!(status, 201, "{plain}");
    assert!(plain.get("hold_count").is_none(), "{plain}");
    let (_, seen) = status_json(gw.inspect("reentrant:plain").await).await;
    assert!(
        seen.get("hold_count").is_none(),
        "a plain lock has no count: {seen}"
    );
    let (status, problem) = reenter(
        gw,
        "reentrant:plain",
        &token(&plain),
        json!({"reentrant": true}),
    )
    .await;
    assert_problem(status, &problem, 409, "not-reentrant");
    // Without `reentrant: true`, a Lock-Token on POST is no re-entry, and is refused rather
    // than ignored (ignored, its holder was told 409 `lock-held`, "another client").
    let (status, problem) = reenter(gw, "reentrant:plain", &token(&plain), json!({})).await;
    assert_problem(status, &problem, 400, "invalid-request");
    assert_eq!(problem["header"], "Lock-Token", "{problem}");
    // One that lockgate could not have issued is bad input, re-entry or not.
    let (status, problem) = reenter(gw, "reentrant:plain", "0", json!({})).await;
    assert_problem(status, &problem, 400, "invalid-request");
    assert_eq!(release(gw, "reentrant:plain", &token(&plain)).await.0, 204);

    let (status, problem) = acquire(
        gw,
        "reentrant:shared",
        json!({"reentrant": true, "mode": "shared"}),
    )
    .await;
    assert_problem(status, &problem, 400, "invalid-request");
    let hold = gw
        .client()
        .hold("reentrant:hold", &json!({"reentrant": true}))
        .await;
    hold.refused(400, "invalid-request");

    let (status, grant) = acquire(gw, "reentrant:keyed", json!({"reentrant": true})).await;
    assert_eq!(status, 201, "{grant}");
    let keyed = holder(gw, &token(&grant))
        .acquire(
            "reentrant:keyed",
            &json!({"reentrant": true}),
            Some("a-key-of-sixteen-chars"),
            None,
        )
        .await;
    keyed.refused(400, "invalid-request");

    // Revoked while held twice: the holder's next re-entry and release are told so, and a
    // new reentrant grant of the name starts from one.
    let (status, again) = reenter(
        gw,
        "reentrant:keyed",
        &token(&grant),
        json!({"reentrant": true}),
    )
    .await;
    assert_eq!(status, 200, "{again}");
    let revoke = gw.client().force_release("reentrant:keyed").await;
    revoke.done(204);
    let (status, problem) = reenter(
        gw,
        "reentrant:keyed",
        &token(&grant),
        json!({"reentrant": true}),
    )
    .await;
    assert_problem(status, &problem, 410, "lock-revoked");
    let (status, fresh) = acquire(gw, "reentrant:keyed", json!({"reentrant": true})).await;
    assert_eq!(status, 201, "{fresh}");
    assert_eq!(release(gw, "reentrant:keyed", &token(&fresh)).await.0, 204);
}

/// A reentrant lock's count ends with its lease: held twice and left to expire, the name is
/// free, and the next reentrant grant counts from one.
async fn the_count_expires_with_the_lease(gw: &Gateway) {
    let name = "reentrant:expiring";
    let body = json!({"reentrant": true, "ttl_ms": 300});
    let (status, grant) = acquire(gw, name, body.clone()).await;
    assert_eq!(status, 201, "{grant}");
    let (status, again) = reenter(gw, name, &token(&grant), body.clone()).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["hold_count"], 2, "{again}");
    let (status, next) = eventually(Duration::from_secs(5), "the lease ends", || async {
        let (status, next) = acquire(gw, name, body.clone()).await;
        (status == 201).then_some((status, next))
    })
    .await;
    assert_eq!(next["hold_count"], 1, "{status}: {next}");
    assert_eq!(release(gw, name, &token(&next)).await.0, 204);
}

async fn every_walk(gw: &Gateway) {
    held_as_often_as_taken(gw).await;
    refusals(gw).await;
    the_count_expires_with_the_lease(gw).await;
}

on_backends!(every_walk: dev, sentinel, cluster);

#[tokio::test]
async fn reentrant_locks_on_redis() {
    let redis = RedisServer::start();
    let gw = Gateway::start(redis_config(&redis.url())).await;
    every_walk(&gw).await;
    // Nothing of a reentrant lock outlives it: no hold count left behind.
    let keys: Vec<String> = redis
        .query(::redis::cmd("KEYS").arg("lockgate:{reentrant:*"))
        .expect("KEYS");
    let left: Vec<&String> = keys.iter().filter(|k| !k.ends_with(":revoked")).collect();
    assert!(left.is_empty(), "keys left behind: {left:?}");
}

#[tokio::test]
async fn redlock_does_not_offer_reentrant_locks() {
    let (gw, _nodes) = redlock_trio().await;
    let (status, grant) = acquire(&gw, "doc", json!({})).await;
    assert_eq!(status, 201, "{grant}");
    let (status, problem) = reenter(&gw, "doc", &token(&grant), json!({"reentrant": true})).await;
    assert_problem(status, &problem, 501, "not-offered");
    let (status, problem) = acquire(&gw, "other", json!({"reentrant": true})).await;
    assert_problem(status, &problem, 501, "not-offered");
}
