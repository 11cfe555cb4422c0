//! Parameters several routes share, declared once for the OpenAPI document. The handlers read
//! them with the extractors of `http::extract` (the name resolved by the gate, the headers
//! checked there); these types only describe them.
#![allow(dead_code)] // Documentation only: nothing reads these fields.

/// The `{name}` path parameter of a lock.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct LockNameParam {
    /// Lock name: 1 to 200 characters from `A-Z a-z 0-9 . _ : -`, starting with a letter or
    /// digit. Use `:` for hierarchy, e.g. `orders:42`.
    #[param(pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$", example = "orders:42")]
    name: String,
}

/// The `Idempotency-Key` header of every acquire.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IdempotencyKeyParam {
    /// 16 to 255 visible ASCII characters, unique per intended grant (a UUID). A retry with
    /// the same key and name (or names) gets the same grant back while it is held. Whoever
    /// presents the key gets the token: keep it as secret as the token.
    #[param(
        rename = "Idempotency-Key",
        nullable = false,
        pattern = "^[!-~]{16,255}$"
    )]
    key: Option<String>,
}

/// The `Lock-Token` header of a lock's renewal (`/locks/{name}`).
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
pub struct LockTokenParam {
    /// The token the acquire returned. Anything else (another client's value, an internal
    /// marker) is a 400 `invalid-request`: only a token lockgate issued moves a lock. A
    /// multi-lock's token (marked `m`) is refused here too: it holds the whole set, renewed
    /// and released at `/locks?name=…`.
    #[param(
        rename = "Lock-Token",
        pattern = r"^[A-Za-z0-9_-]{22}o?s?r?(a(0|[1-9][0-9]{0,18}))?(h(0|[1-9][0-9]{0,18}))?\.[0-9]{1,19}$"
    )]
    token: String,
}

/// The `Lock-Token` header of a set's renewal and release.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
pub struct SetTokenParam {
    /// The token the set's acquire returned: it carries the set (`m_` and a digest of its
    /// names), and moves only that set, named whole. Another kind's token is a 400
    /// `invalid-request`; a set's token with other names, 409 `not-owner`.
    #[param(
        rename = "Lock-Token",
        pattern = r"^[A-Za-z0-9_-]{22}o?m_[A-Za-z0-9_-]{5}(h(0|[1-9][0-9]{0,18}))?\.[0-9]{1,19}$"
    )]
    token: String,
}

/// The `Lock-Token` header of a release (`DELETE /locks/{name}`, `DELETE
/// /semaphores/{name}`), which an operator's revoke ([`ForceParam`]) does without.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // Documentation only: the handlers read the header.
pub struct ReleaseTokenParam {
    /// The token returned when the lease was acquired. Required unless `force=true`.
    #[param(
        rename = "Lock-Token",
        nullable = false,
        pattern = r"^[A-Za-z0-9_-]{22}o?s?r?(a(0|[1-9][0-9]{0,18}))?(h(0|[1-9][0-9]{0,18}))?\.[0-9]{1,19}$"
    )]
    token: Option<String>,
}

/// The `force` query parameter of a release: an operator's revoke.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Documentation only: the handlers read the query.
pub struct ForceParam {
    /// `true`: revoke whatever holds the name (a lock, its readers, or every permit of a
    /// semaphore), with no token; needs the `revoke` operation.
    #[param(nullable = false)]
    force: Option<bool>,
}

/// The `Lock-Token` header of a permit's renewal and release.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
pub struct LeaseTokenParam {
    /// The token the acquire returned. Anything else (another client's value, an internal
    /// marker) is a 400 `invalid-request`: only a token lockgate issued moves a lock.
    #[param(
        rename = "Lock-Token",
        pattern = r"^[A-Za-z0-9_-]{22}o?s?m?(h(0|[1-9][0-9]{0,18}))?\.[0-9]{1,19}$"
    )]
    token: String,
}

/// The `prefix` query parameter of `GET /locks/events` and `GET /contention`.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Documentation only: the handlers read the query with `checked_prefix`.
pub struct PrefixParam {
    /// Every name that starts with this (from the name alphabet). Default: every name.
    #[param(
        pattern = "^([A-Za-z0-9][A-Za-z0-9._:-]{0,199})?$",
        example = "orders:"
    )]
    prefix: Option<String>,
}
