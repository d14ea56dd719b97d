//! Whether the instance's resource pool (`spec.settings.instances[].pool`)
//! exists (docs/field-cases.md B34): read before any machine is cloned
//! into it, with the call of the instance's Proxmox VE version
//! (`GET /pools?poolid=` from 8.1 on, `GET /pools/{poolid}` before).

use crate::instances::EffectiveInstance;
use crate::pve::{Missing, PoolId, ProxmoxApi, PveError, VersionInfo};

/// What a pool read says about the pool `pool` of instance `instance`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolCheck {
    /// It exists (the token may read it).
    Exists,
    /// It is missing, or the token may not read it: what to fix.
    Problem(String),
}

/// Reads the instance's pool, if it names one. `Err` is a read failure
/// other than "missing" or "denied" (the probe fails like on any call).
///
/// # Errors
/// The Proxmox error of the read (transport, unreachable node).
pub async fn check(
    api: &dyn ProxmoxApi,
    inst: &EffectiveInstance,
    version: &VersionInfo,
) -> Result<Option<PoolCheck>, PveError> {
    let Some(name) = &inst.spec.pool else {
        return Ok(None);
    };
    let instance = inst.spec.name.as_str();
    let id = match PoolId::new(name.clone()) {
        Ok(id) => id,
        Err(e) => {
            return Ok(Some(PoolCheck::Problem(format!(
                "pool {name:?} of instance {instance}: {e}"
            ))));
        }
    };
    let read = if version.has_pool_query() {
        api.pool(&id).await.map(|p| p.is_some())
    } else {
        api.pool_by_path(&id).await.map(|_| true)
    };
    Ok(Some(judge(name, instance, read)?))
}

/// Judges a pool read (pure): found, missing, or not readable.
///
/// # Errors
/// Any other error of the read, unchanged.
pub fn judge(
    pool: &str,
    instance: &str,
    read: Result<bool, PveError>,
) -> Result<PoolCheck, PveError> {
    match read {
        Ok(true) => Ok(PoolCheck::Exists),
        Ok(false)
        | Err(PveError::NotFound {
            missing: Missing::Pool,
            ..
        }) => Ok(PoolCheck::Problem(missing_text(pool, instance))),
        Err(PveError::PermissionDenied { .. }) => Ok(PoolCheck::Problem(format!(
            "pool {pool} of instance {instance} cannot be read: the token lacks Pool.Audit on /pool/{pool} (or the pool does not exist); grant it (role PVEPoolUser) so the pool and its members can be checked"
        ))),
        Err(e) => Err(e),
    }
}

/// The message of a pool that does not exist.
pub fn missing_text(pool: &str, instance: &str) -> String {
    format!(
        "pool {pool} of instance {instance} does not exist in Proxmox; create it (pveum pool add {pool}) or name an existing pool"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pve_client::CallContext;

    fn ctx() -> Box<CallContext> {
        Box::new(CallContext {
            instance: "dc-b".into(),
            method: "GET",
            path: "/pools".into(),
        })
    }

    #[test]
    fn missing_denied_and_other_errors() {
        assert_eq!(judge("k8s", "dc-b", Ok(true)).unwrap(), PoolCheck::Exists);
        let missing = PoolCheck::Problem(
            "pool k8s-wl9 of instance dc-b does not exist in Proxmox; create it (pveum pool add k8s-wl9) or name an existing pool".into(),
        );
        assert_eq!(judge("k8s-wl9", "dc-b", Ok(false)).unwrap(), missing);
        let e = PveError::NotFound {
            ctx: ctx(),
            missing: Missing::Pool,
            message: "pool 'k8s-wl9' does not exist".into(),
        };
        assert_eq!(judge("k8s-wl9", "dc-b", Err(e)).unwrap(), missing);
        let e = PveError::PermissionDenied {
            ctx: ctx(),
            path: Some("/pool/k8s".into()),
            privileges: vec!["Pool.Audit".into()],
            message: "Permission check failed (/pool/k8s, Pool.Audit)".into(),
        };
        let PoolCheck::Problem(m) = judge("k8s", "dc-b", Err(e)).unwrap() else {
            panic!("a denied read is a problem");
        };
        assert!(m.contains("Pool.Audit on /pool/k8s"), "{m}");
        let e = PveError::Transient {
            ctx: ctx(),
            cause: pve_client::TransientCause::Status(500),
            message: "x".into(),
        };
        assert!(judge("k8s", "dc-b", Err(e)).is_err());
    }
}
