//! [`VmLock`]: the `lock` property of a VM config.

use std::fmt;

/// The `lock` property of a VM (docs/proxmox-semantics.md §6a). Visible in `GET …/config`,
/// `status/current` and `/cluster/resources`. Unknown values (PVE writes
/// `destroyed` and `import`, which are not in the schema enum, and later
/// releases may add more) are kept in [`VmLock::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum VmLock {
    /// `backup` — vzdump running.
    Backup,
    /// `clone` — set on the *new* VM for the whole clone task.
    Clone,
    /// `create` — VM creation/restore in progress.
    Create,
    /// `migrate` — source VM during migration.
    Migrate,
    /// `rollback` — snapshot rollback.
    Rollback,
    /// `snapshot` — snapshot in progress.
    Snapshot,
    /// `snapshot-delete` — snapshot removal in progress.
    SnapshotDelete,
    /// `suspending` — hibernation to disk in progress.
    Suspending,
    /// `suspended` — hibernated to disk (start/config tolerate it).
    Suspended,
    /// `destroyed` — end of a destroy task (not in the schema enum).
    Destroyed,
    /// `import` — live import (not in the schema enum).
    Import,
    /// Any other value, kept verbatim.
    Other(String),
}

impl VmLock {
    /// Maps the wire string to a variant; never fails.
    pub fn parse(s: &str) -> Self {
        match s {
            "backup" => Self::Backup,
            "clone" => Self::Clone,
            "create" => Self::Create,
            "migrate" => Self::Migrate,
            "rollback" => Self::Rollback,
            "snapshot" => Self::Snapshot,
            "snapshot-delete" => Self::SnapshotDelete,
            "suspending" => Self::Suspending,
            "suspended" => Self::Suspended,
            "destroyed" => Self::Destroyed,
            "import" => Self::Import,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The wire string.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Backup => "backup",
            Self::Clone => "clone",
            Self::Create => "create",
            Self::Migrate => "migrate",
            Self::Rollback => "rollback",
            Self::Snapshot => "snapshot",
            Self::SnapshotDelete => "snapshot-delete",
            Self::Suspending => "suspending",
            Self::Suspended => "suspended",
            Self::Destroyed => "destroyed",
            Self::Import => "import",
            Self::Other(s) => s,
        }
    }

    /// Whether the lock normally goes away by itself when a running task ends
    /// (`clone`, `create`, `migrate`, `backup`, snapshots, `destroyed`); a
    /// caller may wait and retry. `suspended` and unknown values need a person.
    pub fn is_transient(&self) -> bool {
        !matches!(self, Self::Suspended | Self::Other(_))
    }
}

impl fmt::Display for VmLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for VmLock {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(Self::parse(&s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_unknown_values_round_trip() {
        for s in [
            "backup",
            "clone",
            "create",
            "migrate",
            "rollback",
            "snapshot",
            "snapshot-delete",
            "suspending",
            "suspended",
            "destroyed",
            "import",
            "brand-new",
        ] {
            assert_eq!(VmLock::parse(s).as_str(), s);
        }
        assert_eq!(VmLock::parse("clone"), VmLock::Clone);
        assert_eq!(VmLock::parse("x"), VmLock::Other("x".into()));
        assert!(VmLock::Clone.is_transient());
        assert!(!VmLock::Suspended.is_transient());
    }
}
