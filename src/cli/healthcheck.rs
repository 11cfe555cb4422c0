//! `lockgate healthcheck`: a container health check and exec probe that needs no curl.

use crate::client::Client;
use crate::config::HealthcheckArgs;

/// `lockgate healthcheck`: 0 when the gateway answers 200 on /healthz (or /readyz), else 1
/// with one line on stderr.
pub async fn run(args: HealthcheckArgs) -> u8 {
    let path = if args.ready { "/readyz" } else { "/healthz" };
    // A proxy's password in the URL is never repeated.
    let shown = crate::config::secrets::without_userinfo(&args.gateway);
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
            eprintln!("lockgate healthcheck: {shown}{path} answered {status}");
            1
        }
        Err(err) => {
            eprintln!("lockgate healthcheck: {shown}{path}: {err}");
            1
        }
    }
}
