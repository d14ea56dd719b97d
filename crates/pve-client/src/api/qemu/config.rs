//! VM configuration: `GET`, `POST` (async), `PUT` (sync) on
//! `/nodes/{node}/qemu/{vmid}/config`, and `GET …/pending`.
//!
//! Write rules (docs/proxmox-semantics.md §11, docs/field-cases.md B30): carry the `digest` of the
//! config you read so a concurrent change fails with a `Conflict` ("checksum
//! mismatch") instead of a lost update; never set and delete the same key in
//! one request (the client refuses it); prefer the asynchronous `POST` for
//! anything that allocates storage or hotplugs, and wait for its task.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;

use super::vm_path;
use crate::PveClient;
use crate::client::Call;
use crate::encode::{Form, decode_sshkeys, encode_sshkeys};
use crate::error::{ParseError, PveError};
use crate::options::{
    AgentOption, Arch, Boot, Cpu, Disk, DiskSlot, Firmware, HostPci, IpConfig, MAX_HOSTPCI_INDEX,
    MachineType, NetDevice, Smbios1, Startup, Tags,
};
use crate::types::lenient::opt_string;
use crate::types::{NodeName, Upid, VmId, VmLock};

/// Highest index of `net[n]` and `ipconfig[n]`.
pub const MAX_NET_INDEX: u8 = 31;

/// A VM configuration as returned by `GET …/config`: the keys the provider
/// uses, typed, plus the raw map with every key (including the typed ones).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VmConfig {
    /// `name` (host name for cloud-init).
    pub name: Option<String>,
    /// `memory`, **MiB** (also accepts PVE 9's `current=<MiB>` form).
    pub memory_mib: Option<u64>,
    /// `balloon`, **MiB** (0 disables the balloon device).
    pub balloon_mib: Option<u64>,
    /// `cores` per socket.
    pub cores: Option<u32>,
    /// `sockets`.
    pub sockets: Option<u32>,
    /// `tags` (empty when absent).
    pub tags: Tags,
    /// `agent`.
    pub agent: Option<AgentOption>,
    /// `net[n]`, by index.
    pub nets: BTreeMap<u8, NetDevice>,
    /// `scsi[n]`, `virtio[n]`, `sata[n]`, `ide[n]` (disks, CD-ROMs and the
    /// cloud-init drive), by slot.
    pub disks: BTreeMap<DiskSlot, Disk>,
    /// `efidisk0`.
    pub efidisk0: Option<Disk>,
    /// `tpmstate0`.
    pub tpmstate0: Option<Disk>,
    /// `ipconfig[n]`, by index.
    pub ipconfigs: BTreeMap<u8, IpConfig>,
    /// `smbios1` (its `uuid` identifies the VM).
    pub smbios1: Option<Smbios1>,
    /// `lock`.
    pub lock: Option<VmLock>,
    /// `digest`: SHA-1 of the config file; pass it back on writes.
    pub digest: Option<String>,
    /// `boot`.
    pub boot: Option<Boot>,
    /// `onboot`.
    pub onboot: Option<bool>,
    /// `startup`.
    pub startup: Option<Startup>,
    /// `description` (free text; the provider may keep an owner marker here).
    pub description: Option<String>,
    /// `template`.
    pub template: bool,
    /// `ciuser`.
    pub ciuser: Option<String>,
    /// `sshkeys`, **decoded** (Proxmox stores them percent-encoded).
    pub sshkeys: Option<String>,
    /// `nameserver` (space-separated list).
    pub nameserver: Option<String>,
    /// `searchdomain`.
    pub searchdomain: Option<String>,
    /// `cicustom`.
    pub cicustom: Option<String>,
    /// `bios`: the firmware.
    pub bios: Option<Firmware>,
    /// `arch`; absent means the architecture of the node the VM runs on.
    pub arch: Option<Arch>,
    /// `machine`: the QEMU machine type.
    pub machine: Option<MachineType>,
    /// `cpu`: the emulated CPU type and flags.
    pub cpu: Option<Cpu>,
    /// `hostpci[n]`, by index: PCI passthrough devices.
    pub hostpcis: BTreeMap<u8, HostPci>,
    /// Every key as returned, verbatim.
    pub raw: BTreeMap<String, Value>,
}

fn value_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "1" } else { "0" }.to_owned()),
        _ => None,
    }
}

fn parse_u64(key: &str, s: &str) -> Result<u64, ParseError> {
    s.trim()
        .parse()
        .map_err(|_| ParseError::new("VM config value", s, format!("'{key}' must be an integer")))
}

fn parse_flag(key: &str, s: &str) -> Result<bool, ParseError> {
    match s.trim() {
        "1" | "true" => Ok(true),
        "0" | "false" | "" => Ok(false),
        _ => Err(ParseError::new(
            "VM config value",
            s,
            format!("'{key}' must be 0 or 1"),
        )),
    }
}

/// `net12` → 12 for prefix `net`, within 0 ..= [`MAX_NET_INDEX`].
fn indexed(key: &str, prefix: &str) -> Option<u8> {
    let digits = key.strip_prefix(prefix)?;
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    digits.parse().ok().filter(|i| *i <= MAX_NET_INDEX)
}

impl VmConfig {
    /// Builds the typed view from the `data` object of `GET …/config`.
    ///
    /// # Errors
    /// [`ParseError`] naming the key whose value does not parse (unknown
    /// sub-options are kept, so this means a malformed value).
    pub fn from_map(map: BTreeMap<String, Value>) -> Result<Self, ParseError> {
        let mut c = Self::default();
        for (key, value) in &map {
            let Some(s) = value_string(value) else {
                continue;
            };
            let with_key =
                |e: ParseError| ParseError::new(e.what, e.input, format!("{key}: {}", e.reason));
            match key.as_str() {
                "name" => c.name = Some(s),
                "memory" => {
                    let v = s.strip_prefix("current=").unwrap_or(&s);
                    let v = v.split(',').next().unwrap_or(v);
                    c.memory_mib = Some(parse_u64(key, v)?);
                }
                "balloon" => c.balloon_mib = Some(parse_u64(key, &s)?),
                "cores" => c.cores = Some(u32::try_from(parse_u64(key, &s)?).unwrap_or(u32::MAX)),
                "sockets" => {
                    c.sockets = Some(u32::try_from(parse_u64(key, &s)?).unwrap_or(u32::MAX))
                }
                "tags" => c.tags = Tags::parse(&s).map_err(with_key)?,
                "agent" => c.agent = Some(AgentOption::parse(&s).map_err(with_key)?),
                "efidisk0" => c.efidisk0 = Some(Disk::parse(&s).map_err(with_key)?),
                "tpmstate0" => c.tpmstate0 = Some(Disk::parse(&s).map_err(with_key)?),
                "smbios1" => c.smbios1 = Some(Smbios1::parse(&s).map_err(with_key)?),
                "lock" => c.lock = (!s.is_empty()).then(|| VmLock::parse(&s)),
                "digest" => c.digest = Some(s),
                "boot" => c.boot = Some(Boot::parse(&s).map_err(with_key)?),
                "onboot" => c.onboot = Some(parse_flag(key, &s)?),
                "startup" => c.startup = Some(Startup::parse(&s).map_err(with_key)?),
                "description" => c.description = Some(s),
                "template" => c.template = parse_flag(key, &s)?,
                "ciuser" => c.ciuser = Some(s),
                "sshkeys" => c.sshkeys = Some(decode_sshkeys(&s)),
                "nameserver" => c.nameserver = Some(s),
                "searchdomain" => c.searchdomain = Some(s),
                "cicustom" => c.cicustom = Some(s),
                "bios" => c.bios = Some(Firmware::parse(&s).map_err(with_key)?),
                "arch" => c.arch = Some(Arch::parse(&s).map_err(with_key)?),
                "machine" => c.machine = Some(MachineType::parse(&s).map_err(with_key)?),
                "cpu" => c.cpu = Some(Cpu::parse(&s).map_err(with_key)?),
                k => {
                    if let Some(i) = indexed(k, "net") {
                        c.nets.insert(i, NetDevice::parse(&s).map_err(with_key)?);
                    } else if let Some(i) =
                        indexed(k, "hostpci").filter(|i| *i <= MAX_HOSTPCI_INDEX)
                    {
                        c.hostpcis.insert(i, HostPci::parse(&s).map_err(with_key)?);
                    } else if let Some(i) = indexed(k, "ipconfig") {
                        c.ipconfigs
                            .insert(i, IpConfig::parse(&s).map_err(with_key)?);
                    } else if let Ok(slot) = DiskSlot::parse(k) {
                        c.disks.insert(slot, Disk::parse(&s).map_err(with_key)?);
                    }
                }
            }
        }
        c.raw = map;
        Ok(c)
    }

    /// The cloud-init drive and its slot, if any.
    pub fn cloudinit_drive(&self) -> Option<(DiskSlot, &Disk)> {
        self.disks
            .iter()
            .find(|(_, d)| d.is_cloudinit())
            .map(|(s, d)| (*s, d))
    }

    /// `unused[n]` keys (detached volumes), e.g. after a disk was replaced.
    pub fn unused_keys(&self) -> Vec<&str> {
        self.raw
            .keys()
            .filter(|k| {
                k.strip_prefix("unused")
                    .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            })
            .map(String::as_str)
            .collect()
    }
}

/// A config change: keys to set, keys to delete, optional `digest`.
///
/// Typed setters validate their value; a validation failure is remembered and
/// reported as [`PveError::InvalidRequest`] when the update is sent, before any
/// request. Booleans are sent as `1`/`0`, `sshkeys` double-encoded, everything
/// percent-encoded by the form encoder.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigUpdate {
    set: BTreeMap<String, String>,
    delete: BTreeSet<String>,
    digest: Option<String>,
    error: Option<ParseError>,
}

impl ConfigUpdate {
    /// An empty update.
    pub fn new() -> Self {
        Self::default()
    }

    fn fail(mut self, e: ParseError) -> Self {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self
    }

    /// Sends `digest`: the update fails with `Conflict` ("checksum mismatch")
    /// if the config changed since it was read.
    pub fn digest(mut self, digest: impl Into<String>) -> Self {
        self.digest = Some(digest.into());
        self
    }

    /// Sets any key to a raw value (escape hatch for keys without a typed
    /// setter). The key must be a config id (`[a-z][a-z0-9_-]+`).
    pub fn set(mut self, key: &str, value: impl Into<String>) -> Self {
        if let Err(e) = check_key(key) {
            return self.fail(e);
        }
        self.set.insert(key.to_owned(), value.into());
        self
    }

    /// Deletes a key (`delete=` list). Deleting a disk key detaches the volume
    /// (it becomes `unused[n]`).
    pub fn delete(mut self, key: &str) -> Self {
        if let Err(e) = check_key(key) {
            return self.fail(e);
        }
        self.delete.insert(key.to_owned());
        self
    }

    /// `name` (must be a DNS name; it becomes the guest host name).
    pub fn name(self, name: &str) -> Self {
        match check_dns_name(name) {
            Ok(()) => self.set("name", name),
            Err(e) => self.fail(e),
        }
    }

    /// `memory` in **MiB**.
    pub fn memory_mib(self, mib: u64) -> Self {
        self.set("memory", mib.to_string())
    }

    /// `cores` per socket.
    pub fn cores(self, cores: u32) -> Self {
        self.set("cores", cores.to_string())
    }

    /// `sockets`.
    pub fn sockets(self, sockets: u32) -> Self {
        self.set("sockets", sockets.to_string())
    }

    /// `tags`, joined with `;`.
    pub fn tags(self, tags: &Tags) -> Self {
        self.set("tags", tags.to_string())
    }

    /// `agent`.
    pub fn agent(self, agent: &AgentOption) -> Self {
        match agent.validate() {
            Ok(()) => self.set("agent", agent.to_string()),
            Err(e) => self.fail(e),
        }
    }

    /// `net[index]`, index 0 ..= 31.
    pub fn net(self, index: u8, dev: &NetDevice) -> Self {
        if index > MAX_NET_INDEX {
            return self.fail(ParseError::new(
                "config key",
                format!("net{index}"),
                "index must be 0..=31",
            ));
        }
        match dev.validate() {
            Ok(()) => self.set(&format!("net{index}"), dev.to_string()),
            Err(e) => self.fail(e),
        }
    }

    /// A disk slot (`scsi0`, `ide2`, …). For a new volume use
    /// [`Disk::new_volume`] (size in **GiB**), for an ISO [`Disk::cdrom`].
    pub fn disk(self, slot: DiskSlot, disk: &Disk) -> Self {
        match disk.validate() {
            Ok(()) => self.set(&slot.to_string(), disk.to_string()),
            Err(e) => self.fail(e),
        }
    }

    /// `ipconfig[index]`, index 0 ..= 31.
    pub fn ipconfig(self, index: u8, cfg: &IpConfig) -> Self {
        if index > MAX_NET_INDEX {
            return self.fail(ParseError::new(
                "config key",
                format!("ipconfig{index}"),
                "index must be 0..=31",
            ));
        }
        match cfg.validate() {
            Ok(()) => self.set(&format!("ipconfig{index}"), cfg.to_string()),
            Err(e) => self.fail(e),
        }
    }

    /// `smbios1`.
    pub fn smbios1(self, smbios: &Smbios1) -> Self {
        match smbios.validate() {
            Ok(()) => self.set("smbios1", smbios.to_string()),
            Err(e) => self.fail(e),
        }
    }

    /// `cpu` (checked as Proxmox checks a VM's CPU, see [`Cpu::validate`]).
    pub fn cpu(self, cpu: &Cpu) -> Self {
        match cpu.validate() {
            Ok(()) => self.set("cpu", cpu.to_string()),
            Err(e) => self.fail(e),
        }
    }

    /// `hostpci[index]`, index 0 ..= 15 (see [`HostPci::validate`]).
    pub fn hostpci(self, index: u8, dev: &HostPci) -> Self {
        if index > MAX_HOSTPCI_INDEX {
            return self.fail(ParseError::new(
                "config key",
                format!("hostpci{index}"),
                "index must be 0..=15",
            ));
        }
        match dev.validate() {
            Ok(()) => self.set(&format!("hostpci{index}"), dev.to_string()),
            Err(e) => self.fail(e),
        }
    }

    /// `efidisk0` (for a new one [`Disk::new_volume`]; the size is
    /// ignored, Proxmox copies the firmware's variable store).
    pub fn efidisk(self, disk: &Disk) -> Self {
        match disk.validate() {
            Ok(()) => self.set("efidisk0", disk.to_string()),
            Err(e) => self.fail(e),
        }
    }

    /// `bios`.
    pub fn bios(self, firmware: Firmware) -> Self {
        self.set("bios", firmware.as_str())
    }

    /// `machine`.
    pub fn machine(self, machine: &MachineType) -> Self {
        self.set("machine", machine.to_string())
    }

    /// `boot`.
    pub fn boot(self, boot: &Boot) -> Self {
        self.set("boot", boot.to_string())
    }

    /// `onboot` (`1`/`0`).
    pub fn onboot(self, on: bool) -> Self {
        self.set("onboot", if on { "1" } else { "0" })
    }

    /// `startup`.
    pub fn startup(self, startup: &Startup) -> Self {
        self.set("startup", startup.to_string())
    }

    /// `description` (free text, up to 8 KiB on PVE).
    pub fn description(self, text: &str) -> Self {
        self.set("description", text)
    }

    /// `ciuser`.
    pub fn ciuser(self, user: &str) -> Self {
        self.set("ciuser", user)
    }

    /// `sshkeys`: the public keys, one per line, **not** encoded; the client
    /// percent-encodes them as Proxmox requires (then form-encodes again).
    pub fn sshkeys(self, keys: &str) -> Self {
        self.set("sshkeys", encode_sshkeys(keys))
    }

    /// `nameserver` (space-separated addresses).
    pub fn nameserver(self, servers: &str) -> Self {
        self.set("nameserver", servers)
    }

    /// `searchdomain`.
    pub fn searchdomain(self, domain: &str) -> Self {
        self.set("searchdomain", domain)
    }

    /// `cicustom` (e.g. `user=local:snippets/u.yaml`).
    pub fn cicustom(self, value: &str) -> Self {
        self.set("cicustom", value)
    }

    /// Whether nothing would be changed.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.delete.is_empty()
    }

    /// Keys that would be set, with their wire values.
    pub fn changes(&self) -> &BTreeMap<String, String> {
        &self.set
    }

    /// Keys that would be deleted.
    pub fn deletions(&self) -> &BTreeSet<String> {
        &self.delete
    }

    /// Checks the update and builds the form: remembered setter errors, empty
    /// updates, and keys both set and deleted are refused.
    fn to_form(&self) -> Result<Form, String> {
        if let Some(e) = &self.error {
            return Err(e.to_string());
        }
        if self.is_empty() {
            return Err("config update sets and deletes nothing".into());
        }
        let both: Vec<&str> = self
            .set
            .keys()
            .filter(|k| self.delete.contains(*k))
            .map(String::as_str)
            .collect();
        if !both.is_empty() {
            return Err(format!(
                "config update both sets and deletes {}",
                both.join(", ")
            ));
        }
        let mut f = Form::new();
        for (k, v) in &self.set {
            f.push(k, v.clone());
        }
        if !self.delete.is_empty() {
            f.push(
                "delete",
                self.delete.iter().cloned().collect::<Vec<_>>().join(","),
            );
        }
        f.push_opt("digest", self.digest.as_deref());
        Ok(f)
    }
}

fn check_key(key: &str) -> Result<(), ParseError> {
    let mut c = key.chars();
    let ok = matches!(c.next(), Some(f) if f.is_ascii_lowercase())
        && key.len() >= 2
        && c.all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_' || ch == '-');
    if ok
        && !matches!(
            key,
            "digest" | "delete" | "revert" | "node" | "vmid" | "skiplock"
        )
    {
        Ok(())
    } else {
        Err(ParseError::new(
            "config key",
            key,
            "must be a config option name like net0 or memory",
        ))
    }
}

/// PVE format `dns-name`: labels `[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?`
/// separated by `.`.
pub(crate) fn check_dns_name(name: &str) -> Result<(), ParseError> {
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        matches!((b.first(), b.last()), (Some(f), Some(e)) if f.is_ascii_alphanumeric() && e.is_ascii_alphanumeric())
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
    };
    if !name.is_empty() && name.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(ParseError::new(
            "VM name",
            name,
            "must be a DNS name (letters, digits, inner '-', '.'-separated)",
        ))
    }
}

/// One entry of `GET …/pending`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PendingEntry {
    /// Config key.
    pub key: String,
    /// Current value.
    #[serde(default, deserialize_with = "opt_string")]
    pub value: Option<String>,
    /// Value waiting to be applied (reboot or hotplug).
    #[serde(default, deserialize_with = "opt_string")]
    pub pending: Option<String>,
    /// Pending delete: 1 = delete, 2 = forced delete.
    #[serde(default, deserialize_with = "crate::types::lenient::opt_u32")]
    pub delete: Option<u32>,
}

impl PendingEntry {
    /// Whether something waits to be applied for this key.
    pub fn is_pending(&self) -> bool {
        self.pending.is_some() || self.delete.is_some_and(|d| d > 0)
    }
}

impl PveClient {
    /// `GET /nodes/{node}/qemu/{vmid}/config`: the config with pending changes
    /// applied (what the VM will look like after a reboot).
    ///
    /// # Errors
    /// [`PveError::NotFound`] when the VM is not on that node (right after a
    /// clone task the config may briefly be missing: docs/field-cases.md B29);
    /// `Decode` when a value the client types does not parse; transport errors.
    pub async fn vm_config(&self, node: &NodeName, vmid: VmId) -> Result<VmConfig, PveError> {
        self.get_config(node, vmid, false).await
    }

    /// `GET /nodes/{node}/qemu/{vmid}/config?current=1`: the running config
    /// without pending changes.
    ///
    /// # Errors
    /// As [`PveClient::vm_config`].
    pub async fn vm_config_current(
        &self,
        node: &NodeName,
        vmid: VmId,
    ) -> Result<VmConfig, PveError> {
        self.get_config(node, vmid, true).await
    }

    async fn get_config(
        &self,
        node: &NodeName,
        vmid: VmId,
        current: bool,
    ) -> Result<VmConfig, PveError> {
        let path = vm_path(node, vmid, "/config");
        let ctx = self.ctx(&reqwest::Method::GET, &path);
        let mut q = Form::new();
        if current {
            q.push_bool("current", true);
        }
        let map: BTreeMap<String, Value> = self
            .call(Call::get("/nodes/{node}/qemu/{vmid}/config", path).with_query(q))
            .await?;
        VmConfig::from_map(map).map_err(|e| PveError::Decode {
            ctx,
            message: e.to_string(),
        })
    }

    /// `POST /nodes/{node}/qemu/{vmid}/config` (asynchronous): returns the
    /// `qmconfig` task's UPID, or `None` when the server finished within its
    /// `background_delay` and answered `null`. Wait for the task.
    ///
    /// # Errors
    /// [`PveError::InvalidRequest`] (nothing sent) for an empty update, a key
    /// both set and deleted, or a value that failed validation;
    /// `InvalidParameter` with per-key messages; `Conflict` for a stale
    /// `digest`; `Locked` / `LockTimeout` while a clone or other task holds the
    /// VM; `NotFound`; transport errors.
    pub async fn update_vm_config_async(
        &self,
        node: &NodeName,
        vmid: VmId,
        update: &ConfigUpdate,
    ) -> Result<Option<Upid>, PveError> {
        let form = update.to_form().map_err(|m| self.invalid_request(m))?;
        self.call(Call::post(
            "/nodes/{node}/qemu/{vmid}/config",
            vm_path(node, vmid, "/config"),
            form,
        ))
        .await
    }

    /// `PUT /nodes/{node}/qemu/{vmid}/config` (synchronous): applies the
    /// update inside the request (under the VM's 10 s flock). Avoid for disk
    /// allocation or hotplug: a client timeout leaves the outcome unknown.
    ///
    /// # Errors
    /// As [`PveClient::update_vm_config_async`]; hotplug failures come back as
    /// `InvalidParameter` keyed by option (the change stays pending).
    pub async fn update_vm_config_sync(
        &self,
        node: &NodeName,
        vmid: VmId,
        update: &ConfigUpdate,
    ) -> Result<(), PveError> {
        let form = update.to_form().map_err(|m| self.invalid_request(m))?;
        let _: Option<Value> = self
            .call(Call::put(
                "/nodes/{node}/qemu/{vmid}/config",
                vm_path(node, vmid, "/config"),
                form,
            ))
            .await?;
        Ok(())
    }

    /// `GET /nodes/{node}/qemu/{vmid}/pending`: every key with current and
    /// pending value. Changes that need a reboot show up here.
    ///
    /// # Errors
    /// [`PveError::NotFound`]; transport errors.
    pub async fn vm_pending(
        &self,
        node: &NodeName,
        vmid: VmId,
    ) -> Result<Vec<PendingEntry>, PveError> {
        self.call(Call::get(
            "/nodes/{node}/qemu/{vmid}/pending",
            vm_path(node, vmid, "/pending"),
        ))
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{DiskSize, NetModel};

    fn cfg_json() -> BTreeMap<String, Value> {
        serde_json::from_str(
            r#"{
            "name": "wl1-md-0-abcde", "memory": "4096", "cores": 2, "sockets": "1",
            "tags": "capmox;cluster-wl1", "agent": "1",
            "net0": "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,tag=12",
            "scsi0": "ceph:vm-131-disk-0,discard=on,size=20G",
            "ide2": "ceph:vm-131-cloudinit,media=cdrom",
            "efidisk0": "ceph:vm-131-disk-1,efitype=4m,size=528K",
            "ipconfig0": "ip=10.0.0.21/24,gw=10.0.0.1",
            "smbios1": "uuid=2f1b6c1e-9a7d-4c61-b0e3-5a8d2c4f7e90",
            "boot": "order=scsi0;net0", "onboot": 1, "startup": "order=2",
            "sshkeys": "ssh-ed25519%20AAAA%20me%40host%0A",
            "digest": "0a1b2c3d4e5f", "lock": "clone", "bios": "ovmf", "arch": "aarch64",
            "machine": "virt", "cpu": "host,flags=+aes", "hostpci0": "mapping=gpu,pcie=1",
            "unused0": "ceph:vm-131-disk-9", "vmgenid": "x", "scsihw": "virtio-scsi-single"
        }"#,
        )
        .unwrap()
    }

    #[test]
    fn typed_view_of_a_config() {
        let c = VmConfig::from_map(cfg_json()).unwrap();
        assert_eq!(c.name.as_deref(), Some("wl1-md-0-abcde"));
        assert_eq!(c.memory_mib, Some(4096));
        assert_eq!((c.cores, c.sockets), (Some(2), Some(1)));
        assert!(c.tags.contains("cluster-wl1"));
        assert!(c.agent.as_ref().is_some_and(|a| a.enabled));
        assert_eq!(c.nets[&0].model, NetModel::Virtio);
        assert_eq!(c.nets[&0].tag, Some(12));
        let scsi0 = DiskSlot::parse("scsi0").unwrap();
        assert_eq!(c.disks[&scsi0].size, Some(DiskSize::from_gib(20)));
        assert_eq!(
            c.cloudinit_drive().map(|(s, _)| s.to_string()).as_deref(),
            Some("ide2")
        );
        assert_eq!(
            c.efidisk0.as_ref().and_then(|d| d.size),
            Some(DiskSize::from_bytes(528 * 1024))
        );
        assert!(c.ipconfigs[&0].gw.is_some());
        assert!(c.smbios1.as_ref().and_then(|s| s.uuid).is_some());
        assert_eq!(c.boot.as_ref().map(|b| b.order.len()), Some(2));
        assert_eq!(c.onboot, Some(true));
        assert_eq!(c.startup.and_then(|s| s.order), Some(2));
        assert_eq!(c.sshkeys.as_deref(), Some("ssh-ed25519 AAAA me@host\n"));
        assert_eq!(c.digest.as_deref(), Some("0a1b2c3d4e5f"));
        assert_eq!(c.lock, Some(VmLock::Clone));
        assert_eq!(c.unused_keys(), vec!["unused0"]);
        assert_eq!(
            c.raw.get("scsihw").and_then(Value::as_str),
            Some("virtio-scsi-single")
        );
        assert!(!c.template);
        assert_eq!(c.bios, Some(Firmware::Ovmf));
        assert_eq!(c.arch, Some(Arch::Aarch64));
        assert_eq!(
            c.machine.as_ref().map(MachineType::kind),
            Some(crate::options::MachineKind::Virt)
        );
        assert_eq!(
            c.cpu.as_ref().and_then(|c| c.cputype.as_deref()),
            Some("host")
        );
        assert_eq!(c.hostpcis[&0].mapping.as_deref(), Some("gpu"));
    }

    #[test]
    fn shape_setters_validate() {
        let u = ConfigUpdate::new()
            .cpu(&Cpu::model("x86-64-v3"))
            .hostpci(0, &HostPci::mapped("gpu"))
            .bios(Firmware::Ovmf)
            .machine(&MachineType::virt());
        assert_eq!(
            u.to_form().unwrap().encode(),
            "bios=ovmf&cpu=x86-64-v3&hostpci0=mapping%3Dgpu&machine=virt"
        );
        assert!(
            ConfigUpdate::new()
                .cpu(&Cpu::model("Skylake"))
                .to_form()
                .is_err()
        );
        assert!(
            ConfigUpdate::new()
                .hostpci(16, &HostPci::mapped("gpu"))
                .to_form()
                .is_err()
        );
        assert!(
            ConfigUpdate::new()
                .hostpci(0, &HostPci::default())
                .to_form()
                .is_err()
        );
    }

    #[test]
    fn memory_property_string_form() {
        let m: BTreeMap<String, Value> =
            serde_json::from_str(r#"{"memory":"current=8192"}"#).unwrap();
        assert_eq!(VmConfig::from_map(m).unwrap().memory_mib, Some(8192));
    }

    #[test]
    fn malformed_value_names_the_key() {
        let m: BTreeMap<String, Value> =
            serde_json::from_str(r#"{"net0":"bridge=vmbr0"}"#).unwrap();
        let e = VmConfig::from_map(m).unwrap_err();
        assert!(e.reason.starts_with("net0:"), "{e}");
    }

    #[test]
    fn update_form_encoding() {
        let mut net = NetDevice::new(NetModel::Virtio);
        net.bridge = Some("vmbr0".into());
        let u = ConfigUpdate::new()
            .digest("abc")
            .memory_mib(4096)
            .net(0, &net)
            .onboot(true)
            .tags(&Tags::parse("capmox;wl1").unwrap())
            .delete("ide3")
            .delete("unused0");
        let f = u.to_form().unwrap();
        assert_eq!(
            f.encode(),
            "memory=4096&net0=virtio%2Cbridge%3Dvmbr0&onboot=1&tags=capmox%3Bwl1&delete=ide3%2Cunused0&digest=abc"
        );
    }

    #[test]
    fn b30_set_and_delete_of_the_same_key_is_refused() {
        let u = ConfigUpdate::new()
            .disk(DiskSlot::parse("ide2").unwrap(), &Disk::empty_cdrom())
            .delete("ide2");
        let e = u.to_form().unwrap_err();
        assert!(e.contains("both sets and deletes ide2"), "{e}");
    }

    #[test]
    fn invalid_values_are_remembered() {
        let mut net = NetDevice::new(NetModel::Virtio);
        net.tag = Some(4095);
        assert!(ConfigUpdate::new().net(0, &net).to_form().is_err());
        assert!(
            ConfigUpdate::new()
                .net(32, &NetDevice::new(NetModel::Virtio))
                .to_form()
                .is_err()
        );
        assert!(ConfigUpdate::new().name("bad_name").to_form().is_err());
        assert!(ConfigUpdate::new().set("Memory", "1").to_form().is_err());
        assert!(ConfigUpdate::new().set("digest", "x").to_form().is_err());
        assert!(ConfigUpdate::new().to_form().is_err(), "empty update");
        assert!(
            ConfigUpdate::new()
                .name("wl1-cp-0.example")
                .to_form()
                .is_ok()
        );
    }

    #[test]
    fn sshkeys_are_encoded_once_by_the_setter() {
        let u = ConfigUpdate::new().sshkeys("ssh-ed25519 AAAA me@host");
        assert_eq!(u.changes()["sshkeys"], "ssh-ed25519%20AAAA%20me%40host");
        assert_eq!(
            u.to_form().unwrap().encode(),
            "sshkeys=ssh-ed25519%2520AAAA%2520me%2540host"
        );
    }

    #[test]
    fn pending_entries() {
        let p: Vec<PendingEntry> = serde_json::from_str(
            r#"[{"key":"memory","value":8192,"pending":4096},{"key":"cores","value":"2"},{"key":"ide3","value":"x","delete":1}]"#,
        )
        .unwrap();
        assert!(p[0].is_pending() && !p[1].is_pending() && p[2].is_pending());
        assert_eq!(p[0].value.as_deref(), Some("8192"));
    }
}
