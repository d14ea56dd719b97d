//! `kube-sim [--port N] [--crds DIR ...] [--kubeconfig PATH]`: starts the simulator,
//! writes a kubeconfig, prints its path and serves until SIGINT or SIGTERM.

use clap::Parser;
use kube_sim::{KubeSim, KubeSimOptions};
use std::path::PathBuf;

/// Command-line flags.
#[derive(Debug, Parser)]
#[command(
    name = "kube-sim",
    about = "In-memory Kubernetes API server over HTTPS"
)]
struct Args {
    /// TCP port on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Directories with CRD YAML files to install at start (repeatable).
    #[arg(long = "crds")]
    crds: Vec<PathBuf>,
    /// Where to write the kubeconfig (default: a `kube-sim-<port>.kubeconfig` file in the
    /// temp directory).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Bearer token (default: random).
    #[arg(long, env = "KUBE_SIM_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let opts = KubeSimOptions {
        token: args.token.clone(),
        crd_dirs: args.crds.clone(),
        port: args.port,
        ..KubeSimOptions::default()
    };
    let sim = match KubeSim::start(opts).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kube-sim: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let path = args.kubeconfig.unwrap_or_else(|| {
        let port = sim.url().rsplit(':').next().unwrap_or("0").to_string();
        std::env::temp_dir().join(format!("kube-sim-{port}.kubeconfig"))
    });
    if let Err(e) = sim.write_kubeconfig(&path) {
        eprintln!("kube-sim: {e}");
        return std::process::ExitCode::FAILURE;
    }
    println!("{}", path.display());
    tracing::info!(url = %sim.url(), kubeconfig = %path.display(), "kube-sim serving");
    wait_for_signal().await;
    sim.shutdown().await;
    std::process::ExitCode::SUCCESS
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
