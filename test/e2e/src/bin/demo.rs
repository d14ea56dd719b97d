//! `make demo`: three simulated Proxmox datacenters, an in-memory management
//! cluster, the CAPI stand-in and the real controller; see
//! [`capmox_e2e::demo`].

use std::process::ExitCode;
use std::time::Duration;

use capmox_e2e::demo::{self, DemoOptions};
use clap::Parser;

/// The capmox demo.
#[derive(Parser, Debug)]
#[command(
    name = "demo",
    about = "One Kubernetes cluster over three simulated Proxmox VE datacenters"
)]
struct Args {
    /// Leave everything running at the end and print a kubeconfig for kubectl.
    #[arg(long)]
    keep: bool,
    /// Simulator time scale, a number greater than 0 and at most 100 (0.1: a
    /// 60 s clone takes 6 s); realistic proportions either way.
    #[arg(long, default_value_t = 0.1, allow_negative_numbers = true, value_parser = capmox_e2e::env::parse_time_scale)]
    time_scale: f64,
    /// Workers per datacenter after the scale-up (0 shows a scale-down).
    #[arg(long, default_value_t = 2, allow_negative_numbers = true, value_parser = clap::value_parser!(i32).range(0..=100))]
    workers: i32,
    /// kube-sim port (0: any free port).
    #[arg(long, default_value_t = 0)]
    kube_port: u16,
    /// Give up after this many seconds (1 to 86400).
    #[arg(long, default_value_t = 900, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    timeout_secs: u64,
}

/// mimalloc instead of glibc's malloc: allocation was a third of this
/// process's CPU (pve-sim, kube-sim and the stand-ins) under glibc
/// (docs/benchmarks.md, seventh round). The controller it runs keeps glibc's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = Args::parse();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let opts = DemoOptions {
        keep: args.keep,
        time_scale: args.time_scale,
        workers: args.workers,
        kube_port: args.kube_port,
        timeout: Duration::from_secs(args.timeout_secs),
    };
    match demo::run_blocking(opts) {
        Ok(demo::Ending::Done) => ExitCode::SUCCESS,
        Ok(demo::Ending::Interrupted { signal }) => {
            ExitCode::from(u8::try_from(128 + signal).unwrap_or(130))
        }
        Err(e) => {
            eprintln!("demo failed: {e}");
            ExitCode::FAILURE
        }
    }
}
