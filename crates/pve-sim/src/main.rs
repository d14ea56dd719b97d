//! `pve-sim`: runs simulated Proxmox VE clusters until Ctrl-C.
//!
//! ```text
//! pve-sim [--config sim.yaml] [--schema apidoc.json] [--time-scale F]
//!         [--seed N] [--state-dir DIR] [--http]
//! ```
//!
//! Without `--config` the built-in default (clusters `dc-a`, `dc-b`, `dc-c`)
//! runs. For each cluster it writes `<state-dir>/<cluster>/pve-root-ca.pem`
//! and prints the URL, token id and secret, and the leaf fingerprint. It stops
//! on Ctrl-C or SIGTERM.

use std::path::PathBuf;

use clap::Parser;
use pve_sim::{SimConfig, Simulator};

/// Simulated Proxmox VE clusters over HTTPS.
#[derive(Debug, Parser)]
#[command(name = "pve-sim", version, about)]
struct Args {
    /// YAML configuration (see the crate README); default: built-in three clusters.
    #[arg(long, env = "PVE_SIM_CONFIG")]
    config: Option<PathBuf>,
    /// Official API schema (`apidoc.json`) to validate requests against.
    #[arg(long, env = "PVE_SIM_SCHEMA")]
    schema: Option<PathBuf>,
    /// Multiply every simulated duration by this factor (`0`: everything
    /// instant; must be finite and at least 0).
    #[arg(long, allow_negative_numbers = true)]
    time_scale: Option<f64>,
    /// Seed of all random choices.
    #[arg(long)]
    seed: Option<u64>,
    /// Directory for the CA certificates.
    #[arg(long, default_value = "pve-sim-state")]
    state_dir: PathBuf,
    /// Serve plain HTTP instead of HTTPS.
    #[arg(long)]
    http: bool,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(Args::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pve-sim: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut cfg = match &args.config {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            SimConfig::from_yaml(&text)?
        }
        None => SimConfig::builtin_default(),
    };
    if args.schema.is_some() {
        cfg.schema_path = args.schema.clone();
    }
    if let Some(f) = args.time_scale {
        cfg.time_scale = f;
    }
    if let Some(s) = args.seed {
        cfg.seed = s;
    }
    if args.http {
        cfg.tls = false;
    }
    let sim = Simulator::start(cfg).await?;
    match &sim.config().schema_path {
        Some(p) => println!("schema validation: {}", p.display()),
        None => println!("schema validation: off (no apidoc.json; use --schema)"),
    }
    println!("time scale: {}", sim.config().time_scale);
    for c in sim.clusters() {
        let dir = args.state_dir.join(c.name());
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let ca = dir.join("pve-root-ca.pem");
        std::fs::write(&ca, c.ca_pem())
            .map_err(|e| format!("cannot write {}: {e}", ca.display()))?;
        println!();
        println!("cluster {}", c.name());
        println!("  url:          {}/api2/json", c.url());
        println!("  token id:     {}", c.token_id());
        println!("  token secret: {}", c.token_secret());
        println!("  CA:           {}", ca.display());
        println!("  fingerprint:  {}", c.cert_fingerprint_sha256());
        println!("  control API:  {}/_sim/state", c.url());
    }
    wait_for_signal().await?;
    sim.shutdown().await;
    Ok(())
}

/// Ctrl-C (SIGINT) or SIGTERM.
async fn wait_for_signal() -> std::io::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r,
        _ = term.recv() => Ok(()),
    }
}
