//! [`Upid`]: the unique id of a Proxmox worker task.
//!
//! Format (docs/proxmox-semantics.md §5, pve-common `PVE::Tools::upid_encode`):
//! `UPID:<node>:<pid>:<pstart>:<starttime>:<type>:<id>:<user>:` — note the
//! trailing colon. `pid`, `pstart` and `starttime` are upper-case hex, at least
//! 8 digits (`pstart` grows to 9 after ~497 days of uptime). No field contains
//! `:`. The task runs on `node`, and its status can only be read there.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::ParseError;
use crate::types::{NodeName, VmId};

/// A parsed UPID. Keeps the exact string it was parsed from (the server looks
/// tasks up by that string), and its decoded fields. Cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Upid(Arc<Fields>);

#[derive(PartialEq, Eq, Hash)]
struct Fields {
    raw: String,
    node: NodeName,
    pid: u32,
    pstart: u64,
    starttime: u64,
    worker_type: String,
    id: String,
    user: String,
}

impl Upid {
    /// Builds a UPID from its fields in Proxmox's canonical encoding
    /// (`%08X` for pid, pstart and starttime).
    ///
    /// # Errors
    /// [`ParseError`] if `worker_type` is empty or any text field contains `:`,
    /// or `user` lacks `@`.
    pub fn new(
        node: NodeName,
        pid: u32,
        pstart: u64,
        starttime: u64,
        worker_type: &str,
        id: &str,
        user: &str,
    ) -> Result<Self, ParseError> {
        let raw = format!(
            "UPID:{node}:{pid:08X}:{pstart:08X}:{starttime:08X}:{worker_type}:{id}:{user}:"
        );
        check_text_fields(&raw, worker_type, id, user)?;
        Ok(Self(Arc::new(Fields {
            raw,
            node,
            pid,
            pstart,
            starttime,
            worker_type: worker_type.to_owned(),
            id: id.to_owned(),
            user: user.to_owned(),
        })))
    }

    /// Parses a UPID string (upper- or lower-case hex accepted).
    ///
    /// # Errors
    /// [`ParseError`] naming the field that is wrong.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let err = |reason: &str| ParseError::new("UPID", s, reason);
        let rest = s
            .strip_prefix("UPID:")
            .ok_or_else(|| err("must start with 'UPID:'"))?;
        let rest = rest
            .strip_suffix(':')
            .ok_or_else(|| err("must end with ':'"))?;
        let parts: Vec<&str> = rest.split(':').collect();
        let [node, pid, pstart, starttime, worker_type, id, user] = parts.as_slice() else {
            return Err(err("expected 8 ':'-separated fields after 'UPID'"));
        };
        let node = NodeName::new(*node).map_err(|e| err(&format!("node: {}", e.reason)))?;
        let pid = hex_field(pid, "pid").map_err(|r| err(&r))?;
        let pid = u32::try_from(pid).map_err(|_| err("pid: out of range"))?;
        let pstart = hex_field(pstart, "pstart").map_err(|r| err(&r))?;
        let starttime = hex_field(starttime, "starttime").map_err(|r| err(&r))?;
        check_text_fields(s, worker_type, id, user)?;
        Ok(Self(Arc::new(Fields {
            raw: s.to_owned(),
            node,
            pid,
            pstart,
            starttime,
            worker_type: (*worker_type).to_owned(),
            id: (*id).to_owned(),
            user: (*user).to_owned(),
        })))
    }

    /// The exact UPID string (use it in task URLs, percent-encoded).
    pub fn as_str(&self) -> &str {
        &self.0.raw
    }

    /// The node the task runs on; its status lives only there.
    pub fn node(&self) -> &NodeName {
        &self.0.node
    }

    /// Process id of the worker.
    pub fn pid(&self) -> u32 {
        self.0.pid
    }

    /// Process start time of the worker, in clock ticks since node boot.
    pub fn pstart(&self) -> u64 {
        self.0.pstart
    }

    /// Task start time, seconds since the Unix epoch.
    pub fn starttime(&self) -> u64 {
        self.0.starttime
    }

    /// Worker type, e.g. `qmclone`, `qmstart`, `qmconfig`, `imgcopy`.
    pub fn worker_type(&self) -> &str {
        &self.0.worker_type
    }

    /// Task id field: usually the VMID acted on (for `qmclone` the *source*
    /// VMID), may be empty.
    pub fn id(&self) -> &str {
        &self.0.id
    }

    /// The id field as a VMID, if it is one.
    pub fn vmid(&self) -> Option<VmId> {
        self.0.id.parse().ok()
    }

    /// The task owner: `user@realm` or `user@realm!tokenid` for token tasks.
    pub fn user(&self) -> &str {
        &self.0.user
    }
}

fn hex_field(s: &str, name: &str) -> Result<u64, String> {
    if s.len() < 8 || s.len() > 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{name}: expected 8 to 16 hex digits, got {s:?}"));
    }
    u64::from_str_radix(s, 16).map_err(|_| format!("{name}: not hex"))
}

fn check_text_fields(raw: &str, worker_type: &str, id: &str, user: &str) -> Result<(), ParseError> {
    let err = |reason: &str| ParseError::new("UPID", raw, reason);
    if worker_type.is_empty() {
        return Err(err("worker type is empty"));
    }
    for (name, v) in [("type", worker_type), ("id", id), ("user", user)] {
        if v.contains(':') || v.chars().any(char::is_whitespace) {
            return Err(err(&format!("{name} must not contain ':' or whitespace")));
        }
    }
    if !user.contains('@') {
        return Err(err("user must be 'user@realm' or 'user@realm!token'"));
    }
    Ok(())
}

impl fmt::Debug for Upid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Upid({:?})", self.0.raw)
    }
}

impl fmt::Display for Upid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.raw)
    }
}

impl FromStr for Upid {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for Upid {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.raw)
    }
}

impl<'de> Deserialize<'de> for Upid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CLONE: &str = "UPID:pve-a1:000A1B2C:0132F4E5:6754A3B2:qmclone:9000:capmox@pve!capi:";

    #[test]
    fn parses_a_real_clone_upid() {
        let u = Upid::parse(CLONE).unwrap();
        assert_eq!(u.node().as_str(), "pve-a1");
        assert_eq!(u.pid(), 0x000A_1B2C);
        assert_eq!(u.pstart(), 0x0132_F4E5);
        assert_eq!(u.starttime(), 0x6754_A3B2);
        assert_eq!(u.worker_type(), "qmclone");
        assert_eq!(u.id(), "9000");
        assert_eq!(u.vmid().map(VmId::get), Some(9000));
        assert_eq!(u.user(), "capmox@pve!capi");
        assert_eq!(u.to_string(), CLONE);
        assert_eq!(u.as_str(), CLONE);
    }

    #[test]
    fn nine_digit_pstart_and_empty_id() {
        let s = "UPID:n1:00001234:1A2B3C4D5:6754A3B2:imgcopy::root@pam:";
        let u = Upid::parse(s).unwrap();
        assert_eq!(u.pstart(), 0x1_A2B3_C4D5);
        assert_eq!(u.id(), "");
        assert_eq!(u.vmid(), None);
    }

    #[test]
    fn builds_the_canonical_string() {
        let u = Upid::new(
            NodeName::new("pve-b2").unwrap(),
            0x1f,
            0xabc,
            0x6754_a3b2,
            "qmstart",
            "105",
            "root@pam",
        )
        .unwrap();
        assert_eq!(
            u.as_str(),
            "UPID:pve-b2:0000001F:00000ABC:6754A3B2:qmstart:105:root@pam:"
        );
    }

    #[test]
    fn refuses_malformed_upids() {
        for bad in [
            "",
            "UPID:pve-a1:000A1B2C:0132F4E5:6754A3B2:qmclone:9000:root@pam",
            "XPID:pve-a1:000A1B2C:0132F4E5:6754A3B2:qmclone:9000:root@pam:",
            "UPID:pve-a1:A1B2C:0132F4E5:6754A3B2:qmclone:9000:root@pam:",
            "UPID:pve-a1:000A1B2C:0132F4E5:6754A3B2::9000:root@pam:",
            "UPID:pve_a1:000A1B2C:0132F4E5:6754A3B2:qmclone:9000:root@pam:",
            "UPID:pve-a1:000A1B2C:0132F4E5:6754A3B2:qmclone:9000:root:",
            "UPID:pve-a1:000A1B2C:0132F4E5:6754A3B2:qmclone:9000:root@pam:extra:",
            "UPID:pve-a1:0000ZZZZ:0132F4E5:6754A3B2:qmclone:9000:root@pam:",
        ] {
            assert!(Upid::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn deserialises_from_json_string() {
        let u: Upid = serde_json::from_str(&format!("\"{CLONE}\"")).unwrap();
        assert_eq!(u.worker_type(), "qmclone");
    }

    proptest! {
        #![proptest_config(crate::test_support::proptest_config())]
        #[test]
        fn format_then_parse_round_trips(
            node in "[a-z][a-z0-9-]{0,10}[a-z0-9]",
            pid in any::<u32>(),
            pstart in 0u64..0xF_FFFF_FFFF,
            starttime in 0u64..0xFFFF_FFFF,
            wtype in "(qmclone|qmstart|qmstop|qmconfig|qmdestroy|imgcopy|resize)",
            id in "([1-9][0-9]{2,8})?",
            user in "[a-z]{1,8}@(pam|pve)(![a-z][a-z0-9]{1,6})?",
        ) {
            let node = NodeName::new(node).unwrap();
            let u = Upid::new(node.clone(), pid, pstart, starttime, &wtype, &id, &user).unwrap();
            let p = Upid::parse(u.as_str()).unwrap();
            prop_assert_eq!(&p, &u);
            prop_assert_eq!(p.node(), &node);
            prop_assert_eq!(p.pid(), pid);
            prop_assert_eq!(p.pstart(), pstart);
            prop_assert_eq!(p.starttime(), starttime);
            prop_assert_eq!(p.worker_type(), wtype.as_str());
            prop_assert_eq!(p.id(), id.as_str());
            prop_assert_eq!(p.user(), user.as_str());
        }
    }
}
