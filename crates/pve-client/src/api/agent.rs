//! Guest agent: `POST …/agent/ping`, `GET …/agent/network-get-interfaces`.
//!
//! Every agent call first checks synchronously that the config has an `agent`
//! key, that the VM runs, and that the agent answers a ping within 3 s; each
//! failure is a 500 that the client reports as
//! [`PveError::AgentUnavailable`] — "retry later" while the VM boots
//! (SEMANTICS.md §17).

use std::net::IpAddr;

use serde::Deserialize;

use super::qemu::vm_path;
use crate::PveClient;
use crate::client::Call;
use crate::encode::Form;
use crate::error::PveError;
use crate::options::MacAddr;
use crate::types::lenient::{opt_string, opt_u32};
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
