//! `lockgate healthcheck`: a container health check and exec probe that needs no curl.

use crate::config::HealthcheckArgs;

/// `lockgate healthcheck`: 0 when the gateway answers 200 on /healthz (or /readyz), else 1
/// with one line on stderr.
pub async fn run(args: HealthcheckArgs) -> u8 {
    crate::install_crypto_provider();
    let path = if args.ready { "/readyz" } else { "/healthz" };
    let url = format!("{}{path}", args.gateway.trim_end_matches('/'));
    let answer = match reqwest::Client::builder().timeout(args.timeout).build() {
        Ok(client) => client.get(&url).send().await,
        Err(err) => {
            eprintln!("lockgate healthcheck: {err}");
            return 1;
        }
    };
    match answer {
        Ok(response) if response.status() == reqwest::StatusCode::OK => 0,
        Ok(response) => {
            eprintln!("lockgate healthcheck: {url} answered {}", response.status());
            1
        }
        Err(err) => {
            eprintln!("lockgate healthcheck: {url}: {err}");
            1
        }
    }
}
