//! End-to-end machinery for the Proxmox CAPI provider: clusterctl's template
//! rules, the CAPI-core stand-in, scenarios, the demo and the benchmark.

pub mod clusterctl;
