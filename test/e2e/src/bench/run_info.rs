//! Where and when the benchmark ran: the machine, the commit, the options,
//! and the clean `make test` record it reports beside its own figures.

use std::time::Duration;

use super::{BenchOptions, clean_test, measure};

/// Where and when the benchmark ran.
#[derive(Clone, Debug, PartialEq)]
pub struct RunInfo {
    /// UTC date and time, `YYYY-MM-DD HH:MM UTC`.
    pub date: String,
    /// Processors available.
    pub cores: usize,
    /// Memory, KiB.
    pub memory_kib: u64,
    /// Processor model.
    pub cpu_model: Option<String>,
    /// `git rev-parse --short HEAD` (`+dirty` with uncommitted changes).
    pub commit: String,
    /// The time scale.
    pub time_scale: f64,
    /// Extra controller arguments.
    pub controller_args: Vec<String>,
    /// The Cargo profile the benchmark was built with (the name of the
    /// directory its binary is in: `benchmark` for `make bench`), `None`
    /// when it cannot be told.
    pub profile: Option<String>,
    /// The whole run.
    pub total: Duration,
    /// The last clean `make test` measured (`make time-clean-test`), if any.
    pub clean_test: Option<clean_test::Record>,
}

impl RunInfo {
    /// Collects the machine's figures and the repository's commit, beside
    /// the clean `make test` record read before the run.
    pub fn collect(
        opts: &BenchOptions,
        total: Duration,
        clean_test: Option<clean_test::Record>,
    ) -> RunInfo {
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let date = format!(
            "{} {} UTC",
            now.get(..10).unwrap_or(&now),
            now.get(11..16).unwrap_or("")
        );
        RunInfo {
            date,
            cores: measure::cores(),
            memory_kib: measure::memory_kib(),
            cpu_model: measure::cpu_model(),
            commit: commit(),
            time_scale: opts.run.time_scale,
            controller_args: opts.run.controller_args.clone(),
            profile: build_profile(),
            total,
            clean_test,
        }
    }
}

/// The directory name of the running binary (`<target>/<profile>/bench`).
fn build_profile() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?.file_name()?.to_str()?;
    Some(if dir == "debug" { "dev" } else { dir }.to_string())
}

/// The repository's short commit, `+dirty` when the tree has uncommitted
/// changes (`unknown` without git).
fn commit() -> String {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(c) if !c.is_empty() => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty { format!("{c}+dirty") } else { c }
        }
        _ => "unknown".into(),
    }
}
