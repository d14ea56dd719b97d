//! One VM's config (current + pending, as in the `.conf` file), its runtime
//! state, and the status history `/cluster/resources` reads with lag.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::props::{self, Drive};

/// Guest agent behaviour of a VM (test control).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgentState {
    /// Answers once the VM has been up for the boot time and `agent` is configured.
    #[default]
    Auto,
    /// Answers as soon as the VM runs (boot time skipped).
    Running,
    /// Never answers (`QEMU guest agent is not running`).
    NotRunning,
}

/// An interface the guest agent reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GuestIface {
    /// Interface name in the guest.
    pub name: String,
    /// MAC, lower-case (QGA prints it so).
    pub mac: String,
    /// Addresses with prefix length.
    pub addrs: Vec<(std::net::IpAddr, u8)>,
}

/// A running VM.
#[derive(Clone, Debug)]
pub(crate) struct RunState {
    /// When the start task finished.
    pub since: Instant,
    /// `qmpstatus` paused.
    pub paused: bool,
    /// QEMU pid.
    pub pid: u32,
    /// What the agent will report.
    pub ifaces: Vec<GuestIface>,
    /// How the guest OS took its seed (a failed boot never writes the
    /// bootstrap sentinel).
    pub boot: crate::boot::GuestBoot,
    /// The NoCloud seed ISO the guest read at boot (volume ID, contents).
    pub seed: Option<(String, crate::iso::NoCloudSeed)>,
}

/// What pvestatd broadcasts about a VM.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StatusSnap {
    pub running: bool,
    pub name: Option<String>,
    pub template: bool,
    pub maxmem: u64,
    pub maxcpu: u32,
    pub maxdisk: u64,
    pub since: Option<Instant>,
}

/// A VM (or template) of a cluster.
#[derive(Clone, Debug)]
pub(crate) struct Vm {
    pub vmid: u32,
    /// Node whose directory holds the config.
    pub node: String,
    /// Current config (includes `lock`, `template`, disks as strings).
    pub conf: BTreeMap<String, String>,
    /// `[PENDING]` values.
    pub pending: BTreeMap<String, String>,
    /// Pending deletions (value: forced).
    pub pending_delete: BTreeMap<String, bool>,
    /// Running state.
    pub run: Option<RunState>,
    /// Guest agent behaviour.
    pub agent: AgentState,
    /// Status snapshots for the lagging cluster view.
    pub history: VecDeque<(Instant, StatusSnap)>,
    /// Cloud-init values used for the last generated image.
    pub cloudinit_applied: BTreeMap<String, String>,
    /// PCI devices (mapping entries' `path`) taken from the start until the
    /// VM stops ([`crate::pci`]).
    pub pci_held: Vec<String>,
}

/// Cloud-init related config keys (qemu-server `$cloudinitoptions` + ipconfig).
pub(crate) fn is_cloudinit_key(k: &str) -> bool {
    matches!(
        k,
        "cicustom"
            | "cipassword"
            | "citype"
            | "ciuser"
            | "ciupgrade"
            | "nameserver"
            | "searchdomain"
            | "sshkeys"
    ) || props::indexed(k, "ipconfig", 31)
}

impl Vm {
    pub fn new(vmid: u32, node: &str, conf: BTreeMap<String, String>) -> Vm {
        Vm {
            vmid,
            node: node.to_string(),
            conf,
            pending: BTreeMap::new(),
            pending_delete: BTreeMap::new(),
            run: None,
            agent: AgentState::Auto,
            history: VecDeque::new(),
            cloudinit_applied: BTreeMap::new(),
            pci_held: Vec::new(),
        }
    }

    pub fn is_template(&self) -> bool {
        self.conf.get("template").is_some_and(|v| v == "1")
    }

    pub fn lock(&self) -> Option<&str> {
        self.conf.get("lock").map(String::as_str)
    }

    pub fn name(&self) -> Option<&str> {
        self.conf.get("name").map(String::as_str)
    }

    pub fn running(&self) -> bool {
        self.run.is_some()
    }

    /// `VM is locked (<lock>)` unless unlocked (qemu-server `check_lock`).
    pub fn check_lock(&self) -> Result<(), String> {
        match self.lock() {
            Some(l) => Err(format!("VM is locked ({l})")),
            None => Ok(()),
        }
    }

    /// Memory in MiB.
    pub fn memory_mib(&self) -> u64 {
        props::memory_mib(self.conf.get("memory").map(String::as_str))
    }

    /// vCPUs (sockets × cores).
    pub fn cpus(&self) -> u32 {
        let get = |k: &str| {
            self.conf
                .get(k)
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or(1)
        };
        get("sockets") * get("cores")
    }

    /// Drives of the current config (key → parsed drive), sorted by key.
    pub fn drives(&self) -> Vec<(String, Drive)> {
        self.conf
            .iter()
            .filter(|(k, _)| props::is_drive_key(k) || props::is_unused_key(k))
            .filter_map(|(k, v)| Drive::parse(v).ok().map(|d| (k.clone(), d)))
            .collect()
    }

    /// Size of the boot disk in bytes (first non-cdrom disk in key order),
    /// `maxdisk` in listings.
    pub fn maxdisk(&self) -> u64 {
        self.conf
            .iter()
            .filter(|(k, v)| {
                props::is_drive_key(k)
                    && *k != "efidisk0"
                    && *k != "tpmstate0"
                    && !v.contains("media=cdrom")
            })
            .find_map(|(_, v)| Drive::parse(v).ok().and_then(|d| d.size()))
            .unwrap_or(0)
    }

    /// Whether the guest agent is configured (the `agent` key is present).
    pub fn agent_configured(&self) -> bool {
        self.conf.contains_key("agent")
    }

    /// Whether `agent` is enabled.
    pub fn agent_enabled(&self) -> bool {
        self.conf
            .get("agent")
            .is_some_and(|v| props::agent_enabled(v))
    }

    /// The `.conf` text (used for the digest).
    pub fn conf_text(&self) -> String {
        let mut s = String::new();
        for (k, v) in &self.conf {
            s.push_str(&format!("{k}: {v}\n"));
        }
        if !self.pending.is_empty() || !self.pending_delete.is_empty() {
            s.push_str("\n[PENDING]\n");
            for (k, v) in &self.pending {
                s.push_str(&format!("{k}: {v}\n"));
            }
            if !self.pending_delete.is_empty() {
                let d: Vec<String> = self
                    .pending_delete
                    .iter()
                    .map(|(k, f)| if *f { format!("!{k}") } else { k.clone() })
                    .collect();
                s.push_str(&format!("delete: {}\n", d.join(",")));
            }
        }
        s
    }

    /// SHA-1 hex of the config file (`digest`).
    pub fn digest(&self) -> String {
        let d = ring::digest::digest(
            &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
            self.conf_text().as_bytes(),
        );
        d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The config with pending values applied (what `GET …/config` shows
    /// without `current=1`).
    pub fn effective_conf(&self) -> BTreeMap<String, String> {
        let mut c = self.conf.clone();
        for (k, v) in &self.pending {
            c.insert(k.clone(), v.clone());
        }
        for k in self.pending_delete.keys() {
            c.remove(k);
        }
        c
    }

    fn snapshot(&self) -> StatusSnap {
        StatusSnap {
            running: self.running(),
            name: self.name().map(String::from),
            template: self.is_template(),
            maxmem: self.memory_mib() << 20,
            maxcpu: self.cpus(),
            maxdisk: self.maxdisk(),
            since: self.run.as_ref().map(|r| r.since),
        }
    }

    /// Records the current status for the lagging `/cluster/resources` view.
    /// Call after every change of status, name, memory, CPUs or disks.
    pub fn record_status(&mut self, lag: Duration) {
        let now = Instant::now();
        let snap = self.snapshot();
        if self.history.back().is_some_and(|(_, s)| *s == snap) {
            return;
        }
        self.history.push_back((now, snap));
        // keep only the newest snapshot older than the lag window
        while self.history.len() > 1 && now.duration_since(self.history[1].0) >= lag {
            self.history.pop_front();
        }
    }

    /// What pvestatd has broadcast `lag` ago (`None`: nothing yet → `unknown`).
    pub fn visible_status(&self, lag: Duration) -> Option<StatusSnap> {
        if lag.is_zero() {
            return Some(self.snapshot());
        }
        let now = Instant::now();
        self.history
            .iter()
            .rev()
            .find(|(t, _)| now.duration_since(*t) >= lag)
            .map(|(_, s)| s.clone())
    }

    /// Lowest free `unusedN` key.
    pub fn free_unused_key(&self) -> String {
        (0..256)
            .map(|i| format!("unused{i}"))
            .find(|k| !self.conf.contains_key(k) && !self.pending.contains_key(k))
            .unwrap_or_else(|| "unused255".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm() -> Vm {
        Vm::new(
            100,
            "n1",
            BTreeMap::from([
                ("name".to_string(), "a".to_string()),
                ("memory".to_string(), "4096".to_string()),
                ("cores".to_string(), "2".to_string()),
                ("sockets".to_string(), "2".to_string()),
                (
                    "scsi0".to_string(),
                    "ceph:vm-100-disk-0,size=32G".to_string(),
                ),
                (
                    "efidisk0".to_string(),
                    "ceph:vm-100-disk-1,efitype=4m,size=528K".to_string(),
                ),
                ("ide2".to_string(), "none,media=cdrom".to_string()),
            ]),
        )
    }

    #[test]
    fn derived_values() {
        let v = vm();
        assert_eq!(v.memory_mib(), 4096);
        assert_eq!(v.cpus(), 4);
        assert_eq!(v.maxdisk(), 32 << 30);
        assert_eq!(v.digest().len(), 40);
        let mut w = v.clone();
        w.pending.insert("cores".into(), "4".into());
        assert_ne!(v.digest(), w.digest());
        assert_eq!(w.effective_conf()["cores"], "4");
        assert_eq!(w.conf["cores"], "2");
    }

    #[test]
    fn lagging_status() {
        let mut v = vm();
        let lag = Duration::from_secs(3600);
        v.record_status(lag);
        assert!(v.visible_status(lag).is_none(), "too new: unknown");
        assert!(v.visible_status(Duration::ZERO).is_some());
    }
}
