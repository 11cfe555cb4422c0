//! Telemetry: Prometheus metrics with typed labels ([`metrics`]; the operations they count
//! are [`crate::operation`]'s, the kinds of lease the route table's), the build and process
//! metrics every exporter has ([`process`]), log output ([`logging`]), the throttle of
//! repeated log lines ([`throttle`]) and OpenTelemetry spans when asked for ([`trace`]).
//!
//! Below everything else: `lock` and `backend` record through [`Metrics`] without knowing the
//! exposition format, and `http` renders it at `/metrics`. Nothing here knows about locks,
//! Redis or HTTP beyond the names of the API's operations.

pub mod access;
pub mod logging;
pub mod metrics;
pub mod process;
pub mod rfc3339;
pub mod throttle;
pub mod trace;

pub use self::metrics::{BackendErrorKind, Gauges, Metrics, RedisCall};
