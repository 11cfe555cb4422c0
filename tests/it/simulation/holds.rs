//! The clients of the holds' world: locks held by a hold stream (`POST /locks/{name}/hold`,
//! kept alive by the gateway's watchdog and released when the client hangs up) and reentrant
//! locks (taken again with their token, given back one hold at a time).
//!
//! How a hold stream is written in the history: its `acquired` line is the grant (sent when
//! the request was); each `renewed` line a renewal sent and answered at the instant the client
//! read it, which in the simulation is the instant the watchdog's renewal was answered (time
//! is paused while any task can run, and the client reads its stream and nothing else while it
//! holds), so the line's `ttl_ms` is the validity left from then; a `lost` line a renewal
//! refused (`not-held`, `not-owner`: the checker's honest-refusal rule judges it) or without a
//! verdict (`expired`); the client closing its stream the release, sent then.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request};
use http_body_util::BodyExt;
use lockgate::http::App;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::clients::{Acquire, BoundedHold, acquire, answered, send};
use crate::support::history::{Call, History, Outcome};
use crate::support::rng::Rng;
use crate::support::workload::Expect;

/// A client of the holds' world, until `until`: half its leases held by a stream, half
/// reentrant locks, and now and then a re-entry with a token it was never given.
pub async fn hold_steps(
    client: usize,
    app: App,
    mut rng: Rng,
    history: Arc<History>,
    until: tokio::time::Instant,
    bounded: Arc<Mutex<Vec<BoundedHold>>>,
) {
    let mut keys = 0;
    while tokio::time::Instant::now() < until {
        let name = ["a", "b"][rng.index(2)];
        match rng.next(10) {
            0 => forge_reentry(client, &app, &mut rng, &history, name).await,
            1..=5 => hold(client, &app, &mut rng, &history, name, &bounded).await,
            _ => {
                keys += 1;
                let key = format!("simulation-client-{client}-{keys:08}");
                reentrant(client, &app, &mut rng, &history, name, key, &bounded).await;
            }
        }
    }
}

/// Where a lock is held for as long as a stream is read.
fn hold_path(name: &str) -> String {
    format!("/locks/{name}/hold")
}

/// A hold stream: opened (fair now and then, bounded now and then, hung up on before the lock
/// came now and then), read for a while, sometimes past a `lost` line, then closed.
async fn hold(
    client: usize,
    app: &App,
    rng: &mut Rng,
    history: &Arc<History>,
    name: &str,
    bounded: &Mutex<Vec<BoundedHold>>,
) {
    // A hold stream's ttl is at least 600 ms (docs/api.md).
    let ttl_ms = 600 + rng.next(1400);
    let wait_ms = if rng.next(3) == 0 { 0 } else { rng.next(1500) };
    let mut body = json!({"ttl_ms": ttl_ms, "wait_ms": wait_ms});
    if wait_ms > 0 && rng.next(4) == 0 {
        body["fair"] = json!(true);
        body["priority"] = json!(rng.next(3));
    }
    let max_hold_ms = (rng.next(4) == 0).then(|| ttl_ms + rng.next(2000));
    if let Some(max) = max_hold_ms {
        body["max_hold_ms"] = json!(max);
    }
    let patience = (rng.next(8) == 0).then(|| Duration::from_millis(rng.next(wait_ms + 200)));
    let call = Call::Acquire {
        ttl_ms,
        wait_ms,
        shared: false,
    };
    let invoke = history.now_us();
    let path = hold_path(name);
    let opened = open(app, &path, &body);
    let opened = match patience {
        Some(patience) => tokio::time::timeout(patience, opened).await.ok(),
        None => Some(opened.await),
    };
    let (outcome, stream) = match opened {
        Some(opened) => opened,
        None => (
            Outcome::NoAnswer {
                error: "the client hung up".into(),
            },
            None,
        ),
    };
    history.record(client, name, call, invoke, outcome.clone());
    let (Outcome::Granted { token, .. }, Some(mut stream)) = (outcome, stream) else {
        tokio::time::sleep(Duration::from_millis(rng.next(200))).await;
        return;
    };
    BoundedHold::note(bounded, history, &token, max_hold_ms);
    let held_for_ms = rng.next(ttl_ms * 3);
    let hang_up = tokio::time::Instant::now() + Duration::from_millis(held_for_ms);
    // The holder's look at its lock while it holds it, from a task of its own (the holder keeps
    // reading its stream, so that it reads each line when it comes): sent before the hang-up,
    // which waits for its answer.
    let mut looked = (rng.next(2) == 0).then(|| {
        let (app, token) = (app.clone(), token.clone());
        let (history, name) = (history.clone(), name.to_owned());
        let at = tokio::time::Instant::now() + Duration::from_millis(rng.next(held_for_ms + 1));
        let (done, looked) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(Box::pin(async move {
            tokio::time::sleep_until(at).await;
            let invoke = history.now_us();
            let sent = send(
                &app,
                Method::GET,
                &format!("/locks/{name}"),
                None,
                &[],
                None,
            )
            .await;
            let outcome = answered(sent, Expect::Inspection);
            history.record(client, &name, Call::Inspect { token }, invoke, outcome);
            let _ = done.send(());
        }));
        looked
    });
    let mut streaming = true;
    while streaming {
        let line = tokio::select! {
            biased;
            line = stream.next() => line,
            _ = async { looked.as_mut().expect("a look").await }, if looked.is_some() => {
                looked = None;
                continue;
            }
            () = tokio::time::sleep_until(hang_up), if looked.is_none() => break,
        };
        let renewal = Call::Renew {
            token: token.clone(),
            ttl_ms,
        };
        let now = history.now_us();
        let event = line.as_ref().and_then(|line| line["event"].as_str());
        match event {
            Some("renewed") => {
                let outcome = answered(Some((200, line.unwrap_or_default())), Expect::Renewal);
                history.record(client, name, renewal, now, outcome);
            }
            Some("lost") => {
                let line = line.unwrap_or_default();
                let outcome = match line["reason"].as_str() {
                    Some("not-held") => Outcome::NotHeld,
                    Some("not-owner") => Outcome::NotOwner,
                    _ => Outcome::NoAnswer {
                        error: format!("lost: {}", line["reason"]),
                    },
                };
                history.record(client, name, renewal, now, outcome);
                streaming = false;
            }
            // `max-hold-reached` (the gateway released it at the bound), or the stream ended.
            _ => streaming = false,
        }
    }
    if streaming {
        // Closing the stream is the release (the gateway withdraws the lease at once); no
        // answer comes back.
        let invoke = history.now_us();
        drop(stream);
        let outcome = Outcome::NoAnswer {
            error: "the holder closed its stream".into(),
        };
        history.record(client, name, Call::Release { token }, invoke, outcome);
    }
    if let Some(looked) = looked {
        // The stream ended first (a `lost` or `max-hold-reached` line): the look ends anyway.
        let _ = looked.await;
    }
}

/// Opens a hold stream: the grant (its `acquired` line, after any `queued` ones) and the
/// stream, or what refused it (the problem document answered, or a fair waiter's
/// `not-acquired` line).
async fn open(app: &App, path: &str, body: &Value) -> (Outcome, Option<Lines>) {
    let request = Request::builder()
        .method(Method::POST)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .expect("a request");
    let response = app.clone().oneshot(request).await.expect("infallible");
    let status = response.status().as_u16();
    if status != 200 {
        let bytes = response
            .into_body()
            .collect()
            .await
            .map(|collected| collected.to_bytes().to_vec())
            .unwrap_or_default();
        let problem = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        return (answered(Some((status, problem)), Expect::Grant), None);
    }
    let mut lines = Lines {
        body: response.into_body(),
        buffer: Vec::new(),
    };
    loop {
        let line = lines
            .next()
            .await
            .expect("a hold stream ended before its first line");
        match line["event"].as_str() {
            Some("queued") => {}
            // Recorded as a 201: a new grant (a 200 is the history's replay).
            Some("acquired") => return (answered(Some((201, line)), Expect::Grant), Some(lines)),
            Some("not-acquired") => {
                let problem = line["problem"].clone();
                let status = problem["status"].as_u64().unwrap_or(0);
                let status = u16::try_from(status).unwrap_or(0);
                return (answered(Some((status, problem)), Expect::Grant), None);
            }
            _ => panic!("a hold stream's first line: {line}"),
        }
    }
}

/// A hold stream's lines as they come.
struct Lines {
    body: Body,
    buffer: Vec<u8>,
}

impl Lines {
    /// The next line, or `None` when the stream ended.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.iter().position(|byte| *byte == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                return Some(serde_json::from_slice(&line).expect("an NDJSON line"));
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
                _ => return None,
            }
        }
    }
}

/// A reentrant lock: taken (with an `Idempotency-Key` retried after a 503 or a hang-up, half
/// the time), taken again by its holder up to twice, held (now and then past the lease),
/// looked at, renewed, and given back hold by hold, or left to expire.
async fn reentrant(
    client: usize,
    app: &App,
    rng: &mut Rng,
    history: &History,
    name: &str,
    key: String,
    bounded: &Mutex<Vec<BoundedHold>>,
) {
    let path = format!("/locks/{name}");
    let ttl_ms = 200 + rng.next(1800);
    let wait_ms = if rng.next(3) == 0 { 0 } else { rng.next(1500) };
    let mut body = json!({"ttl_ms": ttl_ms, "wait_ms": wait_ms, "reentrant": true});
    let max_hold_ms = (rng.next(4) == 0).then(|| ttl_ms + rng.next(2000));
    if let Some(max) = max_hold_ms {
        body["max_hold_ms"] = json!(max);
    }
    let key = (rng.next(2) == 0).then_some(key);
    let patience = (rng.next(8) == 0).then(|| Duration::from_millis(rng.next(wait_ms + 200)));
    let sent = Acquire {
        path: &path,
        body: &body,
        key: key.as_deref(),
        patience,
        call: Call::Acquire {
            ttl_ms,
            wait_ms,
            shared: false,
        },
    };
    let outcome = acquire(app, rng, history, client, &[name], sent).await;
    let Outcome::Granted { token, ttl_ms, .. } = outcome else {
        tokio::time::sleep(Duration::from_millis(rng.next(200))).await;
        return;
    };
    BoundedHold::note(bounded, history, &token, max_hold_ms);
    let headers = [("Lock-Token", Some(token.as_str()))];
    // The holds the client counts; `None` once a re-entry's answer was lost (it may have
    // counted).
    let mut holds = Some(1);
    for _ in 0..rng.next(3) {
        tokio::time::sleep(Duration::from_millis(rng.next(ttl_ms / 2))).await;
        let again = 200 + rng.next(1800);
        let invoke = history.now_us();
        let body = json!({"reentrant": true, "ttl_ms": again});
        let sent = send(app, Method::POST, &path, Some(&body), &headers, None).await;
        let count = match &sent {
            Some((200, body)) => body["hold_count"].as_u64(),
            _ => None,
        };
        let outcome = answered(sent, Expect::Renewal);
        let call = Call::Reenter {
            token: token.clone(),
            ttl_ms: again,
        };
        history.record(client, name, call, invoke, outcome.clone());
        match outcome {
            Outcome::Renewed { .. } => holds = holds.and(count),
            Outcome::NotHeld | Outcome::NotOwner => return,
            _ => holds = None,
        }
    }
    // Now and then past the lease: a paused, stale holder.
    tokio::time::sleep(Duration::from_millis(rng.next(ttl_ms * 3 / 2))).await;
    if rng.next(2) == 0 {
        let invoke = history.now_us();
        let sent = send(app, Method::GET, &path, None, &[], None).await;
        let call = Call::Inspect {
            token: token.clone(),
        };
        history.record(
            client,
            name,
            call,
            invoke,
            answered(sent, Expect::Inspection),
        );
    }
    if rng.next(3) == 0 {
        let ttl_ms = 200 + rng.next(1800);
        let invoke = history.now_us();
        let body = json!({"ttl_ms": ttl_ms});
        let sent = send(app, Method::PATCH, &path, Some(&body), &headers, None).await;
        let call = Call::Renew {
            token: token.clone(),
            ttl_ms,
        };
        history.record(client, name, call, invoke, answered(sent, Expect::Renewal));
    }
    if rng.next(4) == 0 {
        return;
    }
    // Every hold given back, one release each; as many as it takes when a count was lost.
    for _ in 0..holds.unwrap_or(4).min(4) {
        let invoke = history.now_us();
        let sent = send(app, Method::DELETE, &path, None, &headers, None).await;
        let outcome = answered(sent, Expect::Release);
        let call = Call::Release {
            token: token.clone(),
        };
        history.record(client, name, call, invoke, outcome.clone());
        if !matches!(outcome, Outcome::HoldsLeft { .. }) {
            break;
        }
    }
}

/// A re-entry with a token this client was never given, of the right shape (mostly with the
/// reentrant mark a reentrant lock's token carries, `r` after the stem): it must not be
/// accepted.
async fn forge_reentry(client: usize, app: &App, rng: &mut Rng, history: &History, name: &str) {
    let mark = if rng.next(4) == 0 { "" } else { "r" };
    let forged = format!(
        "{}{mark}.{}",
        rng.text(
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
            22
        ),
        super::EPOCH_US as u64 + rng.next(10_000_000)
    );
    let body = json!({"reentrant": true, "ttl_ms": 500});
    let headers = [("Lock-Token", Some(forged.as_str()))];
    let invoke = history.now_us();
    let sent = send(
        app,
        Method::POST,
        &format!("/locks/{name}"),
        Some(&body),
        &headers,
        None,
    )
    .await;
    let call = Call::Reenter {
        token: forged,
        ttl_ms: 500,
    };
    history.record(client, name, call, invoke, answered(sent, Expect::Renewal));
}
