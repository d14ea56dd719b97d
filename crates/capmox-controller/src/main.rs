//! `capmox-controller`: the manager binary. Everything lives in
//! [`capmox_controller::manager`]; this parses the flags, sets up logging and
//! maps the outcome to an exit code (0; 2 for a usage error: a bad flag or
//! an unusable kubeconfig; 1 for any other failure).

use std::process::ExitCode;

use capmox_controller::manager::{self, Flags};
use capmox_controller::telemetry;
use clap::{CommandFactory, Parser};

fn main() -> ExitCode {
    let flags = Flags::try_parse().unwrap_or_else(|e| manager::flags::name_the_variable(e).exit());
    if let Err(problem) = flags.check() {
        Flags::command()
            .error(clap::error::ErrorKind::ArgumentConflict, problem)
            .exit();
    }
    if let Err(e) = telemetry::init(flags.log_format, &flags.log_level) {
        eprintln!("capmox-controller: cannot set up logging: {e}");
        return ExitCode::FAILURE;
    }
    match manager::run_blocking(flags) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is_usage() => {
            // Like clap's own usage errors: a plain line, exit status 2.
            eprintln!("capmox-controller: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            tracing::error!(error = %e, category = e.category(), "capmox-controller failed");
            ExitCode::FAILURE
        }
    }
}
