//! Integration tests of kube-sim over HTTPS with real clients (kube-rs, kubectl): one test
//! binary, one module per area. Every test starts its own server on 127.0.0.1:0.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

mod apply;
mod binary;
mod clients;
mod controller;
mod crud;
mod discovery;
mod events_leases;
mod gc;
mod kubectl;
mod nodes;
mod patch;
mod scale;
mod status;
mod validation;
mod watch;
mod webhooks;
