//! A TCP proxy in front of a test server that delays everything the server sends back.
//! There is no netem on the test machines; this is how tests put distance between the gateway
//! and Redis.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

#[derive(Debug)]
pub struct LatencyProxy {
    port: u16,
    reply_delay_ms: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl LatencyProxy {
    /// Proxies 127.0.0.1:`upstream`, delaying each reply chunk by `delay`.
    pub async fn start(upstream: u16, delay: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let port = listener.local_addr().expect("addr").port();
        let reply_delay_ms = Arc::new(AtomicU64::new(delay.as_millis() as u64));
        let delay = reply_delay_ms.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let delay = delay.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    let no_delay = Arc::new(AtomicU64::new(0));
                    tokio::join!(
                        pump(client_read, server_write, no_delay),
                        pump(server_read, client_write, delay)
                    );
                });
            }
        });
        Self {
            port,
            reply_delay_ms,
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn set_delay(&self, delay: Duration) {
        self.reply_delay_ms
            .store(delay.as_millis() as u64, Ordering::Relaxed);
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay_ms: Arc<AtomicU64>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let delay = delay_ms.load(Ordering::Relaxed);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

impl Drop for LatencyProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
