//! What the benchmark reads off the processes: peak resident memory and CPU
//! time from `/proc` (Linux), and the controller's Prometheus `/metrics`.
//!
//! - `/proc/<pid>/status` `VmHWM`: the peak resident set size, KiB;
//! - `/proc/<pid>/stat` fields 14 and 15 (`utime`, `stime`): CPU time in
//!   clock ticks (`getconf CLK_TCK`, 100 on Linux);
//! - `/metrics` (text exposition format 0.0.4): counters such as
//!   `capmox_reconcile_total{controller,outcome}` and
//!   `capmox_pve_requests_total{instance,method,endpoint,status}`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::{E2eError, Result};

/// CPU and memory figures of one process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessFigures {
    /// Peak resident set size (`VmHWM`), KiB.
    pub peak_rss_kib: u64,
    /// Resident set size now (`VmRSS`), KiB.
    pub rss_kib: u64,
    /// User + system CPU time consumed so far.
    pub cpu: Duration,
}

fn io(path: &Path, source: std::io::Error) -> E2eError {
    E2eError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Clock ticks per second for `/proc/<pid>/stat` (`getconf CLK_TCK`; 100,
/// the Linux default, when `getconf` cannot be run).
pub fn clock_ticks() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .filter(|t| *t > 0)
        .unwrap_or(100)
}

/// `VmHWM` of a `/proc/<pid>/status` text, KiB.
pub fn parse_vm_hwm(status: &str) -> Option<u64> {
    status_kib(status, "VmHWM:")
}

/// `VmRSS` of a `/proc/<pid>/status` text, KiB.
pub fn parse_vm_rss(status: &str) -> Option<u64> {
    status_kib(status, "VmRSS:")
}

fn status_kib(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?;
        rest.trim().trim_end_matches("kB").trim().parse().ok()
    })
}

/// `utime + stime` (clock ticks) of a `/proc/<pid>/stat` line. The command
/// name (field 2) is in parentheses and may contain spaces: fields are
/// counted after its closing parenthesis.
pub fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The figures of process `pid` (`"self"` for this process).
///
/// # Errors
/// [`E2eError::Io`] when `/proc` cannot be read (not Linux, process gone);
/// [`E2eError::Contract`] when its format is not understood.
pub fn process(pid: &str, ticks_per_second: u64) -> Result<ProcessFigures> {
    let dir = PathBuf::from("/proc").join(pid);
    let status_path = dir.join("status");
    let stat_path = dir.join("stat");
    let status = std::fs::read_to_string(&status_path).map_err(|e| io(&status_path, e))?;
    let stat = std::fs::read_to_string(&stat_path).map_err(|e| io(&stat_path, e))?;
    let peak_rss_kib = parse_vm_hwm(&status)
        .ok_or_else(|| E2eError::Contract(format!("no VmHWM in {}", status_path.display())))?;
    let rss_kib = parse_vm_rss(&status)
        .ok_or_else(|| E2eError::Contract(format!("no VmRSS in {}", status_path.display())))?;
    let ticks = parse_cpu_ticks(&stat).ok_or_else(|| {
        E2eError::Contract(format!(
            "cannot read utime/stime of {}",
            stat_path.display()
        ))
    })?;
    Ok(ProcessFigures {
        peak_rss_kib,
        rss_kib,
        cpu: Duration::from_secs_f64(ticks as f64 / ticks_per_second.max(1) as f64),
    })
}

/// Resets the peak resident set size (`VmHWM`) of process `pid` to its
/// current RSS (`echo 5 > /proc/PID/clear_refs`, Linux ≥ 4.0): the next
/// peak read is the peak since now.
///
/// # Errors
/// [`E2eError::Io`] when the file cannot be written (another user's
/// process, or a kernel without it).
pub fn reset_peak_rss(pid: &str) -> Result<()> {
    let path = PathBuf::from("/proc").join(pid).join("clear_refs");
    std::fs::write(&path, "5").map_err(|e| io(&path, e))
}

/// Processors available to this process (`std::thread::available_parallelism`).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// `MemTotal` of `/proc/meminfo`, KiB (0 when unreadable).
pub fn memory_kib() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("MemTotal:")?
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse()
                    .ok()
            })
        })
        .unwrap_or(0)
}

/// The processor model (`model name` of `/proc/cpuinfo`), if known.
pub fn cpu_model() -> Option<String> {
    let t = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    t.lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|r| r.split_once(':'))
        .map(|(_, m)| m.trim().to_string())
}

/// One sample of the text exposition format.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Metric name, e.g. `capmox_reconcile_total`.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Value.
    pub value: f64,
}

/// Every sample of a text exposition (comments and malformed lines skipped).
pub fn parse_exposition(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(parse_sample)
        .collect()
}

fn parse_sample(line: &str) -> Option<Sample> {
    let (head, value) = line.trim().rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let (name, labels) = match head.split_once('{') {
        None => (head.to_string(), BTreeMap::new()),
        Some((name, rest)) => (name.to_string(), parse_labels(rest.strip_suffix('}')?)?),
    };
    Some(Sample {
        name,
        labels,
        value,
    })
}

fn parse_labels(mut s: &str) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    while !s.is_empty() {
        let (key, rest) = s.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => value.push(other),
                    None => return None,
                },
                '"' => {
                    end = Some(i);
                    break;
                }
                c => value.push(c),
            }
        }
        let end = end?;
        out.insert(key.trim_start_matches(',').trim().to_string(), value);
        s = rest[end + 1..].trim_start_matches(',');
    }
    Some(out)
}

/// The controller's counters at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    /// `capmox_reconcile_total` by controller (every outcome).
    pub reconciles: BTreeMap<String, f64>,
    /// `capmox_reconcile_errors_total` by controller.
    pub reconcile_errors: BTreeMap<String, f64>,
    /// `capmox_pve_requests_total` by `"METHOD endpoint"` (every instance and status).
    pub pve_requests: BTreeMap<String, f64>,
    /// `capmox_machine_seconds_total` (real seconds) by `"lifecycle phase"`,
    /// e.g. `"create task_clone"`: where the machines' time went.
    pub machine_seconds: BTreeMap<String, f64>,
}

impl Counters {
    /// The counters of a scrape.
    pub fn from_samples(samples: &[Sample]) -> Counters {
        let mut c = Counters::default();
        let label = |s: &Sample, k: &str| s.labels.get(k).cloned().unwrap_or_default();
        for s in samples {
            match s.name.as_str() {
                "capmox_reconcile_total" => {
                    *c.reconciles.entry(label(s, "controller")).or_default() += s.value
                }
                "capmox_reconcile_errors_total" => {
                    *c.reconcile_errors
                        .entry(label(s, "controller"))
                        .or_default() += s.value
                }
                "capmox_pve_requests_total" => {
                    *c.pve_requests
                        .entry(format!("{} {}", label(s, "method"), label(s, "endpoint")))
                        .or_default() += s.value
                }
                "capmox_machine_seconds_total" => {
                    *c.machine_seconds
                        .entry(format!("{} {}", label(s, "lifecycle"), label(s, "phase")))
                        .or_default() += s.value
                }
                _ => {}
            }
        }
        c
    }

    /// `self − earlier`, per key (counters only grow; a key missing earlier counts from 0).
    pub fn since(&self, earlier: &Counters) -> Counters {
        fn diff(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
            a.iter()
                .map(|(k, v)| (k.clone(), v - b.get(k).copied().unwrap_or(0.0)))
                .filter(|(_, v)| *v > 0.0)
                .collect()
        }
        Counters {
            reconciles: diff(&self.reconciles, &earlier.reconciles),
            reconcile_errors: diff(&self.reconcile_errors, &earlier.reconcile_errors),
            pve_requests: diff(&self.pve_requests, &earlier.pve_requests),
            machine_seconds: diff(&self.machine_seconds, &earlier.machine_seconds),
        }
    }
}

/// The metrics address the controller logged at start-up
/// (`capmox-controller starting … metrics=127.0.0.1:PORT`), waiting up to
/// `timeout` for the line to appear.
///
/// # Errors
/// [`E2eError::Controller`] when it does not appear in time.
pub async fn metrics_address(log: &Path, timeout: Duration) -> Result<String> {
    let start = std::time::Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(addr) = text
            .lines()
            .filter(|l| l.contains("capmox-controller starting"))
            .filter_map(|l| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix("metrics="))
            })
            .next_back()
        {
            return Ok(addr.to_string());
        }
        if start.elapsed() >= timeout {
            return Err(E2eError::Controller(format!(
                "no metrics address in {} after {:.0} s",
                log.display(),
                timeout.as_secs_f64()
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Reads `http://<addr>/metrics` (plain HTTP/1.0, the body up to the close).
///
/// # Errors
/// [`E2eError::Io`] on connection failures, [`E2eError::Controller`] on a
/// non-200 answer.
pub async fn scrape(addr: &str) -> Result<Counters> {
    let path = PathBuf::from(format!("http://{addr}/metrics"));
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| io(&path, e))?;
    s.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .map_err(|e| io(&path, e))?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.map_err(|e| io(&path, e))?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(E2eError::Controller(format!(
            "{}: {}",
            path.display(),
            head.lines().next().unwrap_or_default()
        )));
    }
    Ok(Counters::from_samples(&parse_exposition(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files() {
        let status =
            "Name:\tcapmox\nVmPeak:\t  900000 kB\nVmHWM:\t   23456 kB\nVmRSS:\t   20000 kB\n";
        assert_eq!(parse_vm_hwm(status), Some(23456));
        assert_eq!(parse_vm_hwm("Name: x\n"), None);
        assert_eq!(parse_vm_rss(status), Some(20000));
        // pid (comm with ") " inside) state ppid pgrp session tty tpgid flags
        // minflt cminflt majflt cmajflt utime stime ...
        let stat = "4242 (capmox (x) y) S 1 2 3 4 5 6 7 8 9 10 250 75 0 0 20 0 12";
        assert_eq!(parse_cpu_ticks(stat), Some(325));
        assert_eq!(parse_cpu_ticks("4242 (x) S 1 2"), None);
        let me = process("self", clock_ticks()).unwrap();
        assert!(me.peak_rss_kib > 0);
    }

    #[test]
    fn exposition() {
        let text = r#"# HELP capmox_reconcile Reconciles by controller and outcome.
# TYPE capmox_reconcile counter
capmox_reconcile_total{controller="proxmoxmachine",outcome="ok"} 120
capmox_reconcile_total{controller="proxmoxmachine",outcome="error"} 3
capmox_reconcile_total{controller="proxmoxcluster",outcome="ok"} 7
capmox_reconcile_errors_total{controller="proxmoxmachine",category="kube"} 3
capmox_pve_requests_total{instance="dc-a",method="GET",endpoint="/nodes/{node}/qemu/{vmid}/config",status="200"} 40
capmox_pve_requests_total{instance="dc-b",method="GET",endpoint="/nodes/{node}/qemu/{vmid}/config",status="200"} 2
capmox_pve_requests_total{instance="dc-a",method="POST",endpoint="/nodes/{node}/qemu/{vmid}/clone",status="200"} 10
capmox_machine_seconds_total{lifecycle="create",phase="task_clone"} 12.5
capmox_machine_seconds_total{lifecycle="delete",phase="queue"} 0.25
capmox_leader 1
capmox_machines{instance="a \"q\" b",phase="x"} 1
"#;
        let samples = parse_exposition(text);
        assert_eq!(samples.len(), 11);
        assert_eq!(samples[10].labels["instance"], "a \"q\" b");
        let c = Counters::from_samples(&samples);
        assert_eq!(c.reconciles["proxmoxmachine"], 123.0);
        assert_eq!(c.reconciles["proxmoxcluster"], 7.0);
        assert_eq!(c.reconcile_errors["proxmoxmachine"], 3.0);
        assert_eq!(c.pve_requests["GET /nodes/{node}/qemu/{vmid}/config"], 42.0);
        assert_eq!(c.machine_seconds["create task_clone"], 12.5);
        assert_eq!(c.machine_seconds["delete queue"], 0.25);
        let earlier = Counters {
            pve_requests: BTreeMap::from([(
                "GET /nodes/{node}/qemu/{vmid}/config".to_string(),
                40.0,
            )]),
            ..Counters::default()
        };
        let d = c.since(&earlier);
        assert_eq!(d.pve_requests["GET /nodes/{node}/qemu/{vmid}/config"], 2.0);
        assert_eq!(d.pve_requests["POST /nodes/{node}/qemu/{vmid}/clone"], 10.0);
    }
}
