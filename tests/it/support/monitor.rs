//! What a real server ran, as `MONITOR` tells it: every command a client sent, with the
//! server's clock when it ran and the client that sent it (commands run inside scripts are
//! left out: a replay sends the script). The corpus of the simulated Redis's comparison.

use std::time::Duration;

use sim_redis::Frame;
use sim_redis::resp;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// One command as the server ran it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// The server's clock, microseconds since the epoch.
    pub at_us: i64,
    /// The client, as `ip:port`.
    pub client: String,
    pub args: Vec<Vec<u8>>,
}

/// The argument of the `PING` that ends a recording.
const END_MARK: &[u8] = b"lockgate-monitor-end-mark";

/// A `MONITOR` connection, recording until stopped.
#[derive(Debug)]
pub struct Monitor {
    port: u16,
    task: JoinHandle<Vec<Ran>>,
}

impl Monitor {
    /// Starts monitoring the server on `port`; returns once the server confirmed.
    pub async fn start(port: u16) -> Self {
        let mut stream = TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect to monitor");
        stream
            .write_all(b"*1\r\n$7\r\nMONITOR\r\n")
            .await
            .expect("MONITOR");
        let mut buf = Vec::new();
        let first = next_frame(&mut stream, &mut buf).await;
        assert_eq!(first, Some(Frame::ok()), "MONITOR confirmed");
        let task = tokio::spawn(async move {
            let mut ran = Vec::new();
            while let Some(Frame::Simple(line)) = next_frame(&mut stream, &mut buf).await {
                let Some(command) = parse_line(&line) else {
                    continue;
                };
                if command.args.last().map(Vec::as_slice) == Some(END_MARK) {
                    break;
                }
                ran.push(command);
            }
            ran
        });
        Self { port, task }
    }

    /// Every command the server ran until now, in the order it ran them: a `PING` of our own,
    /// told after all of them, ends the recording.
    pub async fn stop(self) -> Vec<Ran> {
        let mut marker = TcpStream::connect(("127.0.0.1", self.port))
            .await
            .expect("connect");
        let ping = Frame::command(&[b"PING".as_slice(), END_MARK]).to_bytes();
        marker.write_all(&ping).await.expect("PING");
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("the monitor saw its end mark")
            .expect("the monitor task")
    }
}

async fn next_frame(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Frame> {
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        if let Ok(Some((frame, used))) = resp::parse(buf) {
            buf.drain(..used);
            return Some(frame);
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// `1733412345.123456 [0 127.0.0.1:5555] "SET" "k" "v"`; `None` for a command a script ran
/// (`[0 lua]`).
fn parse_line(line: &str) -> Option<Ran> {
    let (time, rest) = line.split_once(' ')?;
    let (secs, micros) = time.split_once('.')?;
    let at_us = secs.parse::<i64>().ok()? * 1_000_000 + micros.parse::<i64>().ok()?;
    let rest = rest.strip_prefix('[')?;
    let (who, args) = rest.split_once("] ")?;
    let (_db, client) = who.split_once(' ')?;
    if client == "lua" {
        return None;
    }
    Some(Ran {
        at_us,
        client: client.to_owned(),
        args: unquote(args.as_bytes()),
    })
}

/// The arguments as `sdscatrepr` wrote them: quoted, with `\\`, `\"`, `\n`, `\r`, `\t`, `\a`,
/// `\b` and `\xHH`.
fn unquote(mut text: &[u8]) -> Vec<Vec<u8>> {
    let mut args = Vec::new();
    while let Some(start) = text.iter().position(|b| *b == b'"') {
        text = &text[start + 1..];
        let mut arg = Vec::new();
        let mut i = 0;
        while i < text.len() && text[i] != b'"' {
            if text[i] == b'\\' && i + 1 < text.len() {
                i += 1;
                match text[i] {
                    b'n' => arg.push(b'\n'),
                    b'r' => arg.push(b'\r'),
                    b't' => arg.push(b'\t'),
                    b'a' => arg.push(7),
                    b'b' => arg.push(8),
                    b'x' if i + 2 < text.len() => {
                        let hex = std::str::from_utf8(&text[i + 1..i + 3]).unwrap_or("00");
                        arg.push(u8::from_str_radix(hex, 16).unwrap_or(0));
                        i += 2;
                    }
                    other => arg.push(other),
                }
            } else {
                arg.push(text[i]);
            }
            i += 1;
        }
        args.push(arg);
        text = &text[(i + 1).min(text.len())..];
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_monitor_line_reads_back_as_the_command_sent() {
        let ran = parse_line(r#"1733412345.000042 [0 127.0.0.1:5555] "SET" "a\"b\\c" "\n\x01""#)
            .expect("a line");
        assert_eq!(ran.at_us, 1_733_412_345_000_042);
        assert_eq!(ran.client, "127.0.0.1:5555");
        assert_eq!(
            ran.args,
            vec![b"SET".to_vec(), b"a\"b\\c".to_vec(), vec![b'\n', 1]]
        );
        assert_eq!(parse_line(r#"1.000001 [0 lua] "GET" "k""#), None);
    }
}
