//! A TCP proxy in front of a test server that can delay or stall what crosses it. There is no
//! netem and no iptables on the test machines; this is how tests put distance, or a partition,
//! between the gateway and Redis.
//!
//! A stalled direction holds the data it has read (and, behind it, the kernel's buffers) until
//! the stall ends, then delivers it: what a network partition that heals does to a TCP
//! connection whose ends kept it open. Commands sent during a partition may so reach Redis long
//! after their sender gave up on them, which is exactly what lock operations must survive.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Which directions a partition stalls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partition {
    /// Everything flows.
    Healed,
    /// Requests reach the server; replies do not come back.
    RepliesLost,
    /// Nothing crosses, either way.
    Both,
}

#[derive(Debug, Default)]
struct Controls {
    reply_delay_ms: AtomicU64,
    /// Client to server.
    stall_up: AtomicBool,
    /// Server to client.
    stall_down: AtomicBool,
}

#[derive(Debug)]
pub struct LatencyProxy {
    port: u16,
    controls: Arc<Controls>,
    task: JoinHandle<()>,
}

impl LatencyProxy {
    /// Proxies 127.0.0.1:`upstream`, delaying each reply chunk by `delay`.
    pub async fn start(upstream: u16, delay: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let port = listener.local_addr().expect("addr").port();
        let controls = Arc::new(Controls::default());
        controls
            .reply_delay_ms
            .store(delay.as_millis() as u64, Ordering::Relaxed);
        let shared = controls.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let controls = shared.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::join!(
                        pump(client_read, server_write, &controls, Direction::Up),
                        pump(server_read, client_write, &controls, Direction::Down)
                    );
                });
            }
        });
        Self {
            port,
            controls,
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn set_delay(&self, delay: Duration) {
        self.controls
            .reply_delay_ms
            .store(delay.as_millis() as u64, Ordering::Relaxed);
    }

    pub fn partition(&self, partition: Partition) {
        let (up, down) = match partition {
            Partition::Healed => (false, false),
            Partition::RepliesLost => (false, true),
            Partition::Both => (true, true),
        };
        self.controls.stall_up.store(up, Ordering::Relaxed);
        self.controls.stall_down.store(down, Ordering::Relaxed);
    }
}

#[derive(Debug, Clone, Copy)]
enum Direction {
    Up,
    Down,
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    controls: &Controls,
    direction: Direction,
) {
    let stalled = || match direction {
        Direction::Up => controls.stall_up.load(Ordering::Relaxed),
        Direction::Down => controls.stall_down.load(Ordering::Relaxed),
    };
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Direction::Down = direction {
            let delay = controls.reply_delay_ms.load(Ordering::Relaxed);
            if delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
        }
        while stalled() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

impl Drop for LatencyProxy {
    fn drop(&mut self) {
        // Let stalled connections drain and end with their sockets.
        self.partition(Partition::Healed);
        self.task.abort();
    }
}
