//! The `kind` label of request metrics: which kind of lease a request acts on.

/// The kind of lease a request acts on: the `kind` label of request metrics (on lease
/// operations only; probes, scrapes and the like have none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseKind {
    Lock,
    Semaphore,
    /// A multi-lock (`/locks` itself: its names are in the body or the query).
    Multi,
}

impl LeaseKind {
    pub const ALL: [Self; 3] = [Self::Lock, Self::Semaphore, Self::Multi];

    pub fn label(self) -> &'static str {
        match self {
            Self::Lock => "lock",
            Self::Semaphore => "semaphore",
            Self::Multi => "multi",
        }
    }

    /// The kind of lease a request path names (`/semaphores/…`, `/locks` itself; anything
    /// else is a lock's, shared grants of read/write locks included).
    pub fn of_path(path: &str) -> Self {
        if path.starts_with("/semaphores/") {
            Self::Semaphore
        } else if path == "/locks" {
            Self::Multi
        } else {
            Self::Lock
        }
    }
}
