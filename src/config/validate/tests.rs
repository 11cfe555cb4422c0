//! Tests of `config/validate.rs`.

use clap::{CommandFactory, Parser};

use super::*;

fn parse(args: &[&str]) -> Result<Config, ConfigError> {
    let cli = Cli::try_parse_from(std::iter::once("lockgate").chain(args.iter().copied()))
        .expect("parses");
    Config::from_args(cli.serve)
}

#[test]
fn the_command_line_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn defaults_suit_a_sidecar() {
    let config = parse(&["--dev"]).expect("valid");
    assert_eq!(config.limits, default_limits());
    assert_eq!(config.listen.to_string(), "127.0.0.1:7380");
    assert_eq!(config.backend, BackendChoice::Memory);
    assert_eq!(config.limits.default_ttl, Duration::from_secs(30));
    assert_eq!(config.native_commands, NativeCommands::Auto);
    assert!(config.deprecated.is_empty());
    assert_eq!(config.key_prefix, "lockgate:");
}

#[test]
fn a_store_must_be_chosen() {
    assert_eq!(parse(&[]).unwrap_err(), ConfigError::NoBackend);
    let both = Cli::try_parse_from(["lockgate", "--dev", "--redis-url", "redis://x"]);
    assert!(both.is_err());
    assert_eq!(
        parse(&["--redis-url", "http://x"]).unwrap_err(),
        ConfigError::RedisScheme
    );
    assert!(parse(&["--redis-url", "rediss://u:p@host:6380/0"]).is_ok());
}

#[test]
fn serving_beyond_loopback_needs_keys_or_an_explicit_opt_out() {
    assert_eq!(
        parse(&["--dev", "--listen", "0.0.0.0:7380"]).unwrap_err(),
        ConfigError::Unauthenticated("0.0.0.0:7380".parse().unwrap())
    );
    assert!(
        parse(&[
            "--dev",
            "--listen",
            "0.0.0.0:7380",
            "--allow-unauthenticated"
        ])
        .is_ok()
    );
    let keys = r#"[{"name": "a", "key": "0123456789abcdef", "prefixes": [""]}]"#;
    let config = parse(&["--dev", "--listen", "[::]:7380", "--api-keys", keys]).expect("valid");
    assert!(config.api_keys.is_some());
    assert!(parse(&["--dev", "--listen", "[::1]:7380"]).is_ok());
    // IPv4 loopback written as an IPv4-mapped IPv6 address is loopback too.
    assert!(parse(&["--dev", "--listen", "[::ffff:127.0.0.1]:7380"]).is_ok());
    assert!(parse(&["--dev", "--listen", "[::ffff:10.0.0.1]:7380"]).is_err());
    assert_eq!(
        parse(&["--dev", "--metrics-auth", "required"]).unwrap_err(),
        ConfigError::MetricsAuthWithoutKeys
    );
}

#[test]
fn each_redis_mode_is_configured_on_its_own() {
    let sentinel = parse(&[
        "--sentinel",
        "redis://a:26379,redis://b:26379",
        "--sentinel-master",
        "m",
    ])
    .expect("valid");
    assert!(
        matches!(sentinel.backend, BackendChoice::Sentinel { ref sentinels, ref master, .. } if sentinels.len() == 2 && master == "m")
    );
    assert_eq!(
        parse(&["--sentinel", "redis://a:26379"]).unwrap_err(),
        ConfigError::SentinelMaster
    );
    assert_eq!(
        parse(&["--dev", "--sentinel-master", "m"]).unwrap_err(),
        ConfigError::SentinelMaster
    );
    assert_eq!(
        parse(&["--sentinel", "rediss://a:26379", "--sentinel-master", "m"]).unwrap_err(),
        ConfigError::SentinelTls
    );
    let cluster = parse(&["--cluster", "redis://a:7000,redis://b:7001"]).expect("valid");
    assert!(matches!(cluster.backend, BackendChoice::Cluster { ref seeds } if seeds.len() == 2));
    let redlock = parse(&["--redlock", "redis://a,redis://b,redis://c"]).expect("valid");
    assert!(
        matches!(redlock.backend, BackendChoice::Redlock { ref nodes, node_timeout } if nodes.len() == 3 && node_timeout == Duration::from_millis(50))
    );
    assert_eq!(
        parse(&["--redlock", "redis://a,redis://b"]).unwrap_err(),
        ConfigError::RedlockNodes
    );
    assert_eq!(
        parse(&["--redlock", "redis://a,redis://b,redis://c,redis://d"]).unwrap_err(),
        ConfigError::RedlockNodes
    );
    assert_eq!(
        parse(&["--cluster", "http://a:7000"]).unwrap_err(),
        ConfigError::RedisScheme
    );
    let both: [&[&str]; 2] = [
        &["--dev", "--cluster", "redis://a"],
        &[
            "--redis-url",
            "redis://a",
            "--redlock",
            "redis://a,redis://b,redis://c",
        ],
    ];
    for args in both {
        let parsed = Cli::try_parse_from(std::iter::once("lockgate").chain(args.iter().copied()));
        assert!(parsed.is_err(), "{args:?}");
    }
}

/// `--fence-retention` configured the per-name fence counters that no longer exist: it is
/// still accepted, so that old configurations start, and reported as ignored.
#[test]
fn the_retired_fence_retention_is_accepted_and_reported() {
    let config = parse(&["--dev", "--fence-retention", "30m"]).expect("accepted");
    assert_eq!(
        config.deprecated,
        ["--fence-retention (LOCKGATE_FENCE_RETENTION)"]
    );
}

#[test]
fn inconsistent_limits_are_refused() {
    assert!(parse(&["--dev", "--min-ttl", "0ms"]).is_err());
    assert!(parse(&["--dev", "--default-ttl", "2h"]).is_err());
    assert!(parse(&["--dev", "--wait-pool-size", "0"]).is_err());
    assert!(parse(&["--dev", "--redis-timeout", "0s"]).is_err());
    assert!(
        parse(&[
            "--dev",
            "--default-ttl",
            "5s",
            "--min-ttl",
            "1s",
            "--max-ttl",
            "10s"
        ])
        .is_ok()
    );
}

#[test]
fn key_prefixes_cannot_break_hash_tags() {
    assert_eq!(
        parse(&["--dev", "--key-prefix", "a{b}"]).unwrap_err(),
        ConfigError::KeyPrefix
    );
    assert_eq!(
        parse(&["--dev", "--key-prefix", "a b"]).unwrap_err(),
        ConfigError::KeyPrefix
    );
    assert!(parse(&["--dev", "--key-prefix", ""]).is_ok());
    assert!(parse(&["--dev", "--key-prefix", "team/a:locks:"]).is_ok());
}

#[test]
fn short_secrets_are_refused_and_secrets_never_print() {
    assert_eq!(
        parse(&["--dev", "--token-secret", "short"]).unwrap_err(),
        ConfigError::ShortSecret
    );
    let secret = "x".repeat(40);
    let config = parse(&[
        "--redis-url",
        "redis://:hunter2@h:1",
        "--token-secret",
        &secret,
    ])
    .expect("valid");
    let printed = format!("{config:?}");
    assert!(
        !printed.contains("hunter2") && !printed.contains(&secret),
        "{printed}"
    );
}
