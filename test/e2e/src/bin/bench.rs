//! `make bench`: the scale benchmark (not a test); see [`capmox_e2e::bench`].

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use capmox_e2e::bench::{self, BenchOptions, RunOptions, ScenarioResult, clean_test, report};
use clap::Parser;

/// mimalloc instead of glibc's malloc: allocation was a third of this
/// process's CPU (pve-sim, kube-sim and the stand-ins) under glibc
/// (docs/benchmarks.md, seventh round). The controller it runs keeps glibc's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The capmox scale benchmark.
#[derive(Parser, Debug)]
#[command(
    name = "bench",
    about = "How close the controller gets to what Proxmox allows, and at what cost (simulated datacenters, realistic task durations under a time scale)"
)]
struct Args {
    /// Write the report into this Markdown file (between its bench markers).
    #[arg(long)]
    write: Option<PathBuf>,
    /// Run only this scenario (repeatable); see --list.
    #[arg(long = "scenario")]
    scenarios: Vec<String>,
    /// List the scenarios and exit.
    #[arg(long)]
    list: bool,
    /// Simulator and controller time scale, a number greater than 0 and at
    /// most 100 (0.25: a 60 s clone takes 15 s). Proxmox's durations shrink with it, the controller's and the
    /// simulators' own latencies do not: a smaller scale runs faster but
    /// magnifies those overheads in the ratio (in simulated seconds).
    #[arg(long, default_value_t = 0.25, allow_negative_numbers = true, value_parser = capmox_e2e::env::parse_time_scale)]
    time_scale: f64,
    /// The controller's --clone-concurrency (default: the controller's own default).
    #[arg(long)]
    clone_concurrency: Option<usize>,
    /// A further controller argument (repeatable), e.g. --controller-arg=--concurrency=20.
    #[arg(long = "controller-arg", allow_hyphen_values = true)]
    controller_args: Vec<String>,
    /// The longest one phase of a scenario may take, real seconds (at least 1).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    phase_timeout_secs: u64,
    /// Seed of the simulator and the stand-in.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Keep each scenario's working directory (kubeconfig, controller log) and print where.
    #[arg(long)]
    keep: bool,
    /// The clean `make test` record of `make time-clean-test`, reported in
    /// the goal table when the file exists.
    #[arg(long)]
    clean_test_record: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    if args.list {
        let mut out = std::io::stdout().lock();
        for s in bench::scenarios() {
            // A closed pipe (`bench --list | head -1`) ends the listing.
            if writeln!(out, "{:14} {}", s.name, s.about).is_err() {
                break;
            }
        }
        return ExitCode::SUCCESS;
    }
    if let Some(path) = &args.write
        && !args.scenarios.is_empty()
    {
        eprintln!(
            "bench: --write {} needs every scenario: a partial run (--scenario) does not replace the report",
            path.display()
        );
        return ExitCode::from(2);
    }
    // Read before the run: a record that is not one fails now, not after it.
    let clean_test = match args.clean_test_record.as_deref().map(clean_test::read) {
        None => None,
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            eprintln!("bench: --clean-test-record {e}");
            return ExitCode::from(2);
        }
    };
    let mut controller_args = Vec::new();
    if let Some(n) = args.clone_concurrency {
        controller_args.push(format!("--clone-concurrency={n}"));
    }
    controller_args.extend(args.controller_args);
    let opts = BenchOptions {
        only: args.scenarios,
        run: RunOptions {
            time_scale: args.time_scale,
            seed: args.seed,
            controller_args,
            phase_timeout: Duration::from_secs(args.phase_timeout_secs),
            keep_workdir: args.keep,
        },
    };
    let started = Instant::now();
    let results = match bench::run_all_blocking(&opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    let info = report::RunInfo::collect(&opts, started.elapsed(), clean_test);
    let text = report::generated(&info, &results);
    println!("{text}");
    if let Some(path) = &args.write {
        if let Err(e) = report::write(path, &text) {
            eprintln!("bench: {e}");
            return ExitCode::FAILURE;
        } else {
            eprintln!("bench: wrote {}", path.display());
        }
    }
    if results
        .iter()
        .any(|r| matches!(r, ScenarioResult::Failed { .. }))
    {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
