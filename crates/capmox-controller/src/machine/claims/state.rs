//! What the claims say: each claim's state and the fact they add up to (pure).

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::plan::WantedClaim;
use crate::capi::ipam::{IPAddress, IPAddressClaim};
use crate::machine::decide::{ClaimedAddress, ClaimsFact};

/// A claim as observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimState {
    /// The claim object does not exist.
    Missing,
    /// It exists without an address.
    Waiting {
        /// The claim itself says its pool is exhausted (a condition with
        /// reason `PoolExhausted`, CAPI's `ipamv1.PoolExhaustedReason`, or
        /// the IPAM provider's message saying "exhausted"). Never inferred
        /// from how long the claim waited.
        exhausted: bool,
        /// For an exhausted pool the claim's own `reason: message`; else
        /// since when the claim has waited for an address (its creation,
        /// absolute, so the text is the same at every poll), plus what its
        /// conditions say.
        message: String,
    },
    /// It has its address.
    Bound(ClaimedAddress),
}

/// A wait for humans: `0.3s` under 10 s, `42s` under 2 min, `3m05s`, `1h02m`.
pub fn waited(d: Duration) -> String {
    let secs = d.as_secs();
    if d < Duration::from_secs(10) {
        format!("{:.1}s", d.as_secs_f64())
    } else if secs < 120 {
        format!("{secs}s")
    } else if secs < 3600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60)
    }
}

/// The state of one claim from the claim object, its `IPAddress` and the
/// time (pure: `now` injected). A claim without an address is exhausted
/// only when it says so; otherwise its message tells since when it has
/// waited (its creation), and once that is longer than `patience` (how
/// long an IPAM provider usually takes) it says so too — docs/field-cases.md B15
/// ("no address for long") is reported, not reinterpreted as a full pool.
pub fn claim_state(
    net: &str,
    claim: Option<&IPAddressClaim>,
    address: Option<&IPAddress>,
    now: Timestamp,
    patience: Duration,
) -> ClaimState {
    let Some(claim) = claim else {
        return ClaimState::Missing;
    };
    if let Some(a) = address
        && let Ok(ip) = a.spec.address.parse::<IpAddr>()
    {
        let prefix = a
            .spec
            .prefix
            .and_then(|p| u8::try_from(p).ok())
            .unwrap_or(if ip.is_ipv4() { 32 } else { 128 });
        return ClaimState::Bound(ClaimedAddress {
            net: net.to_string(),
            address: ip,
            prefix,
            gateway: a.spec.gateway.as_deref().and_then(|g| g.parse().ok()),
            metric: None,
        });
    }
    let conditions = claim
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or(&[]);
    let said = |c: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition| {
        if c.message.is_empty() {
            c.reason.clone()
        } else {
            format!("{}: {}", c.reason, c.message)
        }
    };
    if let Some(c) = conditions.iter().find(|c| {
        c.status != "True"
            && (c.reason == "PoolExhausted" || c.message.to_ascii_lowercase().contains("exhausted"))
    }) {
        return ClaimState::Waiting {
            exhausted: true,
            message: said(c),
        };
    }
    let created = claim.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let age = created
        .map(|t| now.duration_since(t))
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default();
    // The wait is told by its start, not its length: the message stays the
    // same from one poll to the next, so a waiting machine's status is not
    // written again on every poll (it changes once, past `patience`).
    let mut message = match created {
        Some(t) => format!("no address since {}", t.strftime("%Y-%m-%dT%H:%M:%SZ")),
        None => "no address yet".to_string(),
    };
    if let Some(c) = conditions
        .iter()
        .find(|c| c.status == "False" && !(c.reason.is_empty() && c.message.is_empty()))
    {
        message.push_str(&format!(" ({})", said(c)));
    }
    if age > patience {
        message.push_str(&format!(
            "; longer than the usual {}: is the IPAM provider running?",
            waited(patience)
        ));
    }
    ClaimState::Waiting {
        exhausted: false,
        message,
    }
}

/// Folds the states of all wanted claims into the decision fact.
pub fn fold(wanted: &[WantedClaim], states: &[ClaimState]) -> ClaimsFact {
    if wanted.is_empty() {
        return ClaimsFact::NotNeeded;
    }
    if states.contains(&ClaimState::Missing) {
        return ClaimsFact::Missing;
    }
    let mut bound = Vec::new();
    let mut pools = Vec::new();
    let mut exhausted = false;
    let mut messages = Vec::new();
    for (w, s) in wanted.iter().zip(states) {
        match s {
            ClaimState::Bound(a) => bound.push(ClaimedAddress {
                metric: w.metric,
                ..a.clone()
            }),
            ClaimState::Waiting {
                exhausted: e,
                message,
            } => {
                pools.push(format!("{} {}", w.pool.kind, w.pool.name));
                exhausted |= *e;
                if !message.is_empty() {
                    messages.push(format!("{}: {message}", w.name));
                }
            }
            ClaimState::Missing => {}
        }
    }
    if pools.is_empty() {
        ClaimsFact::Bound(bound)
    } else {
        ClaimsFact::Pending {
            pools: pools.join(", "),
            exhausted,
            message: messages.join("; "),
        }
    }
}
