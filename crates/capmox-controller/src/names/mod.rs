//! Every identifier the provider derives from Kubernetes names or user input,
//! and the limit of the system that receives it.
//!
//! | function | value | receiving rule |
//! |---|---|---|
//! | [`claim_name`], [`ref_claim_name`] | `IPAddressClaim` name | Kubernetes object name: DNS-1123 subdomain, ≤ 253 |
//! | [`pool_name`] | `InClusterIPPool` name | Kubernetes object name: DNS-1123 subdomain, ≤ 253 |
//! | [`capmox_pool_name`] | the Go provider's (CAPMOX's) cluster-wide `InClusterIPPool`, looked up to adopt it | the name of an existing object, not derived for a new one |
//! | [`endpoint_claim_name`], [`endpoint_pool_name`] | the control-plane endpoint's `IPAddressClaim` and `InClusterIPPool` | Kubernetes object name: DNS-1123 subdomain, ≤ 253 |
//! | [`event_name`] | `events.k8s.io/v1` Event name | Kubernetes object name: DNS-1123 subdomain, ≤ 253 |
//! | [`label_value`] | a label value (machine name, ProxmoxCluster name) | Kubernetes label value: ≤ 63, `[A-Za-z0-9_.-]`, alphanumeric ends |
//! | [`vm_name`] | the VM's `name` (`POST /nodes/{node}/qemu/{vmid}/clone`) | Proxmox `dns-name` format |
//! | [`hostname`] | cloud-init `local-hostname` | RFC 1123 host name: labels of 1–63 `[a-z0-9-]`, no `-` at either end, ≤ 253 |
//! | [`owner_tag`] | the ownership tag `capmox-<uid>` | Proxmox `pve-tag` |
//! | [`iso_file_name`] | the bootstrap ISO (`POST /nodes/{node}/storage/{storage}/upload`) | upload `filename`: ≤ 255, `[A-Za-z0-9_.-]`, `.iso` |
//!
//! A value within its limit is used unchanged, so objects made before this
//! module existed keep their names. A longer one is cut deterministically and
//! ends in `-` and 12 hex digits of a hash of the whole input ([`shorten`]),
//! so two inputs give two values unless their 48-bit hashes collide. The
//! property tests beside this module generate valid Kubernetes names up to
//! 253 characters and check every value against kube-sim's and pve-sim's own
//! validators and an RFC 1123 check.
//!
//! Uniqueness holds per kind of value and within what one object derives:
//! claim names of different (machine, device, family) or (machine, device,
//! index) differ; pool names differ, also between ProxmoxClusters (an
//! instance's pool carries a hash, [`pool_name`]).

use pve_client::options::Tag;

use crate::instances::IpFamily;

/// Longest Kubernetes object name (DNS-1123 subdomain).
pub const OBJECT_NAME_MAX: usize = 253;
/// Longest Kubernetes label value.
pub const LABEL_VALUE_MAX: usize = 63;
/// Longest label of an RFC 1123 host name.
pub const HOST_LABEL_MAX: usize = 63;
/// Longest host name (RFC 1123 with the DNS limit of RFC 1035).
pub const HOSTNAME_MAX: usize = 253;
/// Longest file name an upload accepts (`filename` of
/// `POST /nodes/{node}/storage/{storage}/upload`).
pub const UPLOAD_FILE_NAME_MAX: usize = 255;
/// What the endpoint claim's and pool's names end in.
const ENDPOINT_SUFFIX: &str = "control-plane-endpoint";
/// Hex digits of the hash suffix.
const HASH_DIGITS: usize = 12;
/// Longest Kubernetes UID kept as is in an ISO file name (a UUID has 36).
const UID_MAX: usize = 64;
/// What an event's name appends to the object's name: `.` and the event
/// time in hex nanoseconds (16 digits until the year 2554).
const EVENT_SUFFIX: usize = 17;

/// FNV-1a, 64 bits: stable across builds and platforms.
fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The hash of `s` in hex, at least 12 digits.
fn hash_suffix(s: &str) -> String {
    format!("{:012x}", fnv1a(s))
}

/// The first at most `max` bytes of `s` at a character boundary, without
/// trailing characters that are not ASCII alphanumerics.
fn head(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
}

/// The `head` of `shown` that leaves room for `-` and 12 hash digits, then
/// `-` and the hash of `whole` (the hash alone when nothing of `shown` can
/// stay), cut to `max` characters: at least 12 hash digits remain.
fn cut_with_hash(shown: &str, whole: &str, max: usize) -> String {
    let h = hash_suffix(whole);
    let out = match head(shown, max - HASH_DIGITS - 1) {
        "" => h,
        kept => format!("{kept}-{h}"),
    };
    out.chars().take(max).collect()
}

/// `s` when it is at most `max` bytes; else its first `max − 13` bytes
/// (without trailing non-alphanumerics), `-`, and the hex digits of a 64-bit
/// hash of all of `s`, cut to `max` (at least 12 digits stay). Deterministic;
/// a name that only uses subdomain characters stays a subdomain. This is the
/// rule claim names have always been cut by. `max` must be above 13.
pub fn shorten(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    cut_with_hash(s, s, max)
}

/// Name of the `IPAddressClaim` of `machine`'s device `net` from its
/// instance's pool of `family`: `<machine>-<net>-<family>`
/// (`wl1-md-0-abcde-net0-ipv4`), shortened to 253.
pub fn claim_name(machine: &str, net: &str, family: IpFamily) -> String {
    shorten(
        &format!("{machine}-{net}-{}", family.as_str()),
        OBJECT_NAME_MAX,
    )
}

/// Name of the `IPAddressClaim` for the `i`-th `ipPoolRef` of `machine`'s
/// device `net`: `<machine>-<net>-<i>`, shortened to 253.
pub fn ref_claim_name(machine: &str, net: &str, i: usize) -> String {
    shorten(&format!("{machine}-{net}-{i}"), OBJECT_NAME_MAX)
}

/// Name of the `InClusterIPPool` of `family` of the ProxmoxCluster
/// `cluster`: `<cluster>-<family>` for the cluster-wide pool (shortened to
/// 253), `<cluster>-<instance>-<family>-<hash>` for an instance's own pool
/// (the hash of cluster, instance and family; the readable part shortened
/// so the whole fits 253). The hash keeps the pools of two ProxmoxClusters
/// apart: `wl1` with instance `dc-a` and a cluster `wl1-dc-a` both read
/// `wl1-dc-a-ipv4`, and only the cluster-wide one ends in the family.
/// Pools made before the hash keep their recorded names
/// (`cluster/pools.rs`).
pub fn pool_name(cluster: &str, instance: Option<&str>, family: IpFamily) -> String {
    match instance {
        None => shorten(&format!("{cluster}-{}", family.as_str()), OBJECT_NAME_MAX),
        Some(i) => {
            let shown = format!("{cluster}-{i}-{}", family.as_str());
            let whole = format!("{cluster}/{i}/{}", family.as_str());
            let kept = shorten(&shown, OBJECT_NAME_MAX - HASH_DIGITS - 1);
            format!("{kept}-{}", hash_suffix(&whole))
                .chars()
                .take(OBJECT_NAME_MAX)
                .collect()
        }
    }
}

/// Name of the `InClusterIPPool` the Go provider (CAPMOX v0.9) made from
/// the cluster-level config of `family` of the ProxmoxCluster `cluster`:
/// `<cluster>-v4-icip` / `<cluster>-v6-icip` (its `InClusterPoolFormat`;
/// docs/migrating-from-capmox.md, "What CAPMOX writes"). Not shortened: it
/// names an object CAPMOX made, which this provider adopts
/// (`cluster/pools.rs`), never one it creates.
pub fn capmox_pool_name(cluster: &str, family: IpFamily) -> String {
    let f = match family {
        IpFamily::V4 => "v4",
        IpFamily::V6 => "v6",
    };
    format!("{cluster}-{f}-icip")
}

/// Name of the `IPAddressClaim` of the control-plane endpoint of the
/// ProxmoxCluster `cluster`: `<cluster>-control-plane-endpoint`, shortened
/// to 253. No node-address claim or pool name ends this way (they end in
/// `-ipv4`, `-ipv6`, a device index or a hash), so it is unique in the
/// namespace.
pub fn endpoint_claim_name(cluster: &str) -> String {
    shorten(&format!("{cluster}-{ENDPOINT_SUFFIX}"), OBJECT_NAME_MAX)
}

/// Name of the `InClusterIPPool` the provider creates for
/// `spec.controlPlaneEndpointPool.addresses` of the ProxmoxCluster
/// `cluster`: the same as its claim's ([`endpoint_claim_name`]; a pool and a
/// claim are different kinds).
pub fn endpoint_pool_name(cluster: &str) -> String {
    endpoint_claim_name(cluster)
}

/// Whether an event about the object `object_name` can be named
/// `<name>.<hex nanoseconds>` as it is (the whole must stay a 253-character
/// object name); [`event_name`] shortens the name otherwise.
pub fn plain_event_name_fits(object_name: &str) -> bool {
    object_name.len() + EVENT_SUFFIX <= OBJECT_NAME_MAX
}

/// Name of an event about `object_name` at `nanos` (nanoseconds since the
/// epoch): kube-runtime's `<name>.<hex nanos>` when it fits 253, else the
/// object name shortened so that it does. Distinct times give distinct names.
pub fn event_name(object_name: &str, nanos: u64) -> String {
    let suffix = format!(".{nanos:x}");
    format!(
        "{}{suffix}",
        shorten(object_name, OBJECT_NAME_MAX - suffix.len())
    )
}

fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() <= LABEL_VALUE_MAX
        && (b.is_empty()
            || (b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))))
}

/// A label value standing for `s` (e.g. a machine or ProxmoxCluster name,
/// which may have 253 characters): `s` itself when it is a valid label value,
/// else its characters outside `[A-Za-z0-9_.-]` replaced by `-`, cut, and a
/// hash of `s` appended, at most 63 characters. Use the same function for
/// the label and for the selector that finds it.
pub fn label_value(s: &str) -> String {
    if is_label_value(s) {
        return s.to_string();
    }
    let cleaned: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let cleaned = cleaned.trim_start_matches(|c: char| !c.is_ascii_alphanumeric());
    cut_with_hash(cleaned, s, LABEL_VALUE_MAX)
}

fn is_host_label(l: &str) -> bool {
    let b = l.as_bytes();
    !b.is_empty()
        && b.len() <= HOST_LABEL_MAX
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
}

/// The machine's host name (cloud-init `local-hostname`, and so the Linux
/// host name and by default the Node name): the machine name when it is an
/// RFC 1123 host name (every dot-separated label 1–63 characters of
/// `[a-z0-9-]`, not starting or ending with `-`, at most 253 in total) —
/// every Kubernetes name whose labels are at most 63 characters. Otherwise
/// one label: the name lower-cased with every other character (dots too)
/// replaced by `-`, cut, and a hash of the name appended (at most 63).
///
/// cloud-init treats a dotted `local-hostname` as a fully qualified name and
/// sets the short host name to its first label.
pub fn hostname(machine: &str) -> String {
    let lower = machine.to_ascii_lowercase();
    if lower.len() <= HOSTNAME_MAX && lower.split('.').all(is_host_label) {
        return lower;
    }
    let cleaned: String = lower
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let cleaned = cleaned.trim_start_matches('-');
    cut_with_hash(cleaned, machine, HOST_LABEL_MAX)
}

/// The VM's `name` (Proxmox `dns-name`: dot-separated labels of
/// `[A-Za-z0-9-]` with alphanumeric ends, no length limit): the machine name,
/// which every Kubernetes object name satisfies; anything else becomes its
/// [`hostname`].
pub fn vm_name(machine: &str) -> String {
    let dns_label = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
    };
    if machine.split('.').all(dns_label) {
        machine.to_string()
    } else {
        hostname(machine)
    }
}

/// The ownership tag of the machine with Kubernetes UID `uid`:
/// `capmox-<uid>` lower-cased in Proxmox tag syntax (a UID is hex digits and
/// `-`, so it is kept as is; see `machine::marker`).
pub fn owner_tag(uid: &str) -> Tag {
    Tag::sanitize(&format!("capmox-{}", uid.to_ascii_lowercase()))
}

/// The bootstrap ISO's file name: `capmox-<vmid>-<uid>.iso`, unique per
/// (VMID, machine UID) so that cleanup never deletes another VM's ISO. A UID
/// that is not lower-case hex digits, letters and `-` of at most 64
/// characters (Kubernetes UIDs are UUIDs) is replaced by its hash.
pub fn iso_file_name(vmid: u32, uid: &str) -> String {
    let lower = uid.to_ascii_lowercase();
    let plain = !lower.is_empty()
        && lower.len() <= UID_MAX
        && lower
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let id = if plain { lower } else { hash_suffix(uid) };
    format!("capmox-{vmid}-{id}.iso")
}

#[cfg(test)]
mod tests;
