//! The operations of the API: what a request asks for, as the gate classifies it, API keys
//! allow it (`access`) and the metrics label it (`telemetry`). A leaf of its own, so that
//! neither of those two depends on the other for it.

/// What a request asked for: the `operation` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Acquire,
    Renew,
    Release,
    /// `DELETE /locks/{name}?force=true`: an operator deletes a lock whoever holds it.
    Revoke,
    Inspect,
    /// `GET /locks`: a page of held locks.
    List,
    /// `GET /locks/{name}/events`: a lock's event stream (authorized as `inspect`).
    Watch,
    Hold,
    Healthz,
    Readyz,
    Metrics,
    Openapi,
    /// The operator's console (`/ui`): a static page, open like the probes (it holds no data;
    /// everything it shows, it asks the API for with the key its user enters).
    Console,
    /// `GET /access`: what the caller's API key may do (any valid key).
    Access,
    Other,
}

impl Operation {
    pub const ALL: [Self; 15] = [
        Self::Acquire,
        Self::Renew,
        Self::Release,
        Self::Revoke,
        Self::Inspect,
        Self::List,
        Self::Watch,
        Self::Hold,
        Self::Healthz,
        Self::Readyz,
        Self::Metrics,
        Self::Openapi,
        Self::Console,
        Self::Access,
        Self::Other,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Self::Acquire => "acquire",
            Self::Renew => "renew",
            Self::Release => "release",
            Self::Revoke => "revoke",
            Self::Inspect => "inspect",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Hold => "hold",
            Self::Healthz => "healthz",
            Self::Readyz => "readyz",
            Self::Metrics => "metrics",
            Self::Openapi => "openapi",
            Self::Console => "console",
            Self::Access => "access",
            Self::Other => "other",
        }
    }

    /// Whether it acts on one lock (and so needs a key with a scope over its name).
    pub fn is_lock_operation(self) -> bool {
        matches!(
            self,
            Self::Acquire
                | Self::Renew
                | Self::Release
                | Self::Revoke
                | Self::Inspect
                | Self::Watch
                | Self::Hold
        )
    }

    /// Whether a key without an `operations` list may do it: every lock operation but
    /// `revoke`, which an operator's key must name.
    pub fn allowed_by_default(self) -> bool {
        self.is_lock_operation() && self != Self::Revoke
    }

    /// The operation a key must be allowed to do this one: watching is inspecting.
    pub fn authorized_as(self) -> Self {
        match self {
            Self::Watch => Self::Inspect,
            other => other,
        }
    }

    /// Names accepted in an API key's `operations`.
    pub fn from_key_operation(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|op| op.label() == name)
            .filter(|op| (op.is_lock_operation() && *op != Self::Watch) || *op == Self::Metrics)
    }
}
