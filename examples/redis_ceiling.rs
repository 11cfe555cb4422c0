//! What one lock operation costs Redis, next to the raw `SET key token NX PX`: each phase sends
//! its operations the way lockgate sends them (its own Redis backend: scripts, or native
//! commands where the server has them), from many concurrent tasks over one multiplexed
//! connection, which pipelines them. Per phase it prints operations per second and the Redis
//! CPU time per operation (`INFO cpu`, user + sys), then each against `SET NX PX`.
//!
//! Phases, on `COUNT` distinct names: raw `SET NX PX` (unique keys, left to expire), lockgate
//! acquire, renew, release. With `--native off` release and renew use Lua even where the
//! server has native commands.
//!
//! With `--residue` it runs only acquire and release, and reports what they left in Redis: keys
//! and `used_memory` before and after (lockgate keeps nothing per name once a lock is gone).
//!
//! Usage: cargo run --release --example redis_ceiling -- redis://HOST:PORT [COUNT] [--native auto|off] [--residue]

use std::sync::Arc;
use std::time::{Duration, Instant};

use lockgate::backend::redis::{NativeCommands, RedisBackend, RedisOptions, RedisTarget};
use lockgate::backend::{
    AcquireOutcome, GrantAttempt, LeaseRequest, LeaseStore, Leased, ReleaseOutcome, RenewAttempt,
    RenewOutcome,
};
use lockgate::name::LockName;

/// Concurrent tasks: enough to keep pipelines full.
const TASKS: usize = 256;
const TTL: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy)]
struct Phase {
    ops_per_second: f64,
    cpu_micros_per_op: f64,
}

async fn redis_cpu(conn: &mut redis::aio::MultiplexedConnection) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(conn)
        .await
        .expect("INFO cpu");
    info.lines()
        .filter(|l| l.starts_with("used_cpu_user:") || l.starts_with("used_cpu_sys:"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
        .sum()
}

/// Runs `op(i)` for i in 0..count from [`TASKS`] tasks and measures it.
async fn measure<F, Fut>(conn: &mut redis::aio::MultiplexedConnection, count: usize, op: F) -> Phase
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let cpu_before = redis_cpu(conn).await;
    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (op, next) = (op.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= count {
                        return;
                    }
                    op(i).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = redis_cpu(conn).await - cpu_before;
    Phase {
        ops_per_second: count as f64 / elapsed,
        cpu_micros_per_op: cpu * 1e6 / count as f64,
    }
}

/// Keys in the database and `used_memory`.
async fn state(conn: &mut redis::aio::MultiplexedConnection) -> (u64, u64) {
    let keys: u64 = redis::cmd("DBSIZE")
        .query_async(conn)
        .await
        .expect("DBSIZE");
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(conn)
        .await
        .expect("INFO memory");
    let used = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    (keys, used)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let url = args
        .first()
        .ok_or("usage: redis_ceiling redis://HOST:PORT [COUNT] [--native auto|off]")?
        .clone();
    let count: usize = args
        .get(1)
        .filter(|a| !a.starts_with("--"))
        .map_or(Ok(200_000), |a| a.parse())?;
    let residue = args.iter().any(|a| a == "--residue");
    let native = match args.iter().position(|a| a == "--native") {
        Some(i) if args.get(i + 1).map(String::as_str) == Some("off") => NativeCommands::Off,
        _ => NativeCommands::Auto,
    };
    lockgate::tls::install_crypto_provider();
    let backend = Arc::new(RedisBackend::new(RedisOptions {
        target: RedisTarget::Url(url.clone()),
        key_prefix: "ceiling:".into(),
        timeout: Duration::from_secs(30),
        wait_pool_size: 1,
        pubsub_linger: Duration::from_secs(30),
        native_commands: native,
        ca_certificates: None,
        metrics: Arc::default(),
        reconnected: Arc::default(),
        data_loss: None,
        transport: None,
    })?);
    let client = redis::Client::open(url.as_str())?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let raw = client.get_multiplexed_async_connection().await?;
    // Connect the backend (and load its scripts) before measuring.
    backend.ping().await?;
    let run = std::process::id();
    let before = state(&mut conn).await;

    let setnx = if residue {
        None
    } else {
        Some(
            measure(&mut conn, count, move |i| {
                let mut raw = raw.clone();
                async move {
                    let set: Option<String> = redis::cmd("SET")
                        .arg(format!("raw:{run}:{i}"))
                        .arg("Yq3v7M1b0nqzT0m6k9xW2A.1795449363840090")
                        .arg("NX")
                        .arg("PX")
                        .arg(TTL.as_millis() as u64)
                        .query_async(&mut raw)
                        .await
                        .expect("SET");
                    assert!(set.is_some());
                }
            })
            .await,
        )
    };

    let tokens: Arc<Vec<std::sync::OnceLock<String>>> =
        Arc::new((0..count).map(|_| std::sync::OnceLock::new()).collect());
    let name = move |i: usize| LockName::from_string(format!("{run}:{i}")).expect("a lock name");
    let acquire = {
        let (backend, tokens) = (backend.clone(), tokens.clone());
        measure(&mut conn, count, move |i| {
            let (backend, tokens) = (backend.clone(), tokens.clone());
            async move {
                let stem = format!("stem{i:018}");
                match backend
                    .acquire(
                        Leased::Lock(&name(i)),
                        GrantAttempt::new(&stem, &LeaseRequest::for_ttl(TTL)),
                    )
                    .await
                {
                    Ok(AcquireOutcome::Granted(lease)) => {
                        let _ = tokens[i].set(format!("{stem}.{}", lease.fence));
                    }
                    other => panic!("acquire {i}: {other:?}"),
                }
            }
        })
        .await
    };
    let renew = if residue {
        None
    } else {
        let (backend, tokens) = (backend.clone(), tokens.clone());
        Some(
            measure(&mut conn, count, move |i| {
                let (backend, tokens) = (backend.clone(), tokens.clone());
                async move {
                    let token = tokens[i].get().expect("token");
                    match backend
                        .renew(
                            Leased::Lock(&name(i)),
                            RenewAttempt {
                                token,
                                ttl: TTL,
                                ack: None,
                                one_more_hold: false,
                            },
                        )
                        .await
                    {
                        Ok(RenewOutcome::Renewed(_)) => {}
                        other => panic!("renew {i}: {other:?}"),
                    }
                }
            })
            .await,
        )
    };
    let release = {
        let (backend, tokens) = (backend.clone(), tokens.clone());
        measure(&mut conn, count, move |i| {
            let (backend, tokens) = (backend.clone(), tokens.clone());
            async move {
                let token = tokens[i].get().expect("token");
                match backend.release(Leased::Lock(&name(i)), token).await {
                    Ok(ReleaseOutcome::Released) => {}
                    other => panic!("release {i}: {other:?}"),
                }
            }
        })
        .await
    };

    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await?;
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    let version = match field("valkey_version") {
        Some(v) => format!("valkey {v}"),
        None => format!("redis {}", field("redis_version").unwrap_or("?")),
    };
    if residue {
        let after = state(&mut conn).await;
        println!(
            "server: {version}; {count} distinct names acquired and released ({:.0} and {:.0} ops/s)",
            acquire.ops_per_second, release.ops_per_second
        );
        println!(
            "keys: {} before, {} after; used_memory: {} before, {} after ({:+} bytes)",
            before.0,
            after.0,
            before.1,
            after.1,
            after.1 as i64 - before.1 as i64
        );
        return Ok(());
    }
    let (setnx, renew) = (
        setnx.ok_or("no SET NX phase")?,
        renew.ok_or("no renew phase")?,
    );
    let mode = match native {
        NativeCommands::Auto => "native where offered",
        NativeCommands::Off => "Lua only",
    };
    println!(
        "server: {}; {count} operations per phase, {TASKS} concurrent tasks, one connection; {mode}",
        version
    );
    println!(
        "{:<20} {:>12} {:>14} {:>18} {:>18}",
        "phase", "ops/s", "CPU µs/op", "ops/s ÷ SET NX", "SET NX ÷ CPU/op"
    );
    for (label, phase) in [
        ("SET NX PX", setnx),
        ("acquire", acquire),
        ("renew", renew),
        ("release", release),
    ] {
        println!(
            "{label:<20} {:>12.0} {:>14.2} {:>18.2} {:>18.2}",
            phase.ops_per_second,
            phase.cpu_micros_per_op,
            phase.ops_per_second / setnx.ops_per_second,
            setnx.cpu_micros_per_op / phase.cpu_micros_per_op,
        );
    }
    Ok(())
}
