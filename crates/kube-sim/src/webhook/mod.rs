//! Admission and conversion webhooks, called over HTTPS the way
//! kube-apiserver calls them.
//!
//! | module | owns |
//! |---|---|
//! | [`caller`] | the HTTPS client (its own thread), `caBundle` verification, Service routes |
//! | [`config`] | webhook configurations → hooks; rules, `matchPolicy`, selectors; checks on write |
//! | [`admission`] | `AdmissionReview` v1 out, the answer checked and read in |
//! | [`conversion`] | CRD conversion by webhook: `ConversionReview` v1 out and in |
//!
//! Where the engine calls them (see `engine::admit`): for `CREATE` and
//! `UPDATE` of the main resource and of `/status` (not `/scale`), mutating
//! webhooks after decoding (and, for updates, patching or applying) and
//! before the strategy (server-owned metadata, `status` rules, schema and
//! CEL validation), validating webhooks after it and before the commit —
//! inside the optimistic-concurrency retry loop, as kube-apiserver's
//! `GuaranteedUpdate` does, so a retried update calls them again.

pub mod admission;
pub mod caller;
pub mod config;
pub mod conversion;

pub use caller::Caller;
pub use conversion::Converter;
