//! A validated address pool: parse and validate a [`PoolSpec`], then ask
//! which addresses it may hand out and which one is the lowest free.
//!
//! Allocation rules are those of the in-cluster IPAM provider
//! (`cluster-api-ipam-provider-in-cluster`, `internal/poolutil/pool.go`
//! `PoolSpecToIPSet` and `FindFreeAddress`): the allocatable set is
//! `addresses` − `excludedAddresses` − the reserved addresses (unless
//! `allocateReservedIPAddresses`) − the gateway, and allocation takes the
//! lowest address of that set that is not in use. The subnet is the pool's
//! lowest address with `prefix` applied. Reserved addresses are the
//! subnet's first and last address for IPv4 (network and broadcast; also
//! for /31 and /32, as that provider does) and the first address for IPv6
//! (subnet-router anycast, RFC 4291 section 2.6.1).
//!
//! Invariants of a [`Pool`]: one family throughout; every entry and the
//! gateway lie inside the subnet; the allocatable set is sorted, disjoint
//! and computed once at parse time, with `u128` arithmetic only (an IPv6 /64
//! is one range, never 2^64 addresses).

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::entry::PoolEntry;
use crate::error::IpamError;
use crate::family::Family;
use crate::parse::parse_address;
use crate::range::{self, AddrRange};
use crate::spec::PoolSpec;

/// A validated pool with a name (used in error messages, e.g. `dc-a-v4`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    name: String,
    family: Family,
    prefix: u8,
    subnet: IpNet,
    gateway: Option<IpAddr>,
    addresses: Vec<PoolEntry>,
    excluded: Vec<PoolEntry>,
    allocate_reserved: bool,
    allocatable: Vec<AddrRange>,
}

/// Address counts of a pool against a set of addresses in use; the numbers
/// of the in-cluster IPAM provider's `status.ipAddresses`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolUsage {
    /// Allocatable addresses ([`Pool::size`]).
    pub total: u128,
    /// Addresses in use that are allocatable addresses of the pool.
    pub used: u128,
    /// `total - used`: addresses that can still be allocated.
    pub free: u128,
    /// Addresses in use that are not allocatable addresses of the pool (left
    /// over after the pool shrank, or of the other family). Unlike the Go
    /// provider, these are not counted in `used` and do not reduce `free`.
    pub out_of_range: u128,
}

impl Pool {
    /// Validates `spec` and builds the pool named `name`. The family is that
    /// of the first `addresses` entry that names one, even if malformed (its
    /// address part holds a `:` for IPv6, or dotted digits for IPv4), else
    /// the gateway's; entries of the other family are errors.
    ///
    /// # Errors
    /// Every problem found, field paths relative to the spec, in this order:
    /// the syntax and family of each `addresses` entry, `prefix`, `gateway`,
    /// each `excludedAddresses` entry, then subnet membership of the
    /// `addresses` entries and the gateway:
    /// [`IpamError::EmptyPool`], [`IpamError::InvalidEntry`],
    /// [`IpamError::ReversedRange`], [`IpamError::HostBitsSet`],
    /// [`IpamError::FamilyMismatch`], [`IpamError::PrefixOutOfRange`],
    /// [`IpamError::EntryOutsideSubnet`], [`IpamError::GatewayOutsideSubnet`].
    pub fn parse(name: &str, spec: &PoolSpec) -> Result<Pool, Vec<IpamError>> {
        build(name, spec, None)
    }

    /// Like [`Pool::parse`], for a field that fixes the family (`ipv4Config`
    /// takes an IPv4 pool, `ipv6Config` an IPv6 one; docs/field-cases.md B14): every
    /// entry of the other family is a [`IpamError::FamilyMismatch`].
    ///
    /// # Errors
    /// As [`Pool::parse`].
    pub fn parse_as(name: &str, spec: &PoolSpec, family: Family) -> Result<Pool, Vec<IpamError>> {
        build(name, spec, Some(family))
    }

    /// The pool's name as given to [`Pool::parse`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The family of every address of the pool.
    pub fn family(&self) -> Family {
        self.family
    }

    /// The prefix length in bits, e.g. 24 (for `ip=10.0.0.21/24` in cloud-init / `ipconfigN`).
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// The subnet: the pool's lowest address with [`Pool::prefix`] applied, host bits clear.
    pub fn subnet(&self) -> IpNet {
        self.subnet
    }

    /// The gateway (never allocated), if the pool has one.
    pub fn gateway(&self) -> Option<IpAddr> {
        self.gateway
    }

    /// The `addresses` entries in the order given, normalised (see [`PoolEntry`]'s `Display`).
    pub fn addresses(&self) -> &[PoolEntry] {
        &self.addresses
    }

    /// The `excludedAddresses` entries in the order given, normalised.
    pub fn excluded_addresses(&self) -> &[PoolEntry] {
        &self.excluded
    }

    /// Whether reserved addresses (IPv4 network and broadcast, IPv6
    /// subnet-router anycast) may be allocated.
    pub fn allocates_reserved(&self) -> bool {
        self.allocate_reserved
    }

    /// The allocatable addresses as sorted, disjoint, non-adjacent inclusive ranges.
    pub fn ranges(&self) -> &[AddrRange] {
        &self.allocatable
    }

    /// The number of allocatable addresses, saturating at `u128::MAX`
    /// (only the whole IPv6 space with reserved addresses allowed and no
    /// gateway has more).
    pub fn size(&self) -> u128 {
        range::set_size(&self.allocatable)
    }

    /// Whether the pool may allocate `addr`: inside an entry, not excluded,
    /// not reserved, not the gateway. Use it to keep an address such as the
    /// control plane endpoint out of the node pools.
    pub fn contains(&self, addr: IpAddr) -> bool {
        Family::of(addr) == self.family
            && range::set_contains(&self.allocatable, range::to_bits(addr))
    }

    /// The allocatable addresses in ascending order, produced lazily (an
    /// IPv6 /64 is never materialised; take what you need).
    pub fn iter(&self) -> Addresses<'_> {
        Addresses {
            family: self.family,
            ranges: self.allocatable.iter(),
            current: None,
        }
    }

    /// The lowest allocatable address not in `in_use`. Addresses in `in_use`
    /// outside the pool (or of the other family) are ignored. Deterministic;
    /// the cost grows with the number of in-use addresses, not the pool size.
    ///
    /// # Errors
    /// [`IpamError::Exhausted`] naming the pool and its size when every
    /// allocatable address is in use.
    pub fn first_free(&self, in_use: &BTreeSet<IpAddr>) -> Result<IpAddr, IpamError> {
        for r in &self.allocatable {
            let mut candidate = r.start_bits();
            let mut found = true;
            // In-use addresses of this range, ascending: each one either lies
            // above the candidate (which is then free) or is the candidate.
            for used in in_use.range(r.start()..=r.end()) {
                let used = range::to_bits(*used);
                if used > candidate {
                    break;
                }
                if used == r.end_bits() {
                    found = false;
                    break;
                }
                candidate = used + 1;
            }
            if found {
                return Ok(range::from_bits(self.family, candidate));
            }
        }
        Err(IpamError::Exhausted {
            pool: self.name.clone(),
            size: self.size(),
        })
    }

    /// Counts of allocatable, used, free and out-of-range addresses against `in_use`.
    pub fn usage(&self, in_use: &BTreeSet<IpAddr>) -> PoolUsage {
        let total = self.size();
        let used = in_use.iter().filter(|a| self.contains(**a)).count();
        let used = u128::try_from(used).unwrap_or(u128::MAX);
        let out_of_range = u128::try_from(in_use.len())
            .unwrap_or(u128::MAX)
            .saturating_sub(used);
        PoolUsage {
            total,
            used,
            free: total.saturating_sub(used),
            out_of_range,
        }
    }

    /// Why the pool never allocates `addr`, or `None` when it may. The
    /// reason completes the sentence "it ...": `is the gateway`,
    /// `is excluded`, `is the network address`, `is the broadcast address`,
    /// `is the subnet-router anycast address`, `is outside the pool's
    /// addresses`, `is of the other address family`.
    pub fn why_not_allocatable(&self, addr: IpAddr) -> Option<&'static str> {
        if Family::of(addr) != self.family {
            return Some("is of the other address family");
        }
        if self.contains(addr) {
            return None;
        }
        if !self.addresses.iter().any(|e| e.span().contains(addr)) {
            return Some("is outside the pool's addresses");
        }
        if self.gateway == Some(addr) {
            return Some("is the gateway");
        }
        if self.excluded.iter().any(|e| e.span().contains(addr)) {
            return Some("is excluded");
        }
        match self.family {
            Family::V4 if addr == self.subnet.network() => Some("is the network address"),
            Family::V4 => Some("is the broadcast address"),
            Family::V6 => Some("is the subnet-router anycast address"),
        }
    }

    /// The pool as a spec again, every entry normalised (IPv6 compressed
    /// lower-case), e.g. to create an `InClusterIPPool` from `ipv4Config`.
    pub fn to_spec(&self) -> PoolSpec {
        PoolSpec {
            addresses: self.addresses.iter().map(ToString::to_string).collect(),
            prefix: i64::from(self.prefix),
            gateway: self.gateway.map(|g| g.to_string()),
            excluded_addresses: self.excluded.iter().map(ToString::to_string).collect(),
            allocate_reserved_ip_addresses: self.allocate_reserved,
        }
    }
}

impl<'a> IntoIterator for &'a Pool {
    type Item = IpAddr;
    type IntoIter = Addresses<'a>;

    fn into_iter(self) -> Addresses<'a> {
        self.iter()
    }
}

/// The allocatable addresses of a [`Pool`] in ascending order ([`Pool::iter`]).
#[derive(Clone, Debug)]
pub struct Addresses<'a> {
    family: Family,
    ranges: std::slice::Iter<'a, AddrRange>,
    /// The next address to yield and the end of its range.
    current: Option<(u128, u128)>,
}

impl Iterator for Addresses<'_> {
    type Item = IpAddr;

    fn next(&mut self) -> Option<IpAddr> {
        loop {
            if let Some((next, end)) = self.current {
                self.current = (next < end).then(|| (next + 1, end));
                return Some(range::from_bits(self.family, next));
            }
            let r = self.ranges.next()?;
            self.current = Some((r.start_bits(), r.end_bits()));
        }
    }
}

/// An entry that parsed, with its field path and text as written.
struct Parsed<'s> {
    field: String,
    text: &'s str,
    entry: PoolEntry,
}

/// Parses a list field (`addresses`, `excludedAddresses`), reporting the
/// entries that do not parse.
fn parse_list<'s>(name: &str, texts: &'s [String], errors: &mut Vec<IpamError>) -> Vec<Parsed<'s>> {
    let mut out = Vec::with_capacity(texts.len());
    for (i, text) in texts.iter().enumerate() {
        let field = format!("{name}[{i}]");
        match PoolEntry::parse(&field, text) {
            Ok(entry) => out.push(Parsed { field, text, entry }),
            Err(e) => errors.push(e),
        }
    }
    out
}

/// Keeps the entries of `family`, reporting every other one as a family mismatch.
fn keep_family<'s>(
    list: Vec<Parsed<'s>>,
    family: Option<Family>,
    errors: &mut Vec<IpamError>,
) -> Vec<Parsed<'s>> {
    let Some(family) = family else {
        return list;
    };
    list.into_iter()
        .filter(|p| {
            let found = p.entry.family();
            if found != family {
                errors.push(IpamError::FamilyMismatch {
                    field: p.field.clone(),
                    entry: p.text.to_owned(),
                    found,
                    expected: family,
                });
            }
            found == family
        })
        .collect()
}

/// The family an entry's text is meant to have, even when it does not parse:
/// its first address part (before any `-` or `/`) contains `:` for IPv6, or
/// only digits and dots for IPv4.
fn intended_family(text: &str) -> Option<Family> {
    let first = text.split(['-', '/']).next().unwrap_or_default();
    if first.contains(':') {
        Some(Family::V6)
    } else if first.contains('.') && first.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        Some(Family::V4)
    } else {
        None
    }
}

fn build(name: &str, spec: &PoolSpec, expected: Option<Family>) -> Result<Pool, Vec<IpamError>> {
    let mut errors = Vec::new();

    // addresses; the pool's family is the caller's, else that of the first
    // entry that names one (even if it is malformed), else the gateway's.
    if spec.addresses.is_empty() {
        errors.push(IpamError::EmptyPool {
            field: "addresses".to_owned(),
        });
    }
    let entries = parse_list("addresses", &spec.addresses, &mut errors);
    let gateway_text = spec.gateway.as_deref().filter(|g| !g.is_empty());
    let family = expected
        .or_else(|| spec.addresses.iter().find_map(|t| intended_family(t)))
        .or_else(|| gateway_text.and_then(intended_family));
    let entries = keep_family(entries, family, &mut errors);

    // prefix
    let max = family.map_or(Family::V6.max_prefix(), Family::max_prefix);
    let prefix = match u8::try_from(spec.prefix) {
        Ok(p) if p <= max => Some(p),
        _ => {
            errors.push(IpamError::PrefixOutOfRange {
                field: "prefix".to_owned(),
                prefix: spec.prefix,
                family,
            });
            None
        }
    };

    // gateway
    let gateway = match gateway_text {
        None => None,
        Some(text) => match parse_address("gateway", text) {
            Err(e) => {
                errors.push(e);
                None
            }
            Ok(gw) => match family {
                Some(f) if Family::of(gw) != f => {
                    errors.push(IpamError::FamilyMismatch {
                        field: "gateway".to_owned(),
                        entry: text.to_owned(),
                        found: Family::of(gw),
                        expected: f,
                    });
                    None
                }
                _ => Some(gw),
            },
        },
    };

    // excludedAddresses
    let excluded = parse_list("excludedAddresses", &spec.excluded_addresses, &mut errors);
    let excluded = keep_family(excluded, family, &mut errors);

    // subnet: the lowest address of the pool with the prefix applied.
    let lowest = entries
        .iter()
        .map(|p| p.entry.span())
        .min_by_key(AddrRange::start_bits);
    let subnet = match (lowest, prefix) {
        (Some(lowest), Some(prefix)) => IpNet::new(lowest.start(), prefix).ok().map(|n| n.trunc()),
        _ => None,
    };
    if let Some(subnet) = subnet {
        for p in &entries {
            let span = p.entry.span();
            if !(subnet.contains(&span.start()) && subnet.contains(&span.end())) {
                errors.push(IpamError::EntryOutsideSubnet {
                    field: p.field.clone(),
                    entry: p.text.to_owned(),
                    subnet,
                });
            }
        }
        if let Some(gw) = gateway
            && !subnet.contains(&gw)
        {
            errors.push(IpamError::GatewayOutsideSubnet {
                field: "gateway".to_owned(),
                gateway: gw,
                subnet,
            });
        }
    }

    // Without errors the family, prefix and subnet are known: a pool with no
    // entry of its family has an EmptyPool, InvalidEntry or FamilyMismatch error.
    let (Some(family), Some(prefix), Some(subnet), true) =
        (family, prefix, subnet, errors.is_empty())
    else {
        return Err(errors);
    };

    let spans = range::normalise(entries.iter().map(|p| p.entry.span()).collect());
    let mut remove: Vec<AddrRange> = excluded.iter().map(|p| p.entry.span()).collect();
    if !spec.allocate_reserved_ip_addresses {
        remove.push(AddrRange::single(subnet.network()));
        if family == Family::V4 {
            remove.push(AddrRange::single(subnet.broadcast()));
        }
    }
    remove.extend(gateway.map(AddrRange::single));
    let allocatable = range::subtract(&spans, &range::normalise(remove));

    Ok(Pool {
        name: name.to_owned(),
        family,
        prefix,
        subnet,
        gateway,
        addresses: entries.into_iter().map(|p| p.entry).collect(),
        excluded: excluded.into_iter().map(|p| p.entry).collect(),
        allocate_reserved: spec.allocate_reserved_ip_addresses,
        allocatable,
    })
}
