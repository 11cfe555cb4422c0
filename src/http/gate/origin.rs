//! Whom a gateway without API keys answers: DNS rebinding and cross-site requests.
//!
//! Without keys, a gateway trusts whoever reaches its port. A web page cannot reach it
//! directly (it is on loopback, or behind `kubectl port-forward`), but two browser tricks can:
//!
//! * **DNS rebinding.** A page on `rebind.attacker.example` makes its name resolve to
//!   127.0.0.1, and then its own scripts, same-origin as far as the browser knows, read and
//!   revoke every lock. Every such request carries the attacker's name in `Host`. So a keyless
//!   gateway answers only a `Host` that is an IP address (rebinding needs a name), `localhost`
//!   or a name under `.localhost` (which resolve to loopback by RFC 6761, not through DNS a
//!   page controls), or a name given in `--allowed-hosts`.
//! * **Cross-site requests.** A page anywhere can send a simple `POST` or `DELETE` through
//!   `fetch` (without reading the answer). A browser says where such a request comes from:
//!   `Origin` on every request but a `GET`/`HEAD`, and `Sec-Fetch-Site`. A request that
//!   changes something is refused when its `Origin` is neither the gateway itself (the same
//!   host and port as `Host`: the console at `/ui`) nor a name of `--allowed-hosts`, or, with
//!   no `Origin`, when `Sec-Fetch-Site` says `cross-site` or `same-site`. Clients that are not
//!   browsers (curl, the generated clients, `lockgate run`) send neither header.
//!
//! With API keys none of this applies: a page cannot know a key, and without CORS it cannot
//! send `Authorization` across origins. `--allowed-hosts '*'` turns the checks off.

use axum::http::{HeaderMap, Method, header};

/// The host names a keyless gateway answers to, besides IP addresses and `localhost`.
#[derive(Debug, Clone, Default)]
pub struct HostPolicy {
    /// Lowercase names; one starting with `.` covers the names under it.
    allowed: Vec<String>,
    /// `--allowed-hosts '*'`: every host, every origin.
    any: bool,
}

impl HostPolicy {
    /// The policy of `--allowed-hosts` (names, `.suffix` for the names under it, or `*`).
    pub fn new(allowed: &[String]) -> Self {
        Self {
            any: allowed.iter().any(|host| host == "*"),
            allowed: allowed
                .iter()
                .map(|host| host.to_ascii_lowercase())
                .collect(),
        }
    }

    /// Why a keyless gateway refuses this request, if it does.
    pub fn refusal(&self, method: &Method, headers: &HeaderMap) -> Option<&'static str> {
        if self.any {
            return None;
        }
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        if let Some(host) = host
            && !host_of(host).is_some_and(|name| self.admits_host(name))
        {
            return Some(
                "this gateway has no API keys and answers only its own host names (an IP address, localhost, or one of --allowed-hosts): a request for another name may be DNS rebinding",
            );
        }
        if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
            return None;
        }
        match headers.get(header::ORIGIN).map(|v| v.to_str()) {
            Some(Ok(origin)) => {
                let same = host.is_some_and(|host| origin_authority(origin) == Some(host));
                let allowed = origin_authority(origin)
                    .and_then(host_of)
                    .is_some_and(|name| self.names(name));
                (!same && !allowed).then_some(
                    "this gateway has no API keys and refuses requests that change locks from a web page of another origin (add its host to --allowed-hosts, or configure API keys)",
                )
            }
            Some(Err(_)) => Some("the Origin header is not text"),
            None => {
                let site = headers.get("sec-fetch-site").map(|v| v.as_bytes());
                matches!(site, Some(b"cross-site" | b"same-site")).then_some(
                    "this gateway has no API keys and refuses requests that change locks from a web page of another site",
                )
            }
        }
    }

    /// Whether a `Host` (without its port) is one this gateway answers to.
    fn admits_host(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.');
        is_ip_literal(host) || is_localhost(host) || self.names(host)
    }

    /// Whether `host` is one of `--allowed-hosts`.
    fn names(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.allowed
            .iter()
            .any(|allowed| match allowed.strip_prefix('.') {
                Some(suffix) => host == suffix || host.ends_with(allowed.as_str()),
                None => host == *allowed,
            })
    }
}

/// The host of a `Host` value (`name:port`, `[v6]:port`), without the port; `None` when it is
/// not of that shape.
fn host_of(authority: &str) -> Option<&str> {
    if let Some(rest) = authority.strip_prefix('[') {
        let end = rest.find(']')?;
        return Some(&authority[..end + 2]);
    }
    Some(authority.split(':').next().unwrap_or(authority))
}

/// The `host[:port]` of an origin (`scheme://host[:port]`); `None` for `null` and the like.
fn origin_authority(origin: &str) -> Option<&str> {
    let (_, authority) = origin.split_once("://")?;
    (!authority.is_empty() && !authority.contains('/')).then_some(authority)
}

fn is_ip_literal(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse::<std::net::IpAddr>().is_ok()
}

fn is_localhost(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.len() > ".localhost".len()
            && host[host.len() - ".localhost".len()..].eq_ignore_ascii_case(".localhost")
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn hosts_answered_are_addresses_localhost_and_those_allowed() {
        let policy = HostPolicy::new(&["lockgate.svc".into(), ".internal.example".into()]);
        for host in [
            "127.0.0.1:7380",
            "127.0.0.1",
            "[::1]:7380",
            "10.1.2.3:7380",
            "localhost:7380",
            "LocalHost",
            "app.localhost:7380",
            "lockgate.svc:7380",
            "LOCKGATE.SVC",
            "a.internal.example",
            "internal.example",
            "localhost.",
        ] {
            assert_eq!(
                policy.refusal(&Method::GET, &headers(&[("host", host)])),
                None,
                "{host}"
            );
        }
        for host in [
            "rebind.attacker.example",
            "localhost.attacker.example",
            "lockgate.svc.attacker.example",
            "xinternal.example",
            "127.0.0.1.nip.io",
        ] {
            assert!(
                policy
                    .refusal(&Method::GET, &headers(&[("host", host)]))
                    .is_some(),
                "{host}"
            );
        }
        assert_eq!(
            HostPolicy::new(&["*".into()]).refusal(
                &Method::DELETE,
                &headers(&[("host", "rebind.attacker.example")])
            ),
            None
        );
    }

    #[test]
    fn browsers_cross_site_changes_are_refused() {
        let policy = HostPolicy::new(&["dash.example".into()]);
        // The console's own address; each case adds at most one header a browser sends.
        let refused = |browser: &[(&'static str, &'static str)]| {
            let pairs = [&[("host", "127.0.0.1:7380")], browser].concat();
            policy.refusal(&Method::POST, &headers(&pairs)).is_some()
        };
        for (browser, refuse) in [
            // Not a browser.
            (&[][..], false),
            // The console, same origin.
            (&[("origin", "http://127.0.0.1:7380")], false),
            // An allowed origin.
            (&[("origin", "https://dash.example")], false),
            // Other origins, even an IP-addressed one, and `null`.
            (&[("origin", "http://1.2.3.4")], true),
            (&[("origin", "https://evil.example")], true),
            (&[("origin", "http://127.0.0.1:9999")], true),
            (&[("origin", "null")], true),
            // Fetch metadata without an origin.
            (&[("sec-fetch-site", "cross-site")], true),
            (&[("sec-fetch-site", "same-site")], true),
            (&[("sec-fetch-site", "same-origin")], false),
        ] {
            assert_eq!(refused(browser), refuse, "{browser:?}");
        }
        // Reading is left to the Host check: a page cannot read an answer across origins.
        let read = headers(&[
            ("host", "127.0.0.1:7380"),
            ("origin", "https://evil.example"),
        ]);
        assert_eq!(policy.refusal(&Method::GET, &read), None);
    }
}
