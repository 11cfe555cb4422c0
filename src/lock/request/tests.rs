//! Tests of `lock/request.rs`.

use super::*;
use crate::backend::ReplicaAck;

const LIMITS: Limits = TEST_LIMITS;

#[test]
fn an_empty_request_gets_the_documented_defaults() {
    let req = LIMITS
        .lease(RawLease {
            ..RawLease::default()
        })
        .expect("valid");
    assert_eq!(req.ttl, Duration::from_secs(30));
    assert_eq!(req.wait, Duration::ZERO);
    assert_eq!(req.replicas, ReplicaPolicy::NONE);
    assert_eq!(req.replicas.ack(), None);
}

#[test]
fn ttl_and_wait_are_bounded_inclusively() {
    // (ttl_ms, wait_ms, the field refused, if any)
    let cases = [
        (Some(100), Some(60_000), None),
        (Some(3_600_000), None, None),
        (Some(99), None, Some("ttl_ms")),
        (Some(0), None, Some("ttl_ms")),
        (Some(u64::MAX), None, Some("ttl_ms")),
        (None, Some(60_001), Some("wait_ms")),
    ];
    for (ttl_ms, wait_ms, refused) in cases {
        let checked = LIMITS.lease(RawLease {
            ttl_ms,
            wait_ms,
            ..RawLease::default()
        });
        assert_eq!(
            checked.err().map(|err| err.field),
            refused,
            "ttl_ms {ttl_ms:?}, wait_ms {wait_ms:?}"
        );
    }
    let low = LIMITS
        .lease(RawLease {
            ttl_ms: Some(99),
            ..RawLease::default()
        })
        .unwrap_err();
    assert_eq!(low.message, "must be between 100 and 3600000 milliseconds");
    assert_eq!(
        LIMITS
            .renew(Some(3_600_001), RawReplicas::default())
            .unwrap_err()
            .field,
        "ttl_ms"
    );
}

#[test]
fn holds_are_bounded_by_the_request_and_the_server() {
    let held = |max_hold_ms| RawLease {
        ttl_ms: Some(10_000),
        max_hold_ms,
        ..RawLease::default()
    };
    let plain = LIMITS.lease(held(None)).expect("valid");
    assert_eq!(plain.max_hold, None);
    let asked = LIMITS.lease(held(Some(5_000))).expect("valid");
    assert_eq!(asked.max_hold, Some(Duration::from_secs(5)));
    assert_eq!(
        asked.ttl,
        Duration::from_secs(5),
        "the ttl is cut to the bound"
    );
    assert_eq!(
        LIMITS.lease(held(Some(99))).unwrap_err().field,
        "max_hold_ms"
    );
    let server = Limits {
        max_hold: Some(Duration::from_secs(60)),
        ..LIMITS
    };
    let capped = server.lease(held(None)).expect("valid");
    assert_eq!(capped.max_hold, Some(Duration::from_secs(60)));
    assert_eq!(
        server.lease(held(Some(61_000))).unwrap_err().field,
        "max_hold_ms"
    );
    assert_eq!(
        server.lease(held(Some(20_000))).expect("valid").max_hold,
        Some(Duration::from_secs(20))
    );
}

#[test]
fn owners_and_metadata_are_bounded() {
    assert_eq!(holder(None, None), Ok(None));
    let named = holder(Some("pod-a:4242".into()), None)
        .expect("valid")
        .expect("a holder");
    assert_eq!(named.owner.as_deref(), Some("pod-a:4242"));
    assert!(holder(Some("é".repeat(MAX_OWNER_CHARS)), None).is_ok());
    for bad in [
        String::new(),
        "a\nb".into(),
        "x".repeat(MAX_OWNER_CHARS + 1),
    ] {
        assert_eq!(holder(Some(bad), None).unwrap_err().field, "owner");
    }
    let object = |json: &str| serde_json::from_str::<Map<String, Value>>(json).ok();
    assert!(holder(None, object(r#"{"addr":"10.0.0.7:8080"}"#)).is_ok());
    let big = format!(r#"{{"a":"{}"}}"#, "x".repeat(MAX_METADATA_BYTES));
    let err = holder(None, object(&big)).unwrap_err();
    assert_eq!(err.field, "metadata");
}

#[test]
fn replica_fields_are_bounded_and_a_zero_wait_timeout_is_refused() {
    let raw = |replicas, timeout| RawLease {
        replicas: RawReplicas {
            replicas,
            replica_timeout_ms: timeout,
            require_replicas: Some(true),
        },
        ..RawLease::default()
    };
    let ok = LIMITS.lease(raw(Some(2), Some(250))).expect("valid");
    assert_eq!(
        ok.replicas.ack(),
        Some(ReplicaAck {
            replicas: 2,
            timeout: Duration::from_millis(250)
        })
    );
    assert!(ok.replicas.required);
    assert_eq!(
        LIMITS.lease(raw(Some(65), None)).unwrap_err().field,
        "replicas"
    );
    assert_eq!(
        LIMITS.lease(raw(Some(1), Some(0))).unwrap_err().field,
        "replica_timeout_ms"
    );
    assert_eq!(
        LIMITS.lease(raw(Some(1), Some(10_001))).unwrap_err().field,
        "replica_timeout_ms"
    );
}
