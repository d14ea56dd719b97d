//! Integration tests of the controller.
//!
//! One test binary for all of the crate's integration tests: each module
//! below was its own binary, and every binary linked the whole dependency
//! tree again (about 100 MB and several seconds of linking each).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod capi_contract;
mod cluster_backoff;
mod cluster_controller;
mod cluster_privileges;
mod cluster_reconcile;
mod cluster_secrets;
mod crds;
mod image;
mod machine_arch;
mod machine_backoff;
mod machine_bootstrap;
mod machine_concurrency;
mod machine_crash;
mod machine_faults;
mod machine_ha;
mod machine_ignition;
mod machine_ipam;
mod machine_lifecycle;
mod machine_lookup;
mod machine_metrics;
mod machine_node_tasks;
mod machine_out_of_band;
mod machine_pci;
mod machine_placement;
mod machine_pools;
mod machine_shapes;
mod machine_stale_reads;
mod machine_stale_writes;
mod machine_takeover;
mod machine_template_status;
mod manager_kubeconfig;
mod manager_leader;
mod manager_run;
mod manager_startup;
mod source_rules;
mod webhook_admission;
mod webhook_tls;
