//! The handlers: thin adapters from HTTP to the lease engine (`crate::lock`). Each reads its
//! input with the extractors of `super::extract`, calls the service, and answers a DTO of
//! `super::dto` or a problem document (`super::problem`).

pub mod console;
pub mod contention;
pub mod events;
pub mod health;
pub mod hold;
pub mod listing;
pub mod locks;
pub mod metrics;
pub mod multi;
pub mod params;
#[cfg(test)]
pub(crate) mod tests;
