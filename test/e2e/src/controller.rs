//! The real `capmox-controller` binary as a child process.
//!
//! Finding the binary (the robust option, since `CARGO_BIN_EXE_*` exists only
//! for binaries of the same package):
//! 1. `CAPMOX_CONTROLLER_BIN` names it explicitly (e.g. a release build or a
//!    container image's binary);
//! 2. otherwise it lives beside the running executable in the same Cargo
//!    profile directory (`<target>/<profile>/capmox-controller`; test
//!    executables sit one level deeper in `deps/`). When it is missing or
//!    older than any of its sources ([`BINARY_CRATES`]' `src/` and
//!    manifests, the root `Cargo.toml` and `Cargo.lock`), it is built
//!    first, once per process, with `cargo build -p capmox-e2e -p
//!    capmox-controller --bin capmox-controller --profile <that profile>`
//!    into that target directory — selecting this package too, so features
//!    resolve as for the build that made the running executable and the
//!    dependencies are reused. A stale binary is never run; a fresh one (e.g.
//!    after `cargo nextest run --workspace`, which builds it) costs nothing.
//!    If Cargo is unavailable but the file exists, the file is used as is.
//!
//! The child writes its logs to a file; it is killed when the handle is
//! dropped (`kill_on_drop`), and [`ControllerProcess::kill`] sends SIGKILL
//! (crash testing).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use tokio::process::{Child, Command};

use crate::error::{E2eError, Result};

/// Name of the manager binary.
pub const BINARY: &str = "capmox-controller";

/// Where the binary is found and how to build it.
fn locate() -> Result<(PathBuf, Option<(PathBuf, String)>)> {
    if let Some(p) = std::env::var_os("CAPMOX_CONTROLLER_BIN") {
        return Ok((PathBuf::from(p), None));
    }
    let exe = std::env::current_exe().map_err(|source| E2eError::Io {
        path: PathBuf::from("<current executable>"),
        source,
    })?;
    let mut dir = exe.parent().map(Path::to_path_buf).ok_or_else(|| {
        E2eError::Controller(format!("{} has no parent directory", exe.display()))
    })?;
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    let profile_dir = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| {
            E2eError::Controller(format!(
                "cannot tell the Cargo profile from {}",
                dir.display()
            ))
        })?
        .to_string();
    let profile = if profile_dir == "debug" {
        "dev".to_string()
    } else {
        profile_dir
    };
    let target = dir.parent().map(Path::to_path_buf).ok_or_else(|| {
        E2eError::Controller(format!("{} has no parent directory", dir.display()))
    })?;
    Ok((dir.join(BINARY), Some((target, profile))))
}

fn build(target: &Path, profile: &str) -> std::result::Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    let out = std::process::Command::new(&cargo)
        .args([
            "build",
            "--quiet",
            "-p",
            "capmox-e2e",
            "-p",
            "capmox-controller",
            "--bin",
            BINARY,
            "--profile",
            profile,
        ])
        .arg("--manifest-path")
        .arg(manifest)
        .env("CARGO_TARGET_DIR", target)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", PathBuf::from(&cargo).display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`cargo build -p capmox-e2e -p capmox-controller --bin {BINARY} --profile {profile}` failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The newest modification time of the files under `dir` (recursively).
fn newest_under(dir: &Path) -> Option<SystemTime> {
    let meta = std::fs::metadata(dir).ok()?;
    if meta.is_file() {
        return meta.modified().ok();
    }
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path
            .file_name()
            .is_some_and(|n| n == "target" || n == ".git")
        {
            continue;
        }
        newest = newest.max(newest_under(&path));
    }
    newest
}

/// Whether `binary` exists and is at least as new as every file under `sources`.
fn is_fresh_against(binary: &Path, sources: &[PathBuf]) -> bool {
    let Some(built) = std::fs::metadata(binary).and_then(|m| m.modified()).ok() else {
        return false;
    };
    let newest = sources.iter().filter_map(|p| newest_under(p)).max();
    newest.is_some_and(|s| s <= built)
}

/// The workspace crates the controller binary is compiled from (the
/// controller and its path dependencies, relative to the workspace root).
///
/// Only their `src/` and manifests count as the binary's sources: an edited
/// integration test (`tests/`) does not make it stale. It did when the whole
/// `crates/` folder counted, and then the rebuild below, whose package
/// selection leaves out the dev-dependencies' features that `make test`'s
/// build has (tokio's `test-util`), recompiled tokio and everything above it
/// for about 90 s at the start of the e2e tests.
pub const BINARY_CRATES: [&str; 3] = [
    "crates/capmox-controller",
    "crates/pve-client",
    "crates/ipam",
];

/// Whether `binary` is newer than every workspace source that can go into it.
fn is_fresh(binary: &Path) -> bool {
    is_fresh_against(binary, &binary_sources(&workspace_root()))
}

fn workspace_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The files and folders under `root` that the binary is compiled from.
fn binary_sources(root: &Path) -> Vec<PathBuf> {
    let mut sources = vec![root.join("Cargo.toml"), root.join("Cargo.lock")];
    for krate in BINARY_CRATES {
        sources.push(root.join(krate).join("src"));
        sources.push(root.join(krate).join("Cargo.toml"));
    }
    sources
}

/// The path of a fresh `capmox-controller` binary (built once per process
/// when needed; see the module docs).
///
/// # Errors
/// [`E2eError::Controller`] when it cannot be built and does not exist.
pub fn binary() -> Result<PathBuf> {
    static FOUND: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let (path, build_in) = locate().map_err(|e| e.to_string())?;
            if let Some((target, profile)) = build_in
                && !is_fresh(&path)
                && let Err(e) = build(&target, &profile)
            {
                if path.is_file() {
                    tracing::warn!(error = %e, binary = %path.display(), "using the existing controller binary");
                } else {
                    return Err(e);
                }
            }
            if path.is_file() {
                Ok(path)
            } else {
                Err(format!("{} does not exist", path.display()))
            }
        })
        .clone()
        .map_err(E2eError::Controller)
}

/// How to run the controller.
#[derive(Clone, Debug)]
pub struct ControllerArgs {
    /// Kubeconfig of the management cluster.
    pub kubeconfig: PathBuf,
    /// Namespace to watch (`None`: all).
    pub namespace: Option<String>,
    /// The simulator's time scale, passed as `--time-scale` so the
    /// controller's own timings shrink the same way.
    pub time_scale: f64,
    /// Log file (appended to across restarts).
    pub log_file: PathBuf,
    /// Log level / filter directives.
    pub log_level: String,
    /// Where the webhook server listens and reads its certificate; `None`
    /// runs the controller with `--disable-webhooks`.
    pub webhook: Option<WebhookArgs>,
    /// Further arguments, appended after the derived ones (not one of
    /// them again: the controller refuses an option given twice).
    pub extra: Vec<String>,
}

/// The controller's webhook server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookArgs {
    /// `--webhook-addr`.
    pub addr: std::net::SocketAddr,
    /// `--webhook-cert-dir` (`tls.crt`, `tls.key`).
    pub cert_dir: PathBuf,
}

impl ControllerArgs {
    /// The command-line arguments. Request timeouts (`--pve-timeout`,
    /// `--probe-timeout`) keep the controller's defaults: they are wall-clock
    /// limits the time scale does not shrink.
    pub fn to_args(&self) -> Vec<String> {
        let scale = if self.time_scale.is_finite() && self.time_scale > 0.0 {
            self.time_scale
        } else {
            1.0
        };
        let mut args = vec![
            "--kubeconfig".to_string(),
            self.kubeconfig.display().to_string(),
            "--metrics-addr".into(),
            "127.0.0.1:0".into(),
            "--health-addr".into(),
            "127.0.0.1:0".into(),
            "--time-scale".into(),
            format!("{scale}"),
            "--log-level".into(),
            self.log_level.clone(),
        ];
        if let Some(ns) = &self.namespace {
            args.push("--namespace".into());
            args.push(ns.clone());
        }
        match &self.webhook {
            Some(w) => {
                args.push("--webhook-addr".into());
                args.push(w.addr.to_string());
                args.push("--webhook-cert-dir".into());
                args.push(w.cert_dir.display().to_string());
            }
            None => args.push("--disable-webhooks".into()),
        }
        args.extend(self.extra.iter().cloned());
        args
    }
}

/// A running controller.
pub struct ControllerProcess {
    child: Child,
    args: ControllerArgs,
}

impl std::fmt::Debug for ControllerProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerProcess")
            .field("pid", &self.child.id())
            .field("log", &self.args.log_file)
            .finish()
    }
}

impl ControllerProcess {
    /// Starts the binary with `args`.
    ///
    /// # Errors
    /// [`E2eError::Controller`] when the binary cannot be found or built,
    /// [`E2eError::Io`] when the log file or the process cannot be opened/started.
    pub async fn start(args: ControllerArgs) -> Result<ControllerProcess> {
        let bin = tokio::task::spawn_blocking(binary)
            .await
            .map_err(|e| E2eError::Controller(e.to_string()))??;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&args.log_file)
            .map_err(|source| E2eError::Io {
                path: args.log_file.clone(),
                source,
            })?;
        let log2 = log.try_clone().map_err(|source| E2eError::Io {
            path: args.log_file.clone(),
            source,
        })?;
        let child = Command::new(&bin)
            .args(args.to_args())
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| E2eError::Io {
                path: bin.clone(),
                source,
            })?;
        Ok(ControllerProcess { child, args })
    }

    /// The process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The log file.
    pub fn log_file(&self) -> &Path {
        &self.args.log_file
    }

    /// The arguments it was started with (to restart it the same way).
    pub fn args(&self) -> &ControllerArgs {
        &self.args
    }

    /// Whether it has exited, with its status text.
    ///
    /// # Errors
    /// [`E2eError::Io`] if the status cannot be read.
    pub fn exited(&mut self) -> Result<Option<String>> {
        self.child
            .try_wait()
            .map(|s| s.map(|s| s.to_string()))
            .map_err(|source| E2eError::Io {
                path: self.args.log_file.clone(),
                source,
            })
    }

    /// SIGKILL, then waits for the process to be gone (at most `timeout`).
    ///
    /// # Errors
    /// [`E2eError::Controller`] if it cannot be killed or does not exit.
    pub async fn kill(mut self, timeout: Duration) -> Result<()> {
        self.child
            .start_kill()
            .map_err(|e| E2eError::Controller(format!("kill: {e}")))?;
        match tokio::time::timeout(timeout, self.child.wait()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(E2eError::Controller(format!("wait: {e}"))),
            Err(_) => Err(E2eError::Controller("did not exit after SIGKILL".into())),
        }
    }

    /// The last `lines` lines of its log (for failure messages).
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.args.log_file, lines)
    }
}

/// The last `lines` lines of a file (empty if unreadable).
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freshness_compares_with_the_newest_source() {
        let dir = std::env::temp_dir().join(format!(
            "capmox-e2e-fresh-{}",
            uuid::Uuid::new_v4().simple()
        ));
        let src = dir.join("crates/a/src");
        std::fs::create_dir_all(&src).unwrap();
        let t = |s: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        let touch = |p: &Path, at: SystemTime| {
            let f = std::fs::File::create(p).unwrap();
            f.set_modified(at).unwrap();
        };
        let bin = dir.join("capmox-controller");
        let sources = vec![dir.join("crates")];
        assert!(!is_fresh_against(&bin, &sources), "missing binary");
        touch(&src.join("lib.rs"), t(1_000));
        touch(&bin, t(2_000));
        assert!(is_fresh_against(&bin, &sources));
        touch(&src.join("new.rs"), t(3_000));
        assert!(
            !is_fresh_against(&bin, &sources),
            "a source newer than the binary"
        );
        // A `target` directory inside the tree is not a source.
        std::fs::create_dir_all(dir.join("crates/target")).unwrap();
        touch(&bin, t(4_000));
        touch(&dir.join("crates/target/x"), t(5_000));
        assert!(is_fresh_against(&bin, &sources));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `[dependencies]` of the manifest `text` that are workspace crates
    /// (`paths`: workspace dependency name → its path).
    fn path_dependencies(
        text: &str,
        paths: &std::collections::BTreeMap<String, String>,
    ) -> Vec<String> {
        let mut section = "";
        let mut found = Vec::new();
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                section = line;
                continue;
            }
            if section != "[dependencies]" {
                continue;
            }
            let name = line.split(['.', ' ', '=']).next().unwrap_or("");
            if let Some(path) = paths.get(name) {
                found.push(path.clone());
            }
        }
        found
    }

    #[test]
    fn binary_crates_are_the_controller_and_its_path_dependencies() {
        let root = workspace_root();
        let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
        // `name = { path = "crates/…" }` in [workspace.dependencies].
        let paths: std::collections::BTreeMap<String, String> = read("Cargo.toml")
            .lines()
            .filter_map(|l| {
                let (name, rest) = l.split_once('=')?;
                let path = rest.split_once("path = \"")?.1.split('"').next()?;
                Some((name.trim().to_string(), path.to_string()))
            })
            .collect();
        assert!(paths.contains_key("pve-client"), "{paths:?}");
        // The controller's path dependencies, and theirs in turn.
        let mut want = std::collections::BTreeSet::from(["crates/capmox-controller".to_string()]);
        let mut todo = vec!["crates/capmox-controller".to_string()];
        while let Some(krate) = todo.pop() {
            for dep in path_dependencies(&read(&format!("{krate}/Cargo.toml")), &paths) {
                if want.insert(dep.clone()) {
                    todo.push(dep);
                }
            }
        }
        let have: std::collections::BTreeSet<String> =
            BINARY_CRATES.iter().map(|c| c.to_string()).collect();
        assert_eq!(
            have, want,
            "BINARY_CRATES must list what the binary is built from"
        );
        let sources = binary_sources(&root);
        assert!(sources.iter().all(|p| p.exists()), "{sources:?}");
        assert!(
            !sources.iter().any(|p| p.ends_with("tests")),
            "integration tests are not sources of the binary"
        );
    }

    #[test]
    fn args_pass_the_time_scale_and_leave_request_timeouts_alone() {
        let a = ControllerArgs {
            kubeconfig: PathBuf::from("/tmp/kc"),
            namespace: Some("ns".into()),
            time_scale: 0.005,
            log_file: PathBuf::from("/tmp/log"),
            log_level: "info".into(),
            webhook: Some(WebhookArgs {
                addr: "127.0.0.1:9443".parse().unwrap(),
                cert_dir: PathBuf::from("/tmp/certs"),
            }),
            extra: vec!["--clone-concurrency".into(), "8".into()],
        };
        let args = a.to_args();
        let value = |flag: &str| args[args.iter().position(|x| x == flag).unwrap() + 1].clone();
        assert_eq!(value("--kubeconfig"), "/tmp/kc");
        assert_eq!(value("--time-scale"), "0.005");
        // Request timeouts are wall-clock in the controller: no compensation.
        assert!(
            !args
                .iter()
                .any(|a| a == "--pve-timeout" || a == "--probe-timeout")
        );
        assert_eq!(value("--namespace"), "ns");
        assert_eq!(value("--metrics-addr"), "127.0.0.1:0");
        assert_eq!(value("--clone-concurrency"), "8");
        assert_eq!(value("--webhook-addr"), "127.0.0.1:9443");
        assert_eq!(value("--webhook-cert-dir"), "/tmp/certs");
        assert!(!args.contains(&"--disable-webhooks".to_string()));
        assert_eq!(
            args.last().map(String::as_str),
            Some("8"),
            "extra arguments come last"
        );
        let real = ControllerArgs {
            time_scale: 1.0,
            namespace: None,
            webhook: None,
            ..a
        };
        let args = real.to_args();
        assert_eq!(
            args[args.iter().position(|x| x == "--time-scale").unwrap() + 1],
            "1"
        );
        assert!(!args.contains(&"--namespace".to_string()));
        assert!(args.contains(&"--disable-webhooks".to_string()));
    }
}
