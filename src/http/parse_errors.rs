//! The answers hyper gives on its own, as problem+json.
//!
//! When a request cannot be parsed (a malformed request line or header, a head over hyper's
//! size limit), hyper answers it without calling lockgate: a bare status with `connection:
//! close` and `content-length: 0`, then closes the connection. hyper has no hook for that
//! answer, so [`ProblemIo`], the connection's I/O as hyper sees it, recognises it as it is
//! written and writes a problem document with the same status instead. Only that exact shape
//! is rewritten: a status line of 4xx or 5xx directly followed by `connection: close` and
//! `content-length: 0`. lockgate's own answers never have it (its errors carry a body, and
//! their first header is `content-type`), so they pass through untouched, and the check costs
//! a few byte comparisons per write.
//!
//! This module owns only that translation; it must not touch requests, which hyper parses.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::body;
use super::problem::{Problem, ProblemKind};

/// What follows the status line of an answer hyper wrote on its own.
const BARE_ANSWER: &[u8] = b"\r\nconnection: close\r\ncontent-length: 0\r\n";

/// A connection's I/O, rewriting hyper's own error answers as problem+json.
#[derive(Debug)]
pub struct ProblemIo<T> {
    inner: T,
    /// A rewritten answer being written: its bytes, how many are written, and how many bytes
    /// of hyper's answer it stands for (reported to hyper once it is all written).
    rewrite: Option<(Vec<u8>, usize, usize)>,
}

impl<T> ProblemIo<T> {
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            rewrite: None,
        }
    }
}

/// Where in `buf` an answer of hyper's own starts and ends, with its status code.
fn bare_answer(buf: &[u8]) -> Option<(usize, usize, u16)> {
    // Every answer is written through here: rule most out with one fast search.
    static BARE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(BARE_ANSWER));
    BARE.find(buf)?;
    let mut from = 0;
    while let Some(found) = find(&buf[from..], b"HTTP/1.1 ") {
        let start = from + found;
        let line_end = start + find(&buf[start..], b"\r\n")?;
        let status = buf.get(start + 9..start + 12)?;
        let code = std::str::from_utf8(status).ok()?.parse::<u16>().ok()?;
        if (400..600).contains(&code) && buf[line_end..].starts_with(BARE_ANSWER) {
            let end = line_end + find(&buf[line_end..], b"\r\n\r\n")? + 4;
            return Some((start, end, code));
        }
        from = start + 9;
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

/// The problem+json answer that replaces hyper's bare one with status `code`.
fn problem_answer(code: u16) -> Vec<u8> {
    let (kind, detail) = match code {
        431 => (
            ProblemKind::HeadersTooLarge,
            "the request line and headers are far larger than this server accepts",
        ),
        400..=499 => (
            ProblemKind::InvalidRequest,
            "the request is not valid HTTP/1.1 (request line or headers)",
        ),
        _ => (
            ProblemKind::Internal,
            "the connection failed while the request was read",
        ),
    };
    let mut problem = Problem::new(kind, detail);
    problem.status = code;
    let body = body::to_body(&problem).unwrap_or_default();
    let reason = axum::http::StatusCode::from_u16(code)
        .ok()
        .and_then(|status| status.canonical_reason())
        .unwrap_or("Error");
    let mut answer = format!(
        "HTTP/1.1 {code} {reason}\r\ncontent-type: application/problem+json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    answer
}

impl<T: AsyncWrite + Unpin> ProblemIo<T> {
    /// Writes the pending rewrite; Ready with the length of hyper's answer once it is all out.
    fn poll_rewrite(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        while let Some((bytes, written, stands_for)) = &mut self.rewrite {
            if *written == bytes.len() {
                let consumed = *stands_for;
                self.rewrite = None;
                return Poll::Ready(Ok(consumed));
            }
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        Poll::Ready(Ok(0))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for ProblemIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ProblemIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.rewrite.is_some() {
            return this.poll_rewrite(cx);
        }
        match bare_answer(buf) {
            // What comes before it (an earlier pipelined answer) goes out as it is.
            Some((start, _, _)) if start > 0 => {
                Pin::new(&mut this.inner).poll_write(cx, &buf[..start])
            }
            Some((_, end, code)) => {
                this.rewrite = Some((problem_answer(code), 0, end));
                this.poll_rewrite(cx)
            }
            None => Pin::new(&mut this.inner).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // hyper's own answer has no body: it is all in the first slice.
        let first = bufs.iter().find(|buf| !buf.is_empty());
        if self.rewrite.is_some() || first.is_some_and(|buf| bare_answer(buf).is_some()) {
            let first = first.map_or(&[][..], |buf| &buf[..]);
            return self.poll_write(cx, first);
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BARE_400: &[u8] = b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\ndate: Mon, 23 Nov 2026 20:08:33 GMT\r\n\r\n";

    #[test]
    fn only_hyper_s_own_answers_are_recognised() {
        assert_eq!(bare_answer(BARE_400), Some((0, BARE_400.len(), 400)));
        let mut pipelined = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}".to_vec();
        let at = pipelined.len();
        pipelined.extend_from_slice(BARE_400);
        assert_eq!(bare_answer(&pipelined), Some((at, pipelined.len(), 400)));
        for own in [
            &b"HTTP/1.1 404 Not Found\r\ncontent-type: application/problem+json\r\nconnection: close\r\ncontent-length: 10\r\n\r\n"[..],
            b"HTTP/1.1 204 No Content\r\ndate: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n",
        ] {
            assert_eq!(bare_answer(own), None, "{}", String::from_utf8_lossy(own));
        }
    }

    #[tokio::test]
    async fn a_bare_answer_is_written_as_problem_json() {
        use tokio::io::AsyncWriteExt;
        let mut out = ProblemIo::new(Vec::new());
        out.write_all(BARE_400).await.expect("write");
        let written = String::from_utf8(out.inner).expect("utf-8");
        let (head, body) = written.split_once("\r\n\r\n").expect("a head and a body");
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
        assert!(
            head.contains("content-type: application/problem+json"),
            "{head}"
        );
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let problem: serde_json::Value = serde_json::from_str(body).expect("json");
        assert_eq!(
            problem["type"],
            "https://lockgate.dev/problems/invalid-request"
        );
        assert_eq!(problem["status"], 400);
    }
}
