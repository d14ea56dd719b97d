//! Guest agent: `POST …/agent/ping`, `GET …/agent/network-get-interfaces`,
//! `POST …/agent/exec`, `GET …/agent/exec-status`.
//!
//! Every agent call first checks synchronously that the config has an `agent`
//! key, that the VM runs, and that the agent answers a ping within 3 s; each
//! failure is a 500 that the client reports as
//! [`PveError::AgentUnavailable`] — "retry later" while the VM boots
//! (docs/proxmox-semantics.md §17).

use std::net::IpAddr;

use serde::{Deserialize, Deserializer};

use super::qemu::vm_path;
use crate::PveClient;
use crate::client::Call;
use crate::encode::Form;
use crate::error::PveError;
use crate::options::MacAddr;
use crate::types::lenient::{bool01, opt_string, opt_u32, opt_u64};
use crate::types::{NodeName, VmId};

/// An address reported by the guest agent.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GuestIpAddress {
    /// The address text as reported (`10.0.0.21`, `fe80::be24:11ff:feaa:bbcc`).
    #[serde(rename = "ip-address")]
    pub ip_address: String,
    /// `ipv4` or `ipv6`.
    #[serde(rename = "ip-address-type", default)]
    pub ip_address_type: String,
    /// Prefix length.
    #[serde(default, deserialize_with = "opt_u32")]
    pub prefix: Option<u32>,
}

impl GuestIpAddress {
    /// The parsed address (a zone suffix `%eth0` is ignored).
    pub fn addr(&self) -> Option<IpAddr> {
        self.ip_address.split('%').next()?.parse().ok()
    }

    /// Whether this address is usable as a machine address: not loopback,
    /// not link-local (`169.254/16`, `fe80::/10`), not unspecified.
    pub fn is_global(&self) -> bool {
        match self.addr() {
            Some(IpAddr::V4(a)) => !(a.is_loopback() || a.is_link_local() || a.is_unspecified()),
            Some(IpAddr::V6(a)) => {
                !(a.is_loopback() || a.is_unspecified() || (a.segments()[0] & 0xffc0) == 0xfe80)
            }
            None => false,
        }
    }
}

/// One interface from `network-get-interfaces`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GuestInterface {
    /// Interface name in the guest (`eth0`, `ens18`, `lo`).
    pub name: String,
    /// MAC address as the guest reports it (lower-case).
    #[serde(rename = "hardware-address", default, deserialize_with = "opt_string")]
    pub hardware_address: Option<String>,
    /// Addresses.
    #[serde(rename = "ip-addresses", default)]
    pub ip_addresses: Vec<GuestIpAddress>,
}

impl GuestInterface {
    /// The MAC parsed (to compare with a `net[n]` MAC regardless of case).
    pub fn mac(&self) -> Option<MacAddr> {
        self.hardware_address
            .as_deref()
            .and_then(|m| MacAddr::parse(m).ok())
    }
}

#[derive(Deserialize)]
struct AgentResult<T> {
    result: T,
}

/// The answer of `POST …/agent/exec`.
#[derive(Deserialize)]
struct ExecStarted {
    #[serde(default, deserialize_with = "opt_u64")]
    pid: Option<u64>,
}

/// A signed integer that may arrive as a number or a numeric string
/// (`exitcode`, `signal`; docs/proxmox-semantics.md §1); `null`, `""` or absent → `None`.
fn opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom(format!("expected an integer, got {n}"))),
        Some(serde_json::Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(serde_json::Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("expected an integer, got {s:?}"))),
        Some(other) => Err(serde::de::Error::custom(format!(
            "expected an integer, got {other}"
        ))),
    }
}

/// The state of a process started with [`PveClient::agent_exec`], from
/// `GET …/agent/exec-status` (QGA `guest-exec-status`).
///
/// QGA forgets a process once its final status (`exited: true`) was read,
/// so that answer can be read exactly once (docs/proxmox-semantics.md §17).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ExecStatus {
    /// The process ended.
    #[serde(default, deserialize_with = "bool01")]
    pub exited: bool,
    /// Exit code when it ended normally.
    #[serde(default, deserialize_with = "opt_i64")]
    pub exitcode: Option<i64>,
    /// Signal number (or exception code on Windows) when it was killed.
    #[serde(default, deserialize_with = "opt_i64")]
    pub signal: Option<i64>,
    /// Standard output (decoded by Proxmox from QGA's base64).
    #[serde(rename = "out-data", default, deserialize_with = "opt_string")]
    pub out_data: Option<String>,
    /// Standard error.
    #[serde(rename = "err-data", default, deserialize_with = "opt_string")]
    pub err_data: Option<String>,
    /// Standard output was cut (QGA captures a bounded amount).
    #[serde(rename = "out-truncated", default, deserialize_with = "bool01")]
    pub out_truncated: bool,
    /// Standard error was cut.
    #[serde(rename = "err-truncated", default, deserialize_with = "bool01")]
    pub err_truncated: bool,
}

impl ExecStatus {
    /// Whether the process ended with exit code 0.
    pub fn succeeded(&self) -> bool {
        self.exited && self.exitcode == Some(0)
    }
}

/// The form of `POST …/agent/exec`: one `command` pair per element
/// (program first), which pve-http-server turns into the `command` array
/// (docs/proxmox-semantics.md §1).
fn exec_form(command: &[&str]) -> Form {
    let mut form = Form::new();
    for part in command {
        form.push("command", *part);
    }
    form
}

impl PveClient {
    /// `POST /nodes/{node}/qemu/{vmid}/agent/ping`: `Ok(())` when the agent
    /// answers.
    ///
    /// # Errors
    /// [`PveError::AgentUnavailable`] (not configured, VM not running, agent
    /// not running, timeout); `NotFound`; `PermissionDenied`
    /// (`VM.GuestAgent.Audit` on PVE 9, `VM.Monitor` on PVE 8); transport errors.
    pub async fn agent_ping(&self, node: &NodeName, vmid: VmId) -> Result<(), PveError> {
        let _: serde_json::Value = self
            .call(Call::post(
                "/nodes/{node}/qemu/{vmid}/agent/ping",
                vm_path(node, vmid, "/agent/ping"),
                Form::new(),
            ))
            .await?;
        Ok(())
    }

    /// `GET /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces`: the
    /// guest's interfaces and addresses (including `lo` and link-local ones;
    /// filter with [`GuestIpAddress::is_global`]).
    ///
    /// # Errors
    /// As [`PveClient::agent_ping`]; `Decode` if the result is not a list.
    pub async fn agent_network_interfaces(
        &self,
        node: &NodeName,
        vmid: VmId,
    ) -> Result<Vec<GuestInterface>, PveError> {
        let r: AgentResult<Vec<GuestInterface>> = self
            .call(Call::get(
                "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces",
                vm_path(node, vmid, "/agent/network-get-interfaces"),
            ))
            .await?;
        Ok(r.result)
    }

    /// `POST /nodes/{node}/qemu/{vmid}/agent/exec`: starts `command`
    /// (program and arguments, no shell) in the guest and returns the guest
    /// PID to read with [`PveClient::agent_exec_status`]. The command is
    /// form-encoded as repeated `command` keys.
    ///
    /// Needs `VM.GuestAgent.Unrestricted` on `/vms/{vmid}` (PVE 9) or
    /// `VM.Monitor` (PVE 8).
    ///
    /// # Errors
    /// `InvalidRequest` when `command` is empty (no call is made);
    /// [`PveError::AgentUnavailable`] (no agent configured, VM not running,
    /// agent not answering, `Agent error: …`); `NotFound`;
    /// `PermissionDenied`; `Decode` when the answer has no `pid`; transport
    /// errors.
    pub async fn agent_exec(
        &self,
        node: &NodeName,
        vmid: VmId,
        command: &[&str],
    ) -> Result<u64, PveError> {
        if command.is_empty() {
            return Err(self.invalid_request("agent exec needs a command"));
        }
        let path = vm_path(node, vmid, "/agent/exec");
        let started: ExecStarted = self
            .call(Call::post(
                "/nodes/{node}/qemu/{vmid}/agent/exec",
                path.clone(),
                exec_form(command),
            ))
            .await?;
        started.pid.ok_or_else(|| PveError::Decode {
            ctx: self.ctx(&reqwest::Method::POST, &path),
            message: "the answer of agent/exec has no pid".to_owned(),
        })
    }

    /// `GET /nodes/{node}/qemu/{vmid}/agent/exec-status?pid=`: whether the
    /// process `pid` (from [`PveClient::agent_exec`]) ended, its exit code
    /// and output. Read a finished process once: QGA forgets it after
    /// reporting `exited: true`, and a later read fails with
    /// `Agent error: Invalid parameter 'pid'` (docs/proxmox-semantics.md §17).
    ///
    /// # Errors
    /// As [`PveClient::agent_exec`] (an unknown or already reported `pid` is
    /// [`PveError::AgentUnavailable`]); `Decode` when the answer is not an
    /// object.
    pub async fn agent_exec_status(
        &self,
        node: &NodeName,
        vmid: VmId,
        pid: u64,
    ) -> Result<ExecStatus, PveError> {
        let mut query = Form::new();
        query.push("pid", pid.to_string());
        self.call(
            Call::get(
                "/nodes/{node}/qemu/{vmid}/agent/exec-status",
                vm_path(node, vmid, "/agent/exec-status"),
            )
            .with_query(query),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_command_is_sent_as_repeated_keys() {
        let form = exec_form(&["cat", "/run/cluster-api/bootstrap-success.complete"]);
        assert_eq!(
            form.encode(),
            "command=cat&command=%2Frun%2Fcluster-api%2Fbootstrap-success.complete"
        );
        // Arguments with `;`, `=`, `&` and spaces stay one element each.
        let form = exec_form(&["sh", "-c", "a=1; echo $a && true"]);
        assert_eq!(
            form.encode(),
            "command=sh&command=-c&command=a%3D1%3B%20echo%20%24a%20%26%26%20true"
        );
    }

    #[test]
    fn decodes_exec_answers() {
        let started: ExecStarted = serde_json::from_str(r#"{"pid":"4242"}"#).unwrap();
        assert_eq!(started.pid, Some(4242));
        let running: ExecStatus = serde_json::from_str(r#"{"exited":0}"#).unwrap();
        assert_eq!(running, ExecStatus::default());
        assert!(!running.succeeded());
        let done: ExecStatus = serde_json::from_str(
            r#"{"exited":1,"exitcode":0,"out-data":"success","out-truncated":0}"#,
        )
        .unwrap();
        assert!(done.succeeded());
        assert_eq!(done.out_data.as_deref(), Some("success"));
        let failed: ExecStatus = serde_json::from_str(
            r#"{"exited":true,"exitcode":"1","err-data":"cat: /run/x: No such file or directory\n"}"#,
        )
        .unwrap();
        assert_eq!(failed.exitcode, Some(1));
        assert!(!failed.succeeded());
        assert_eq!(
            failed.err_data.as_deref(),
            Some("cat: /run/x: No such file or directory\n")
        );
        let killed: ExecStatus =
            serde_json::from_str(r#"{"exited":1,"signal":-9,"exitcode":null}"#).unwrap();
        assert_eq!((killed.signal, killed.exitcode), (Some(-9), None));
        assert!(!killed.succeeded());
    }

    #[test]
    fn decodes_interfaces_and_filters_addresses() {
        let json = r#"{"result":[
          {"name":"lo","hardware-address":"00:00:00:00:00:00","ip-addresses":[
            {"ip-address":"127.0.0.1","ip-address-type":"ipv4","prefix":8},
            {"ip-address":"::1","ip-address-type":"ipv6","prefix":128}]},
          {"name":"eth0","hardware-address":"bc:24:11:aa:bb:cc","ip-addresses":[
            {"ip-address":"10.0.0.21","ip-address-type":"ipv4","prefix":24},
            {"ip-address":"2001:db8:1::10","ip-address-type":"ipv6","prefix":64},
            {"ip-address":"fe80::be24:11ff:feaa:bbcc","ip-address-type":"ipv6","prefix":64}],
           "statistics":{"rx-bytes":1}}]}"#;
        let r: AgentResult<Vec<GuestInterface>> = serde_json::from_str(json).unwrap();
        let eth0 = &r.result[1];
        assert_eq!(
            eth0.mac(),
            Some(MacAddr::parse("BC:24:11:AA:BB:CC").unwrap())
        );
        let global: Vec<&str> = r
            .result
            .iter()
            .flat_map(|i| i.ip_addresses.iter())
            .filter(|a| a.is_global())
            .map(|a| a.ip_address.as_str())
            .collect();
        assert_eq!(global, vec!["10.0.0.21", "2001:db8:1::10"]);
    }
}
