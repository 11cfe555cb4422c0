//! RESP2, the wire format: frames, their encoding, and an incremental parser (a frame may
//! arrive in pieces, several may arrive at once). Both ends use it: the server reads commands
//! (arrays of bulk strings) and a test client reads replies.

/// One RESP2 frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Vec<u8>),
    /// The null bulk string (`$-1`).
    Nil,
    Array(Vec<Frame>),
    /// The null array (`*-1`).
    NilArray,
}

impl Frame {
    pub fn ok() -> Self {
        Self::Simple("OK".into())
    }

    pub fn bulk(bytes: impl AsRef<[u8]>) -> Self {
        Self::Bulk(bytes.as_ref().to_vec())
    }

    pub fn error(text: impl Into<String>) -> Self {
        Self::Error(text.into())
    }

    /// The frame as bytes on the wire.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Self::Simple(text) => line(out, b'+', text.as_bytes()),
            Self::Error(text) => line(out, b'-', text.as_bytes()),
            Self::Integer(n) => line(out, b':', n.to_string().as_bytes()),
            Self::Bulk(bytes) => {
                line(out, b'$', bytes.len().to_string().as_bytes());
                out.extend_from_slice(bytes);
                out.extend_from_slice(b"\r\n");
            }
            Self::Nil => out.extend_from_slice(b"$-1\r\n"),
            Self::Array(items) => {
                line(out, b'*', items.len().to_string().as_bytes());
                for item in items {
                    item.encode(out);
                }
            }
            Self::NilArray => out.extend_from_slice(b"*-1\r\n"),
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// A command as a client sends it: an array of bulk strings.
    pub fn command<A: AsRef<[u8]>>(args: &[A]) -> Self {
        Self::Array(args.iter().map(|a| Self::bulk(a.as_ref())).collect())
    }
}

fn line(out: &mut Vec<u8>, kind: u8, body: &[u8]) {
    out.push(kind);
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

/// A protocol error: the bytes are not RESP2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

/// The first whole frame in `buf` and how many bytes it took; `None` while it is incomplete.
pub fn parse(buf: &[u8]) -> Result<Option<(Frame, usize)>, ProtocolError> {
    parse_at(buf, 0)
}

fn parse_at(buf: &[u8], at: usize) -> Result<Option<(Frame, usize)>, ProtocolError> {
    let Some(end) = find_crlf(buf, at + 1) else {
        return Ok(None);
    };
    let Some(&kind) = buf.get(at) else {
        return Ok(None);
    };
    let body = &buf[at + 1..end];
    let next = end + 2;
    let text = || String::from_utf8_lossy(body).into_owned();
    let number = || -> Result<i64, ProtocolError> {
        std::str::from_utf8(body)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| ProtocolError(format!("not a number: {:?}", text())))
    };
    match kind {
        b'+' => Ok(Some((Frame::Simple(text()), next))),
        b'-' => Ok(Some((Frame::Error(text()), next))),
        b':' => Ok(Some((Frame::Integer(number()?), next))),
        b'$' => {
            let len = number()?;
            if len < 0 {
                return Ok(Some((Frame::Nil, next)));
            }
            let len = len as usize;
            if buf.len() < next + len + 2 {
                return Ok(None);
            }
            if &buf[next + len..next + len + 2] != b"\r\n" {
                return Err(ProtocolError("a bulk string without its CRLF".into()));
            }
            Ok(Some((
                Frame::Bulk(buf[next..next + len].to_vec()),
                next + len + 2,
            )))
        }
        b'*' => {
            let len = number()?;
            if len < 0 {
                return Ok(Some((Frame::NilArray, next)));
            }
            let mut items = Vec::with_capacity(len.min(1024) as usize);
            let mut at = next;
            for _ in 0..len {
                match parse_at(buf, at)? {
                    Some((item, after)) => {
                        items.push(item);
                        at = after;
                    }
                    None => return Ok(None),
                }
            }
            Ok(Some((Frame::Array(items), at)))
        }
        other => Err(ProtocolError(format!(
            "unknown frame type {:?} (inline commands are not simulated)",
            other as char
        ))),
    }
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| p + from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_parses_back_from_its_bytes_whole_or_in_pieces() {
        let frame = Frame::Array(vec![
            Frame::bulk("EVALSHA"),
            Frame::Integer(-3),
            Frame::Nil,
            Frame::Simple("OK".into()),
            Frame::Error("ERR no".into()),
            Frame::Array(vec![]),
            Frame::NilArray,
            Frame::bulk("a\r\nb"),
        ]);
        let bytes = frame.to_bytes();
        assert_eq!(parse(&bytes), Ok(Some((frame.clone(), bytes.len()))));
        for cut in 0..bytes.len() {
            assert_eq!(parse(&bytes[..cut]), Ok(None), "cut at {cut}");
        }
    }
}
