//! A client that hangs up while its acquire is in flight, in a simulated world made for it:
//! the gateway withdraws whatever that attempt granted, even when the attempt reaches Redis
//! after the withdrawal was decided (docs/api.md, "No orphan grants").

use std::sync::Arc;
use std::time::Duration;

use axum::http::Method;
use serde_json::json;
use sim_redis::{Clock, Server};

use super::clients::send;
use super::network::{Links, Network};
use super::{EPOCH_US, REDIS, keyspace};
use crate::support::gateway::redis_config;

/// An acquire that asks for a replica's acknowledgement travels on a connection for `WAIT`, and
/// its withdrawal on the command connection. Here the attempt's bytes take 300 ms to reach
/// Redis, its client hangs up after 50 ms, and the network is quick again before the withdrawal
/// goes out: a withdrawal sent at once reached Redis first, found nothing, and the attempt then
/// granted a lock nobody held until its ttl (30 s here). The withdrawal must follow the
/// attempt's answer.
#[test]
fn a_hung_up_acquire_asking_for_replicas_leaves_no_lock_behind() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(Box::pin(async {
        let _random_bytes = lockgate::entropy::simulate(7);
        let network = Network::new();
        let server = Server::new(Clock::ticking_from(EPOCH_US));
        network
            .nodes
            .lock()
            .expect("network")
            .insert(REDIS.to_owned(), server.clone());
        let wiring = lockgate::app::Wiring {
            redis_transport: Some(Arc::new(Links {
                network: network.clone(),
                gateway: 0,
            })),
        };
        let config = redis_config(&format!("redis://{REDIS}"));
        let app = lockgate::app::assemble_with(&config, &wiring)
            .expect("a gateway")
            .router;
        let body = json!({"ttl_ms": 30000, "replicas": 1, "replica_timeout_ms": 100});

        // The command connection and one for `WAIT`, opened and idle (twice: the first
        // connection for `WAIT`, opened before the command connection, is not reused after it).
        for _ in 0..2 {
            let (status, granted) = send(&app, Method::POST, "/locks/warm", Some(&body), &[], None)
                .await
                .expect("an answer");
            assert_eq!(status, 201, "{granted}");
            let token = granted["token"].as_str().expect("a token");
            let headers = [("lock-token", Some(token))];
            let released = send(&app, Method::DELETE, "/locks/warm", None, &headers, None).await;
            assert_eq!(released.map(|(status, _)| status), Some(204));
        }
        let fence_counter = |server: &Server| {
            server
                .snapshot()
                .get(&b"lockgate:fences"[..])
                .map(|entry| format!("{:?}", entry.value))
        };
        let counter_before = fence_counter(&server);
        assert!(
            counter_before.is_some(),
            "{:?}",
            keyspace(&server.snapshot())
        );

        network.weather().delay = Duration::from_millis(300);
        let hung_up = send(
            &app,
            Method::POST,
            "/locks/orphan",
            Some(&body),
            &[],
            Some(Duration::from_millis(50)),
        )
        .await;
        assert!(hung_up.is_none(), "answered in 50 ms: {hung_up:?}");
        network.weather().delay = Duration::ZERO;

        // The attempt reaches Redis at 300 ms and is granted (the fence counter moves); what it
        // granted must be gone soon after its answer, long before its ttl.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
        loop {
            let granted = fence_counter(&server) != counter_before;
            let held = server.snapshot().contains_key(&b"lockgate:{orphan}"[..]);
            if granted && !held {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "granted: {granted}, held: {held}: {:?}",
                keyspace(&server.snapshot())
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }));
}
