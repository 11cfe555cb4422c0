//! Following Sentinel's `+switch-master` announcements.
//!
//! Errors alone do not reveal every failover: a master that the Sentinels lost sight of (a
//! partition between them and it) may still accept the gateway's writes after a replica was
//! promoted in its place, and those writes are lost when it rejoins as a replica. So a task
//! stays subscribed to `+switch-master` on one of the Sentinels (the next one when that one
//! fails or stops answering PING) and, when the master of our group moves, bumps a
//! *generation*. Connections remember the generation they were opened in; one opened before
//! the latest switch is replaced before its next use.
//!
//! Announcements are missed while no Sentinel is subscribed, so after every (re)subscription
//! the task also asks the Sentinel where the master is and bumps the generation when that is
//! not where the gateway last connected.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crate::backend::AbortOnDrop;
use futures_util::StreamExt;
use redis::{Client, ConnectionAddr};
use tokio::sync::watch;

const CHANNEL: &str = "+switch-master";
/// How often the subscription to a Sentinel is checked with PING.
const PING_EVERY: Duration = Duration::from_secs(2);
/// Pause between rounds over all Sentinels when none answers.
const RETRY_ROUND: Duration = Duration::from_millis(500);

/// The generation of the master's address, bumped at every switch, and the task that bumps it.
#[derive(Debug)]
pub struct SwitchFollower {
    shared: Arc<Shared>,
    sentinels: Vec<Client>,
    timeout: Duration,
    task: OnceLock<AbortOnDrop>,
}

#[derive(Debug)]
struct Shared {
    master: String,
    generation: watch::Sender<u64>,
    /// Host and port of the master the gateway connected to last.
    connected: Mutex<Option<(String, u16)>>,
}

impl SwitchFollower {
    /// Follows the group `master` through `sentinels`; `timeout` bounds connecting and PING.
    pub fn new(sentinels: Vec<Client>, master: String, timeout: Duration) -> Self {
        Self {
            shared: Arc::new(Shared {
                master,
                generation: watch::channel(0).0,
                connected: Mutex::new(None),
            }),
            sentinels,
            timeout,
            task: OnceLock::new(),
        }
    }

    /// The current generation.
    pub fn generation(&self) -> u64 {
        *self.shared.generation.borrow()
    }

    /// Changes of the generation.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.shared.generation.subscribe()
    }

    /// Records that the gateway resolved the master to `client`'s address, and makes sure the
    /// follower runs (it starts with the first connect, inside the runtime).
    pub fn resolved(&self, client: &Client) {
        *self.shared.connected() = host_port(client.get_connection_info().addr());
        self.task.get_or_init(|| {
            let (shared, sentinels, timeout) =
                (self.shared.clone(), self.sentinels.clone(), self.timeout);
            AbortOnDrop(tokio::spawn(follow(shared, sentinels, timeout)))
        });
    }
}

impl Shared {
    fn connected(&self) -> MutexGuard<'_, Option<(String, u16)>> {
        self.connected.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bumps the generation unless the gateway is already connected to `to`.
    fn switched(&self, to: Option<(String, u16)>) {
        if to.is_some() && *self.connected() == to {
            return;
        }
        self.generation.send_modify(|g| *g += 1);
        tracing::warn!(master = %self.master, "sentinel moved the master; reconnecting");
    }
}

fn host_port(addr: &ConnectionAddr) -> Option<(String, u16)> {
    match addr {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            Some((host.clone(), *port))
        }
        _ => None,
    }
}

/// Stays subscribed on one Sentinel after another.
async fn follow(shared: Arc<Shared>, sentinels: Vec<Client>, timeout: Duration) {
    loop {
        for sentinel in &sentinels {
            if let Err(err) = listen(&shared, sentinel, timeout).await {
                tracing::debug!(error = %err, "sentinel subscription ended; trying the next sentinel");
            }
        }
        tokio::time::sleep(RETRY_ROUND).await;
    }
}

/// Listens on one Sentinel until it fails.
async fn listen(shared: &Shared, sentinel: &Client, timeout: Duration) -> redis::RedisResult<()> {
    let timed_out = || redis::RedisError::from((redis::ErrorKind::Io, "sentinel timed out"));
    let pubsub = tokio::time::timeout(timeout, sentinel.get_async_pubsub())
        .await
        .map_err(|_| timed_out())??;
    let (mut sink, mut stream) = pubsub.split();
    tokio::time::timeout(timeout, sink.subscribe(CHANNEL))
        .await
        .map_err(|_| timed_out())??;
    // Anything announced while nobody listened: compare where the master is with where the
    // gateway connected.
    let mut conn = tokio::time::timeout(timeout, sentinel.get_multiplexed_async_connection())
        .await
        .map_err(|_| timed_out())??;
    let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg(&shared.master)
        .query_async(&mut conn)
        .await?;
    drop(conn);
    let connected = shared.connected().clone();
    if addr.is_some() && connected.is_some() && connected != addr {
        shared.switched(addr);
    }
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.reset();
    loop {
        tokio::select! {
            message = stream.next() => {
                let Some(message) = message else {
                    return Err(redis::RedisError::from((redis::ErrorKind::Io, "sentinel closed the connection")));
                };
                let payload: String = message.get_payload().unwrap_or_default();
                if let Some(to) = switch_of(&payload, &shared.master) {
                    shared.switched(to);
                }
            }
            _ = ping.tick() => {
                tokio::time::timeout(timeout, sink.ping::<redis::Value>())
                    .await
                    .map_err(|_| timed_out())??;
            }
        }
    }
}

/// The new address in a `+switch-master` payload (`<name> <old ip> <old port> <new ip> <new
/// port>`) when it is about `master`; `Some(None)` when it is but the address is unreadable.
fn switch_of(payload: &str, master: &str) -> Option<Option<(String, u16)>> {
    let mut words = payload.split_whitespace();
    if words.next() != Some(master) {
        return None;
    }
    let new = words.nth(2).zip(words.next());
    Some(new.and_then(|(host, port)| Some((host.to_owned(), port.parse().ok()?))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_payloads_are_read_for_our_master_only() {
        assert_eq!(
            switch_of("locks 127.0.0.1 6379 127.0.0.1 6380", "locks"),
            Some(Some(("127.0.0.1".to_owned(), 6380)))
        );
        assert_eq!(
            switch_of("other 127.0.0.1 6379 127.0.0.1 6380", "locks"),
            None
        );
        assert_eq!(switch_of("locks garbage", "locks"), Some(None));
    }
}
