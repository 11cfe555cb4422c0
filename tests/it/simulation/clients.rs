//! The clients of the locks' world: plain, shared (read) and fair acquires, their holds, looks,
//! renewals and releases, and forged tokens; and the in-process calls every client makes.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request};
use http_body_util::BodyExt;
use lockgate::http::App;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::support::history::{Call, History, Outcome};
use crate::support::rng::Rng;
use crate::support::workload::{Expect, judge};

/// What a client remembers of a grant with a bounded hold, to check its renewals.
#[derive(Debug)]
pub struct BoundedHold {
    pub token: String,
    pub acquired_us: u64,
    pub max_hold_ms: u64,
}

impl BoundedHold {
    /// Remembers the grant of `token`, just answered, if it was asked with a `max_hold_ms`.
    pub fn note(
        bounded: &Mutex<Vec<Self>>,
        history: &History,
        token: &str,
        max_hold_ms: Option<u64>,
    ) {
        if let Some(max_hold_ms) = max_hold_ms {
            bounded.lock().expect("bounded holds").push(Self {
                token: token.to_owned(),
                acquired_us: history.now_us(),
                max_hold_ms,
            });
        }
    }
}

/// An acquire as a client sends it.
pub struct Acquire<'a> {
    pub path: &'a str,
    pub body: &'a Value,
    /// Its `Idempotency-Key`, if it has one.
    pub key: Option<&'a str>,
    /// How long the client waits for the answer before it hangs up (for good, if unset).
    pub patience: Option<Duration>,
    /// How the history records it.
    pub call: Call,
}

/// Sends `acquire` and records each attempt once per name of `names`; with an
/// `Idempotency-Key`, sends it again (three attempts in all) after a 503 or no answer: its
/// retry finds its own grant. A client that gave up waiting retries at once (its first attempt
/// may still be in flight, and its undo behind it); one told 503 pauses first. The last
/// attempt's outcome.
pub async fn acquire(
    app: &App,
    rng: &mut Rng,
    history: &History,
    client: usize,
    names: &[&str],
    acquire: Acquire<'_>,
) -> Outcome {
    let mut tries = 0;
    loop {
        let invoke = history.now_us();
        let headers = [("Idempotency-Key", acquire.key)];
        let sent = send(
            app,
            Method::POST,
            acquire.path,
            Some(acquire.body),
            &headers,
            acquire.patience,
        )
        .await;
        let outcome = answered(sent, Expect::Grant);
        for name in names {
            history.record(client, name, acquire.call.clone(), invoke, outcome.clone());
        }
        tries += 1;
        let unsettled = matches!(
            outcome,
            Outcome::NoAnswer { .. } | Outcome::Refused { status: 503, .. }
        );
        if !(acquire.key.is_some() && unsettled && tries < 3) {
            return outcome;
        }
        if !matches!(outcome, Outcome::NoAnswer { .. }) {
            tokio::time::sleep(Duration::from_millis(rng.next(100))).await;
        }
    }
}

/// A client's life: acquire (plain, shared, fair with a priority, or with an `Idempotency-Key`
/// retried after a 503; some waiting, some with a bounded hold, some hung up on), then hold
/// (now and then past the lease), look, renew, release or let the lease run out; and now and
/// then a release or renewal with a token it was never given. Until `until`. With
/// `unacknowledged` (a Sentinel group's world), a third of the acquires and their renewals
/// ask for a replica's acknowledgement (`WAIT`) and require it, a third ask without requiring
/// it, a third do not ask; the tokens of grants not required to be acknowledged go in it.
pub async fn client_steps(
    client: usize,
    app: App,
    mut rng: Rng,
    history: Arc<History>,
    unacknowledged: Option<Arc<Mutex<BTreeSet<String>>>>,
    until: tokio::time::Instant,
    bounded: Arc<Mutex<Vec<BoundedHold>>>,
) {
    let names = ["a", "b"];
    let mut keys = 0;
    while tokio::time::Instant::now() < until {
        let name = names[rng.index(names.len())];
        if rng.next(8) == 0 {
            forge(client, &app, &mut rng, &history, name).await;
            continue;
        }
        let ttl_ms = 200 + rng.next(1800);
        let wait_ms = if rng.next(3) == 0 { 0 } else { rng.next(1500) };
        let shared = rng.next(5) == 0;
        let mut body = json!({"ttl_ms": ttl_ms, "wait_ms": wait_ms});
        if shared {
            body["mode"] = json!("shared");
        } else if rng.next(4) == 0 {
            body["fair"] = json!(true);
            body["priority"] = json!(rng.next(3));
        }
        let replicas = match unacknowledged {
            Some(_) => [
                json!({}),
                json!({"replicas": 1}),
                json!({"replicas": 1, "require_replicas": true}),
            ][rng.index(3)]
            .clone(),
            None => json!({}),
        };
        for (field, value) in replicas.as_object().expect("an object") {
            body[field] = value.clone();
        }
        let max_hold_ms = (rng.next(4) == 0).then(|| ttl_ms + rng.next(2000));
        if let Some(max) = max_hold_ms {
            body["max_hold_ms"] = json!(max);
        }
        let key = (rng.next(2) == 0).then(|| {
            keys += 1;
            format!("simulation-client-{client}-{keys:08}")
        });
        // A client that hangs up before its answer (its acquire may still be granted, and
        // must then be withdrawn or left to expire).
        let patience = (rng.next(8) == 0).then(|| Duration::from_millis(rng.next(wait_ms + 200)));
        let path = format!("/locks/{name}");
        let sent = Acquire {
            path: &path,
            body: &body,
            key: key.as_deref(),
            patience,
            call: Call::Acquire {
                ttl_ms,
                wait_ms,
                shared,
            },
        };
        let outcome = acquire(&app, &mut rng, &history, client, &[name], sent).await;
        let Outcome::Granted {
            token,
            fence,
            ttl_ms,
            ..
        } = outcome
        else {
            tokio::time::sleep(Duration::from_millis(rng.next(200))).await;
            continue;
        };
        BoundedHold::note(&bounded, &history, &token, max_hold_ms);
        if let Some(unacknowledged) = &unacknowledged
            && replicas.get("require_replicas").is_none()
        {
            unacknowledged
                .lock()
                .expect("unacknowledged")
                .insert(token.clone());
        }
        // Now and then past the lease: a paused, stale holder.
        tokio::time::sleep(Duration::from_millis(rng.next(ttl_ms * 3 / 2))).await;
        if rng.next(2) == 0 {
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
            let expect = if shared {
                Expect::Permit(fence)
            } else {
                Expect::Inspection
            };
            let outcome = answered(sent, expect);
            history.record(
                client,
                name,
                Call::Inspect {
                    token: token.clone(),
                },
                invoke,
                outcome,
            );
        }
        if rng.next(3) == 0 {
            let ttl_ms = 200 + rng.next(1800);
            let mut renewal = replicas.clone();
            renewal["ttl_ms"] = json!(ttl_ms);
            let invoke = history.now_us();
            let sent = send(
                &app,
                Method::PATCH,
                &format!("/locks/{name}"),
                Some(&renewal),
                &[("Lock-Token", Some(&token))],
                None,
            )
            .await;
            let outcome = answered(sent, Expect::Renewal);
            let call = Call::Renew {
                token: token.clone(),
                ttl_ms,
            };
            history.record(client, name, call, invoke, outcome);
        }
        if rng.next(4) != 0 {
            let invoke = history.now_us();
            let sent = send(
                &app,
                Method::DELETE,
                &format!("/locks/{name}"),
                None,
                &[("Lock-Token", Some(&token))],
                None,
            )
            .await;
            let outcome = answered(sent, Expect::Release);
            history.record(client, name, Call::Release { token }, invoke, outcome);
        }
    }
}

/// A release or renewal with a token this client was never given: the readers' marker, a
/// made-up token of the right shape, or one with another name's stem. None may be accepted.
async fn forge(client: usize, app: &App, rng: &mut Rng, history: &History, name: &str) {
    let forged = match rng.next(3) {
        0 => "~shared".to_owned(),
        1 => format!(
            "{}.{}",
            rng.text(
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
                22
            ),
            super::EPOCH_US as u64 + rng.next(10_000_000)
        ),
        _ => format!("{}.1", rng.text(b"abcdef0123456789", 22)),
    };
    let renew = rng.next(2) == 0;
    let invoke = history.now_us();
    let (method, body, expect) = if renew {
        (Method::PATCH, Some(json!({"ttl_ms": 500})), Expect::Renewal)
    } else {
        (Method::DELETE, None, Expect::Release)
    };
    let sent = send(
        app,
        method,
        &format!("/locks/{name}"),
        body.as_ref(),
        &[("Lock-Token", Some(&forged))],
        None,
    )
    .await;
    let outcome = answered(sent, expect);
    let call = if renew {
        Call::Renew {
            token: forged,
            ttl_ms: 500,
        }
    } else {
        Call::Release { token: forged }
    };
    history.record(client, name, call, invoke, outcome);
}

/// An answer as the history records it; none when the client hung up first. A bounded hold's
/// grant is valid for the shorter of its `ttl_ms` and its `max_hold_left_ms` (the lease ends
/// at the bound, docs/api.md), as a careful client counts it; a renewal's `ttl_ms` is kept as
/// the gateway gave it (cut at the bound by the gateway, which the max-hold check judges).
pub fn answered(sent: Option<(u16, Value)>, expect: Expect) -> Outcome {
    match sent {
        Some((status, mut body)) => {
            if let (Expect::Grant, Some(ttl), Some(left)) = (
                expect,
                body["ttl_ms"].as_u64(),
                body["max_hold_left_ms"].as_u64(),
            ) {
                body["ttl_ms"] = json!(ttl.min(left));
            }
            judge(status, &body, expect)
        }
        None => Outcome::NoAnswer {
            error: "the client hung up".into(),
        },
    }
}

/// One request to a gateway's router, in-process: its status and JSON body, or `None` when
/// `patience` ran out first (the request is dropped: a client that hung up).
pub async fn send(
    app: &App,
    method: Method,
    path: &str,
    body: Option<&Value>,
    headers: &[(&str, Option<&str>)],
    patience: Option<Duration>,
) -> Option<(u16, Value)> {
    let mut request = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        if let Some(value) = value {
            request = request.header(*name, *value);
        }
    }
    let request = match body {
        Some(body) => request
            .header("content-type", "application/json")
            .body(Body::from(body.to_string())),
        None => request.body(Body::empty()),
    }
    .expect("a request");
    let answer = async {
        let response = app.clone().oneshot(request).await.expect("infallible");
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map(|collected| collected.to_bytes().to_vec())
            .unwrap_or_default();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    };
    match patience {
        Some(patience) => tokio::time::timeout(patience, answer).await.ok(),
        None => Some(answer.await),
    }
}
