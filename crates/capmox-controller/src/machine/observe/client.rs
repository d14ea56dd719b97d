//! The instance's Proxmox client, built from its credentials Secret.
//!
//! What goes wrong is kept apart: a missing or malformed credentials Secret
//! needs an operator ([`Reason::CredentialsNotReady`]), an instance that
//! does not answer may come back ([`Reason::InstanceUnreachable`]).

use crate::error::Error;
use crate::machine::context::Run;
use crate::machine::decide::{ClientFact, Facts, Observed};
use crate::reasons::Reason;

/// Builds (or takes from the client map) the client of the machine's instance.
///
/// # Errors
/// [`Error::Kube`] when the credentials Secret cannot be read for a reason
/// other than its absence.
pub async fn observe(run: &mut Run<'_>, facts: &Facts) -> Result<Observed, Error> {
    let instance = facts.instance.clone().unwrap_or_default();
    let Some(pc) = run.world.proxmox_cluster.clone() else {
        return Ok(Observed::Client(ClientFact::Broken(
            Reason::WaitingForProxmoxCluster,
        )));
    };
    let shared = &run.ctx.shared;
    Ok(Observed::Client(
        match shared.clients.get(&shared.kube, &pc, &instance).await {
            Ok(i) => {
                run.client = Some(i);
                ClientFact::Ready
            }
            Err(e) => ClientFact::Broken(broken(&instance, e)?),
        },
    ))
}

/// What a failure to build the client means.
fn broken(instance: &str, e: Error) -> Result<Reason, Error> {
    Ok(match e {
        Error::Credentials { message, .. } => Reason::CredentialsNotReady {
            instance: instance.to_string(),
            detail: message,
        },
        Error::Precondition(detail) | Error::InvalidSpec(detail) => Reason::CredentialsNotReady {
            instance: instance.to_string(),
            detail,
        },
        Error::Kube(e) => return Err(Error::Kube(e)),
        other => Reason::InstanceUnreachable {
            instance: instance.to_string(),
            detail: other.to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_secret_is_not_an_unreachable_instance() {
        let r = broken(
            "dc-a",
            Error::Credentials {
                instance: "dc-a".into(),
                message: "Secret wl1/pve-a not found".into(),
            },
        )
        .unwrap();
        assert_eq!(r.code(), "CredentialsNotReady");
        assert!(r.terminal());
        assert_eq!(
            r.message(),
            "credentials of instance dc-a: Secret wl1/pve-a not found"
        );
        let r = broken(
            "dc-a",
            Error::Timeout {
                what: "identity of dc-a".into(),
                after: std::time::Duration::from_secs(10),
            },
        )
        .unwrap();
        assert_eq!(r.code(), "InstanceUnreachable");
        assert!(!r.terminal());
    }
}
