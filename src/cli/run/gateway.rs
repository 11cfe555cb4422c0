//! What `lockgate run` asks of the gateway: the acquire (waiting, replayed after a signal),
//! renewals, and the release.

use super::*;

impl Runner {
    /// What every acquire of this run sends (a replay must send the same).
    pub(super) fn acquire_body(&self, wait: Duration) -> serde_json::Value {
        let lease = AcquireBody {
            ttl_ms: Some(millis(self.ttl)),
            wait_ms: Some(millis(wait)),
            owner: Some(self.owner.clone()),
            metadata: self.metadata.clone(),
            max_hold_ms: self.max_hold.map(millis),
            min_hold_ms: self.min_hold.map(millis),
            mode: self.shared.then_some(LockMode::Shared),
            fair: self.fair.map(|_| true),
            priority: self.fair.map(u64::from),
            ..AcquireBody::default()
        };
        let mut body = serde_json::to_value(lease).unwrap_or_default();
        if let Some(permits) = self.permits {
            body["permits"] = permits.into();
        }
        if let Some(set) = &self.set {
            body["names"] = set.clone().into();
        }
        body
    }

    /// After a signal cut the acquire short: its grant may have been made and its answer
    /// delivered to a response this process will never read. The same idempotency key finds
    /// that grant again (without waiting), and it is released; best effort, briefly.
    pub(super) async fn give_back(&self) {
        let body = self.acquire_body(Duration::ZERO);
        let replay = self.client.acquire(
            self.name.as_str(),
            &body,
            Some(self.key.expose()),
            Some(Duration::from_secs(2)),
        );
        if let Ok(Answer::Done { body, .. }) = replay.await {
            self.release(&body.token).await;
        }
    }

    /// Acquires the lock, waiting up to `--wait` (for ever without it).
    pub(super) async fn acquire(&self) -> Result<(LockGrantBody, Instant), Failure> {
        let deadline = self.wait.map(|wait| Instant::now() + wait);
        let passed = |deadline: Option<Instant>| deadline.is_some_and(|d| Instant::now() >= d);
        let key = &self.key;
        let started = Instant::now();
        // --verbose tries once first, so that who holds the lock is said at once, not after
        // the first chunk of waiting.
        let mut chunk = if self.verbose {
            Duration::ZERO
        } else {
            WAIT_CHUNK
        };
        let mut last_sent: Option<Instant> = None;
        loop {
            if let Some(last) = last_sent {
                let pause = (RETRY_FLOOR + jitter()).saturating_sub(last.elapsed());
                tokio::time::sleep(pause).await;
            }
            let wait = deadline.map_or(chunk, |d| {
                d.saturating_duration_since(Instant::now()).min(chunk)
            });
            let body = self.acquire_body(wait);
            let sent = Instant::now();
            last_sent = Some(sent);
            let answer = self
                .client
                .acquire(
                    self.name.as_str(),
                    &body,
                    Some(key.expose()),
                    Some(wait + REQUEST_SLACK),
                )
                .await;
            match answer {
                Ok(Answer::Done { body, .. }) => {
                    if self.verbose {
                        eprintln!(
                            "lockgate run: acquired {} (fence {}) after {}",
                            self.label(),
                            body.fence,
                            seconds(started.elapsed())
                        );
                    }
                    return Ok((body, sent));
                }
                Err(ClientError::Connect(err)) => {
                    return Err(fail(
                        EXIT_GATEWAY,
                        format!(
                            "cannot reach the gateway at {}: {err}",
                            crate::config::secrets::without_userinfo(
                                &self.client.lease_url(self.name.as_str())
                            )
                        ),
                    ));
                }
                // The answer may have been lost after a grant: the same key finds it again.
                Err(err) if !passed(deadline) => {
                    eprintln!("lockgate run: acquire did not complete ({err}); retrying");
                }
                Err(err) => return Err(fail(EXIT_GATEWAY, format!("acquire failed: {err}"))),
                Ok(Answer::Refused {
                    status, problem, ..
                }) if status == StatusCode::CONFLICT
                    && problem.type_uri.ends_with("/lock-held")
                    && passed(deadline) =>
                {
                    if self.verbose {
                        self.tell_wait(started).await;
                    }
                    let within = self.wait.map_or_else(String::new, |w| {
                        format!(" within {}", humantime::format_duration(w))
                    });
                    return Err(fail(
                        EXIT_NOT_ACQUIRED,
                        format!(
                            "{} is held by another client; not acquired{within}",
                            self.name
                        ),
                    ));
                }
                // Held: the gateway waited its chunk (or the lock's holder renewed); again.
                Ok(Answer::Refused {
                    status, problem, ..
                }) if status == StatusCode::CONFLICT
                    && problem.type_uri.ends_with("/lock-held") =>
                {
                    if self.verbose {
                        self.tell_wait(started).await;
                        chunk = WAIT_CHUNK;
                    }
                }
                Ok(Answer::Refused {
                    status,
                    retry_after,
                    ..
                }) if status == StatusCode::SERVICE_UNAVAILABLE && !passed(deadline) => {
                    let pause = retry_after
                        .unwrap_or(Duration::from_secs(1))
                        .min(deadline.map_or(Duration::MAX, |d| d - Instant::now()));
                    tokio::time::sleep(pause).await;
                }
                Ok(Answer::Refused {
                    status, problem, ..
                }) => {
                    // A gateway with a --max-wait under our chunk: ask for less.
                    if status == StatusCode::BAD_REQUEST
                        && problem.field.as_deref() == Some("wait_ms")
                        && chunk > Duration::from_secs(1)
                    {
                        chunk /= 2;
                        continue;
                    }
                    // Any other refusal is final: retrying cannot change it.
                    let kind = problem.type_uri.rsplit('/').next().unwrap_or("");
                    let hint = match status {
                        StatusCode::UNAUTHORIZED => {
                            "; set LOCKGATE_API_KEY (or --api-key) to a key the gateway knows"
                        }
                        StatusCode::FORBIDDEN => {
                            "; the key in LOCKGATE_API_KEY needs the acquire operation on this name"
                        }
                        _ => "",
                    };
                    return Err(fail(
                        EXIT_GATEWAY,
                        format!(
                            "the gateway refused the acquire ({} {kind}): {}{hint}",
                            status.as_u16(),
                            problem.detail
                        ),
                    ));
                }
            }
        }
    }

    /// `--verbose`: who holds what this run waits for, as the gateway's inspect shows it (with
    /// API keys, only where the key may inspect the name), and how long the run has waited.
    async fn tell_wait(&self, since: Instant) {
        let seen = self
            .client
            .inspect_as::<serde_json::Value>(self.name.as_str());
        let holders = match seen.await {
            Ok(Answer::Done { body, .. }) => describe_holders(&body),
            Ok(Answer::Refused { status, .. }) => Some(format!(
                "who holds it is not known (inspect answered {})",
                status.as_u16()
            )),
            Err(_) => None,
        };
        eprintln!(
            "lockgate run: waiting for {} ({} so far){}",
            self.label(),
            seconds(since.elapsed()),
            holders.map_or_else(String::new, |holders| format!(": {holders}"))
        );
    }

    /// Renews the lease held with `token`.
    pub(super) async fn renew(&self, token: &str) -> RenewOutcome {
        let sent = Instant::now();
        let body = RenewBody {
            ttl_ms: Some(millis(self.ttl)),
            ..RenewBody::default()
        };
        let timeout = renewal_interval(self.ttl).max(Duration::from_secs(1));
        match self
            .client
            .renew(self.name.as_str(), token, &body, Some(timeout))
            .await
        {
            Ok(Answer::Done { body, .. }) => RenewOutcome::Renewed {
                valid_until: sent + Duration::from_millis(body.ttl_ms),
                hold_ends: body
                    .max_hold_left_ms
                    .map(|left| sent + Duration::from_millis(left)),
            },
            Ok(Answer::Refused { status, .. }) if status == StatusCode::NOT_FOUND => {
                RenewOutcome::Lost(EXIT_LOST, "the lock is no longer held".into())
            }
            Ok(Answer::Refused { problem, .. })
                if problem.type_uri.ends_with("/max-hold-reached") =>
            {
                RenewOutcome::Lost(
                    EXIT_MAX_HOLD,
                    "it was held for as long as its max hold allows".into(),
                )
            }
            Ok(Answer::Refused { status, .. }) if status == StatusCode::CONFLICT => {
                RenewOutcome::Lost(EXIT_LOST, "another client holds the lock now".into())
            }
            Ok(Answer::Refused { status, .. }) if status == StatusCode::GONE => {
                RenewOutcome::Lost(EXIT_REVOKED, "an operator revoked the lock".into())
            }
            Ok(Answer::Refused { status, .. }) => {
                RenewOutcome::Failed(format!("the gateway answered {status}"))
            }
            Err(err) => RenewOutcome::Failed(err.to_string()),
        }
    }

    /// Releases the lock; failures only cost the rest of the lease.
    pub(super) async fn release(&self, token: &str) {
        let released = self
            .client
            .release(self.name.as_str(), token, Some(REQUEST_SLACK))
            .await;
        match released {
            Ok(Answer::Done {
                body: Some(body), ..
            }) => {
                // Released before --min-hold: the gateway keeps it until then.
                if let Some(until) = body["held_until"].as_str() {
                    eprintln!(
                        "lockgate run: {} stays held until {until} (--min-hold)",
                        self.name
                    );
                }
            }
            Ok(Answer::Done { .. }) => {}
            Ok(Answer::Refused { status, .. }) if status == StatusCode::NOT_FOUND => {}
            Ok(Answer::Refused { status, .. }) => eprintln!(
                "lockgate run: releasing {} answered {status}; it expires at its ttl",
                self.name
            ),
            Err(err) => eprintln!(
                "lockgate run: could not release {} ({err}); it expires at its ttl",
                self.name
            ),
        }
    }
}

/// What an inspect answer says of who holds the lease: a lock's holder (or readers), a
/// semaphore's permits, a set's locks. `None` when it says nothing readable.
fn describe_holders(seen: &serde_json::Value) -> Option<String> {
    let left = |grant: &serde_json::Value| {
        grant["ttl_ms"].as_u64().map_or_else(
            || "with no expiry".to_owned(),
            |ms| format!("for another {}", seconds(Duration::from_millis(ms))),
        )
    };
    let owner = |grant: &serde_json::Value| {
        grant["owner"].as_str().map_or_else(
            || "a holder that gave no owner".to_owned(),
            |owner| format!("{owner:?}"),
        )
    };
    let waiting = |seen: &serde_json::Value| match seen["waiting"].as_u64() {
        Some(n) if n > 0 => format!("; {n} waiting at this gateway"),
        _ => String::new(),
    };
    if let Some(holders) = seen["holders"].as_array() {
        let owners: Vec<String> = holders.iter().map(owner).collect();
        return Some(format!(
            "{} of {} permits held, by {}{}",
            seen["in_use"].as_u64()?,
            seen["permits"].as_u64()?,
            owners.join(", "),
            waiting(seen)
        ));
    }
    if let Some(locks) = seen["locks"].as_array() {
        let held: Vec<String> = locks
            .iter()
            .map(|lock| {
                let name = lock["name"].as_str().unwrap_or("?");
                format!("{name} held by {} {}", owner(lock), left(lock))
            })
            .collect();
        return Some(held.join("; "));
    }
    if seen["mode"].as_str() == Some("shared") {
        let readers = seen["shared_holders"].as_array().map_or(0, Vec::len);
        return Some(format!(
            "held by {readers} readers {}{}",
            left(seen),
            waiting(seen)
        ));
    }
    let fence = seen["fence"]
        .as_u64()
        .map_or_else(String::new, |fence| format!(" (fence {fence})"));
    Some(format!(
        "held by {}{fence} {}{}",
        owner(seen),
        left(seen),
        waiting(seen)
    ))
}

/// A duration as a person reads it in a wait: whole seconds (`0s`, `42s`, `1h 2m 3s`).
fn seconds(duration: Duration) -> String {
    humantime::format_duration(Duration::from_secs(duration.as_secs())).to_string()
}
