//! Managed fields and server-side apply: field sets ([`set`]), schema-aware object
//! operations ([`typed`]) and `metadata.managedFields` bookkeeping ([`managed`]).

pub mod managed;
pub mod set;
pub mod typed;
