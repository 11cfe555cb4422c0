//! How flag values are read: addresses, durations, JSON.

use std::net::SocketAddr;
use std::time::Duration;

/// An IP address and port to listen on, with a hint for the usual near misses (a bare port,
/// a host name).
pub(super) fn listen_address(value: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = value.parse() {
        return Ok(addr);
    }
    if let Ok(port) = value.parse::<u16>() {
        return Err(format!(
            "expected an IP address and a port, such as 127.0.0.1:{port} (loopback) or 0.0.0.0:{port} (every interface)"
        ));
    }
    if let Some((host, port)) = value.rsplit_once(':')
        && port.parse::<u16>().is_ok()
        && !host.is_empty()
    {
        return Err(format!(
            "expected an IP address, not a host name: 127.0.0.1:{port} for loopback, 0.0.0.0:{port} for every interface, [::1]:{port} for IPv6 loopback"
        ));
    }
    Err("expected an IP address and a port, such as 127.0.0.1:7380".into())
}

/// A duration such as `30s`, `500ms` or `2m` (humantime's syntax), with an error that says so.
pub(super) fn duration(value: &str) -> Result<Duration, String> {
    humantime::parse_duration(value)
        .map_err(|_| "expected a duration such as 30s, 500ms or 2m".to_owned())
}

/// A JSON object, such as `{"addr":"10.0.0.7:8080"}`.
pub(super) fn json_object(
    value: &str,
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    serde_json::from_str(value)
        .map_err(|_| "expected a JSON object such as '{\"addr\":\"10.0.0.7:8080\"}'".to_owned())
}
