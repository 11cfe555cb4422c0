//! `lockgate healthcheck`: a container health check and exec probe that needs no curl.

use crate::client::Client;
use crate::config::HealthcheckArgs;

/// `lockgate healthcheck`: 0 when the gateway answers 200 on /healthz (or /readyz), else 1
/// with one line on stderr.
pub async fn run(args: HealthcheckArgs) -> u8 {
    let path = if args.ready { "/readyz" } else { "/healthz" };
    let client = match Client::new(&args.gateway, None) {
        Ok(client) => client,
        Err(err) => {
            eprintln!("lockgate healthcheck: {err}");
            return 1;
        }
    };
    match client.health(args.ready, args.timeout).await {
        Ok(status) if status == reqwest::StatusCode::OK => 0,
        Ok(status) => {
            eprintln!(
                "lockgate healthcheck: {}{path} answered {status}",
                args.gateway
            );
            1
        }
        Err(err) => {
            eprintln!("lockgate healthcheck: {}{path}: {err}", args.gateway);
            1
        }
    }
}
