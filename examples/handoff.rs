//! Hand-off benchmark: CLIENTS clients contend for one lock with `wait_ms`; each takes it,
//! releases it at once, and asks again. Hand-off latency is the time from one holder's 204 on
//! release to the next holder's 201, both seen by this process, pairing grants by fence. It
//! can be negative: the release takes effect in Redis before its 204 travels back, and the
//! next holder's 201 sometimes arrives first.
//!
//! Mutual exclusion is checked on the way: no grant may be seen before the previous holder
//! sent its release.
//!
//! Usage: cargo run --release --example handoff -- GATEWAY_URL[,GATEWAY_URL…] [CLIENTS=32]
//!        [SECONDS=10] [fair]
//! With several gateways (one Redis behind them), client `i` uses gateway `i mod n`; with
//! `fair`, the clients wait in the lock's fair queue (`"fair": true`).
//! Prints one line of `key=value` figures for bench/waiting.sh.

use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct Grant {
    token: String,
    fence: u64,
}

struct Cycle {
    fence: u64,
    /// The 201 arrived.
    granted: Instant,
    /// The DELETE is about to be sent: the holder stops relying on the lock.
    releasing: Instant,
    /// The 204 arrived.
    released: Instant,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let gateways = args
        .next()
        .ok_or("usage: handoff GATEWAY_URL[,GATEWAY_URL…] [CLIENTS] [SECONDS] [fair]")?;
    let clients: usize = args.next().map_or(Ok(32), |a| a.parse())?;
    let seconds: u64 = args.next().map_or(Ok(10), |a| a.parse())?;
    let fair = args.next().as_deref() == Some("fair");
    lockgate::tls::install_crypto_provider();
    let urls: Vec<String> = gateways
        .split(',')
        .map(|gateway| format!("{}/locks/bench:handoff", gateway.trim_end_matches('/')))
        .collect();
    let until = Instant::now() + Duration::from_secs(seconds);
    let body = if fair {
        json!({"wait_ms": 30000, "ttl_ms": 10000, "fair": true})
    } else {
        json!({"wait_ms": 30000, "ttl_ms": 10000})
    };

    let mut tasks = Vec::new();
    for i in 0..clients {
        // One connection per client, as separate processes would have.
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()?;
        let url = urls[i % urls.len()].clone();
        let body = body.clone();
        tasks.push(tokio::spawn(async move {
            let mut cycles = Vec::new();
            while Instant::now() < until {
                let response = http.post(&url).json(&body).send().await?;
                if response.status() != 201 {
                    return Err(format!("acquire answered {}", response.status()).into());
                }
                let granted = Instant::now();
                let grant: Grant = response.json().await?;
                let releasing = Instant::now();
                let released = http
                    .delete(&url)
                    .header("Lock-Token", &grant.token)
                    .send()
                    .await?;
                if released.status() != 204 {
                    return Err(format!("release answered {}", released.status()).into());
                }
                cycles.push(Cycle {
                    fence: grant.fence,
                    granted,
                    releasing,
                    released: Instant::now(),
                });
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(cycles)
        }));
    }
    let mut cycles = Vec::new();
    for task in tasks {
        cycles.extend(task.await?.map_err(|e| e.to_string())?);
    }
    cycles.sort_by_key(|c| c.fence);

    let mut handoffs_ms = Vec::new();
    for pair in cycles.windows(2) {
        if pair[1].granted < pair[0].releasing {
            return Err(format!(
                "fence {} granted while fence {} was still held",
                pair[1].fence, pair[0].fence
            )
            .into());
        }
        let (next, previous) = (pair[1].granted, pair[0].released);
        let ms = if next >= previous {
            (next - previous).as_secs_f64()
        } else {
            -(previous - next).as_secs_f64()
        };
        handoffs_ms.push(ms * 1000.0);
    }
    handoffs_ms.sort_unstable_by(f64::total_cmp);
    let pick = |q: f64| handoffs_ms[((handoffs_ms.len() - 1) as f64 * q).round() as usize];
    println!(
        "acquisitions={} per_second={:.0} handoff_p50_ms={:.3} handoff_p99_ms={:.3} handoff_max_ms={:.3}",
        cycles.len(),
        cycles.len() as f64 / seconds as f64,
        pick(0.50),
        pick(0.99),
        pick(1.0),
    );
    Ok(())
}
