//! `make demo`: three simulated Proxmox datacenters, an in-memory management
//! cluster, the CAPI stand-in and the real controller binary; the
//! multi-instance template rendered and applied, the workers scaled, a live
//! table of the machines and the final distribution per datacenter.
//!
//! Time: the simulator keeps Proxmox's real proportions (a full clone 60 s,
//! boot until the guest agent answers 100 s, start 3 s, ...) multiplied by
//! the time scale; the default 0.1 runs the whole story in about a minute
//! and a half.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use crate::env::{self, Env, EnvOptions};
use crate::error::{E2eError, Result};
use crate::observe::{self, MachineRow};
use crate::{scenario, table};

/// The demo's cluster name.
pub const CLUSTER: &str = "demo";

/// How the demo runs.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// Leave everything running at the end and print a kubeconfig.
    pub keep: bool,
    /// The simulator's time scale (0.1: a 60 s clone takes 6 s).
    pub time_scale: f64,
    /// Workers per datacenter after the scale-up.
    pub workers: i32,
    /// kube-sim's port (0: any free port).
    pub kube_port: u16,
    /// The longest the whole story may take before the demo gives up.
    pub timeout: Duration,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            keep: false,
            time_scale: 0.1,
            workers: 2,
            kube_port: 0,
            timeout: Duration::from_secs(15 * 60),
        }
    }
}

/// Writes to stdout; redraws the table in place on a terminal, else prints
/// it again only when it changed.
struct Screen {
    tty: bool,
    drawn_lines: usize,
    last: String,
    start: Instant,
}

impl Screen {
    fn new() -> Screen {
        Screen {
            tty: std::io::stdout().is_terminal(),
            drawn_lines: 0,
            last: String::new(),
            start: Instant::now(),
        }
    }

    fn say(&mut self, text: &str) {
        self.drawn_lines = 0;
        self.last.clear();
        println!("{text}");
    }

    fn draw(&mut self, body: &str) {
        if body == self.last {
            return;
        }
        let mut out = std::io::stdout().lock();
        if self.tty && self.drawn_lines > 0 {
            // Cursor up to the start of the previous table, clear to the end.
            let _ = write!(out, "\x1b[{}F\x1b[J", self.drawn_lines);
        }
        let stamped = format!("[{:6.1}s]\n{body}", self.start.elapsed().as_secs_f64());
        let _ = write!(out, "{stamped}");
        if !self.tty {
            let _ = writeln!(out);
        }
        let _ = out.flush();
        self.drawn_lines = stamped.lines().count();
        self.last = body.to_string();
    }
}

fn view(rows: &[MachineRow], env: &Env) -> String {
    let vms = observe::vm_counts(&env.pve);
    let isos = observe::iso_counts(&env.pve);
    let dcs: Vec<String> = vms
        .iter()
        .map(|(dc, n)| {
            let i = isos.get(dc).copied().unwrap_or(0);
            format!("{dc}: {}, {}", count(*n, "VM"), count(i, "ISO"))
        })
        .collect();
    format!("{}\n{}", table::machines(rows), dcs.join(" | "))
}

/// `n` and `noun`, plural unless `n` is 1: "1 ISO", "0 ISOs", "3 VMs".
fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Redraws the table until `done` holds.
async fn watch(
    env: &mut Env,
    screen: &mut Screen,
    what: &str,
    deadline: Instant,
    done: impl Fn(&[MachineRow], &Env) -> bool,
) -> Result<Vec<MachineRow>> {
    loop {
        env.check_controller()?;
        let rows = observe::machine_rows(&env.client, &env.namespace).await?;
        screen.draw(&view(&rows, env));
        if done(&rows, env) {
            return Ok(rows);
        }
        if Instant::now() >= deadline {
            return Err(E2eError::Timeout {
                what: what.to_string(),
                after: screen.start.elapsed(),
                last_seen: format!(
                    "{}\n--- controller log (last 40 lines) ---\n{}",
                    observe::summary(&rows),
                    env.controller_log_tail(40)
                ),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Every machine running, none being deleted, and the seed ISOs cleaned up.
fn running(rows: &[MachineRow], env: &Env, cp: usize, workers: usize) -> bool {
    observe::iso_counts(&env.pve).values().all(|n| *n == 0)
        && rows.iter().filter(|r| r.control_plane).count() == cp
        && rows.iter().filter(|r| !r.control_plane).count() == workers
        && rows
            .iter()
            .all(|r| r.phase == "Running" && r.provisioned && !r.deleting)
}

/// [`run`] on a Tokio runtime of its own, for the `demo` binary's plain
/// `main` (an `async fn` awaited by the binary would be compiled again in
/// the binary's crate; see [`crate::bench::run_all_blocking`]).
///
/// # Errors
/// [`crate::E2eError::Io`] when the runtime cannot be built; otherwise as [`run`].
pub fn run_blocking(opts: DemoOptions) -> Result<Ending> {
    crate::runtime()?.block_on(run(opts))
}

/// How a demo that did not fail ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The story ran to its end (with `--keep`: and Ctrl-C stopped it after).
    Done,
    /// A signal stopped the story before its end: Ctrl-C (SIGINT), SIGTERM
    /// (`kill`, a service manager) or SIGHUP (the terminal closed). The
    /// binary exits with 128 + the signal's number (130, 143, 129), as a
    /// shell reports a process ended by it.
    Interrupted {
        /// The signal's number (2, 15 or 1).
        signal: i32,
    },
}

/// The signals that stop the demo: SIGINT (Ctrl-C), SIGTERM and SIGHUP,
/// listened to from the start.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        let listen = |kind: SignalKind, name: &str| {
            signal(kind).map_err(|source| crate::E2eError::Io {
                path: std::path::PathBuf::from(format!("<{name} handler>")),
                source,
            })
        };
        Ok(Signals {
            interrupt: listen(SignalKind::interrupt(), "SIGINT")?,
            terminate: listen(SignalKind::terminate(), "SIGTERM")?,
            hangup: listen(SignalKind::hangup(), "SIGHUP")?,
        })
    }

    /// The number of the next signal received (2, 15 or 1).
    async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.interrupt.recv() => 2,
            _ = self.terminate.recv() => 15,
            _ = self.hangup.recv() => 1,
        }
    }
}

/// Runs the demo.
///
/// # Errors
/// Any failure of the environment, the template, or a wait (with the
/// controller's log tail).
pub async fn run(opts: DemoOptions) -> Result<Ending> {
    // SIGINT is taken over before anything starts: a listener made later
    // (`tokio::signal::ctrl_c()` registers on its first poll) let a Ctrl-C
    // that came before it kill the demo outright, leaving its controller
    // running, or be swallowed, so that the demo ran to its end.
    // SIGTERM and SIGHUP likewise: left to their default, they ended the
    // demo at once and left its controller running and its directory behind.
    let mut signals = Signals::new()?;
    let mut screen = Screen::new();
    let deadline = Instant::now() + opts.timeout;
    screen.say(&format!(
        "capmox demo: one Kubernetes cluster over three Proxmox VE datacenters (time scale {}: a 60 s clone takes {:.1} s)\n",
        opts.time_scale,
        60.0 * opts.time_scale
    ));
    let mut eo = EnvOptions::new("demo");
    eo.time_scale = opts.time_scale;
    eo.kube_port = opts.kube_port;
    eo.wait_floor = opts.timeout;
    eo.log_level = "info".into();
    screen.say("starting pve-sim, kube-sim, the CAPI stand-in and capmox-controller (built first when missing or stale)...");
    let mut env = Env::start(eo).await?;
    let mut lines = vec!["pve-sim datacenters:".to_string()];
    for c in env.pve.clusters() {
        let nodes: Vec<String> = c.nodes().iter().map(|n| n.name.clone()).collect();
        let template = c
            .config()
            .templates
            .first()
            .map(|t| format!("template {} ({})", t.vmid, t.name))
            .unwrap_or_default();
        lines.push(format!(
            "  {:5} {}  token {}  nodes {}  {template}",
            c.name(),
            c.url(),
            c.token_id(),
            nodes.join(",")
        ));
    }
    lines.push(format!(
        "kube-sim:         {}  (kubeconfig {})",
        env.kube_url().unwrap_or_else(|| "(real cluster)".into()),
        env.kubeconfig().display()
    ));
    let kept_log = kept_log_path(std::process::id());
    lines.push(log_line(&env.controller_log(), &kept_log));
    screen.say(&lines.join("\n"));

    // Ctrl-C at any moment stops the demo as cleanly as its end does: the
    // environment shut down, its working directory removed, the log kept.
    let outcome = tokio::select! {
        r = story(&mut env, &mut screen, &opts, deadline) => r.map(|()| Ending::Done),
        signal = signals.recv() => Ok(Ending::Interrupted { signal }),
    };
    let finished = matches!(outcome, Ok(Ending::Done));
    if finished && opts.keep {
        let kc = env.kubeconfig().display().to_string();
        screen.say(&format!(
            "everything keeps running. Try:\n  export KUBECONFIG={kc}\n  kubectl get cluster-api -n {ns}\n  kubectl get proxmoxmachines -n {ns} -o wide\n  kubectl scale machinedeployment {CLUSTER}-md-dc-a -n {ns} --replicas 3\n  kubectl get nodes\nCtrl-C stops it (and removes the kubeconfig).",
            ns = env.namespace
        ));
        signals.recv().await;
    }
    // The working directory goes with the environment; the controller's
    // log stays for whoever wants to read what it did (a failed or
    // interrupted run's too), one file per run: two demos at once do not
    // write over each other's.
    let copied = std::fs::copy(env.controller_log(), &kept_log).is_ok();
    env.shutdown().await;
    let log_line = if copied {
        format!("the controller's log is kept in {}", kept_log.display())
    } else {
        "the controller's log could not be kept".to_string()
    };
    let how = match &outcome {
        Ok(Ending::Done) => "done",
        Ok(Ending::Interrupted { .. }) => "interrupted",
        Err(_) => "failed",
    };
    let next = if finished && !opts.keep {
        "\nNext: `make demo DEMO_ARGS=--keep` keeps everything running to explore with kubectl; docs/getting-started.md installs the provider against real Proxmox VE."
    } else {
        ""
    };
    screen.say(&format!(
        "\n{how}: the simulated datacenters, the management cluster and the controller are stopped; {log_line}.{next}"
    ));
    outcome
}

/// The start-up line naming the controller's log: `running`, in the
/// working directory, is removed with it when the demo ends, however it
/// ends; the copy in `kept` stays. (The line named only `running`, which
/// no longer existed once the demo had ended.)
fn log_line(running: &std::path::Path, kept: &std::path::Path) -> String {
    format!(
        "controller log:   {} while the demo runs; kept in {} when it ends",
        running.display(),
        kept.display()
    )
}

/// Where the demo with process id `pid` keeps its controller's log once
/// its working directory is removed: `capmox-demo-controller-<pid>.log` in
/// the temporary directory.
fn kept_log_path(pid: u32) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("capmox-demo-controller-{pid}.log"))
}

/// The demo's story: apply the multi-instance template, wait for 3
/// control-plane machines and 3 workers, scale every MachineDeployment to
/// `opts.workers`, wait, and print the distribution.
async fn story(
    env: &mut Env,
    screen: &mut Screen,
    opts: &DemoOptions,
    deadline: Instant,
) -> Result<()> {
    let mut vars = env.multi_instance_vars(CLUSTER);
    vars.insert("WORKER_MACHINE_COUNT".into(), "1".into());
    let n = env
        .apply_template(
            "cluster-template-multi-instance.yaml",
            env::MULTI_INSTANCE_TEMPLATE,
            &vars,
        )
        .await?;
    screen.start = Instant::now();
    screen.say(&format!(
        "\napplied cluster-template-multi-instance.yaml: {n} objects (cluster {CLUSTER}, 3 control-plane machines, one MachineDeployment per datacenter with 1 worker)\n"
    ));
    watch(
        env,
        screen,
        "3 control-plane machines and 3 workers running",
        deadline,
        |r, env| running(r, env, 3, 3),
    )
    .await?;
    screen.say(&format!(
        "\nscaling every MachineDeployment to {} workers (its scale subresource, as kubectl scale does)\n",
        opts.workers
    ));
    for dc in ["dc-a", "dc-b", "dc-c"] {
        scenario::scale_machine_deployment(
            &env.client,
            &env.namespace,
            &format!("{CLUSTER}-md-{dc}"),
            opts.workers,
        )
        .await?;
    }
    let workers = usize::try_from(opts.workers.max(0)).unwrap_or(0) * 3;
    let rows = watch(
        env,
        screen,
        "the scaled workers running",
        deadline,
        |r, env| running(r, env, 3, workers),
    )
    .await?;
    screen.say(&format!(
        "\nfinal distribution:\n{}",
        table::distribution(&rows, &observe::vm_counts(&env.pve)).trim_end()
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{count, kept_log_path, log_line};

    #[test]
    fn the_log_line_names_where_the_log_is_kept() {
        let kept = kept_log_path(42);
        assert_eq!(
            kept,
            std::env::temp_dir().join("capmox-demo-controller-42.log")
        );
        assert_eq!(
            log_line(std::path::Path::new("/tmp/w/capmox-controller.log"), &kept),
            format!(
                "controller log:   /tmp/w/capmox-controller.log while the demo runs; kept in {} when it ends",
                kept.display()
            )
        );
    }

    #[test]
    fn counts_are_singular_only_for_one() {
        assert_eq!(count(0, "ISO"), "0 ISOs");
        assert_eq!(count(1, "ISO"), "1 ISO");
        assert_eq!(count(3, "VM"), "3 VMs");
    }
}
