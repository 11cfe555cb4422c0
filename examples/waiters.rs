//! Many waiting clients: takes a lock, then opens COUNT connections that each ask for it with
//! a long `wait_ms`, and returns once all COUNT wait in the gateway. Run the gateway with
//! `--max-waiters COUNT`: a probe that would wait then answers 503 too-many-waiters, which is
//! how this program knows the line is full. It then prints `ready` and keeps every connection
//! open until stdin closes, so bench/waiting.sh can read the gateway's memory meanwhile.
//!
//! The gateway needs `--max-wait` of at least 10 minutes (the wait asked for here).
//!
//! Usage: cargo run --release --example waiters -- HOST:PORT COUNT [BATCH=100]
//! BATCH connections are opened at once: 100 makes a steady ramp (10,000 clients arrive in
//! about a second); 500 a burst.

use std::io::Read;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn request(wait_ms: u64) -> Vec<u8> {
    let body = format!(r#"{{"wait_ms": {wait_ms}, "ttl_ms": 60000}}"#);
    format!(
        "POST /locks/bench:waiters HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().ok_or("usage: waiters HOST:PORT COUNT")?;
    let count: usize = args
        .next()
        .ok_or("usage: waiters HOST:PORT COUNT")?
        .parse()?;
    let batch_size: usize = args.next().map_or(Ok(100), |a| a.parse())?;
    lockgate::tls::install_crypto_provider();
    let http = reqwest::Client::new();
    let base = format!("http://{addr}");

    let holder = http
        .post(format!("{base}/locks/bench:waiters"))
        .json(&serde_json::json!({"ttl_ms": 600_000}))
        .send()
        .await?;
    if holder.status() != 201 {
        return Err(format!("the holder got {}", holder.status()).into());
    }
    // Read the answer: a grant whose response is abandoned unread is released by the gateway.
    holder.bytes().await?;

    let waiting = request(600_000);
    let mut streams = Vec::with_capacity(count);
    while streams.len() < count {
        let batch = batch_size.min(count - streams.len());
        let opened = futures_util::future::try_join_all((0..batch).map(|_| async {
            let mut stream = TcpStream::connect(&addr).await?;
            stream.write_all(&waiting).await?;
            Ok::<_, std::io::Error>(stream)
        }))
        .await?;
        streams.extend(opened);
    }

    // Full when one more would-be waiter is turned away. A probe occupies a place for a
    // moment, so a real request arriving then can be turned away too: any request that got an
    // answer instead of waiting is sent again on a new connection.
    loop {
        let mut answered = Vec::new();
        for (i, stream) in streams.iter().enumerate() {
            let mut byte = [0u8; 1];
            match stream.try_read(&mut byte) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                _ => answered.push(i),
            }
        }
        for i in answered {
            let mut stream = TcpStream::connect(&addr).await?;
            stream.write_all(&waiting).await?;
            streams[i] = stream;
        }
        let probe = http
            .post(format!("{base}/locks/bench:waiters"))
            .json(&serde_json::json!({"wait_ms": 1}))
            .send()
            .await?;
        if probe.status() == 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("ready {count}");

    // Hold the connections until told to stop.
    tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
    })
    .await?;
    drop(streams);
    Ok(())
}
