//! Ignition bootstrap data checked before any Proxmox call: a machine whose
//! Secret (format `ignition`) holds no usable Ignition config is never
//! cloned ([`crate::cloudinit::ignition::check`]). The stores hold no
//! Secret data, so the check reads the Secret (one GET) and remembers the
//! result per resourceVersion: it reads again only when the Secret changed.

use crate::cloudinit::ignition;
use crate::error::Error;
use crate::machine::decide::BootstrapData;
use crate::machine::runtime::MachineRuntime;
use crate::machine::runtime::memo::IgnitionCheck;
use crate::stores::{self, BootstrapPresence};

/// The condition message of a Secret whose data does not pass the check.
pub fn problem_message(ns: &str, secret: &str, problem: &ignition::IgnitionError) -> String {
    format!(
        "the bootstrap data Secret {ns}/{secret} (format ignition) is not a usable Ignition config: {problem}"
    )
}

/// The bootstrap fact of Ignition Secret `secret` in `ns` (its presence
/// `p` from the store): [`BootstrapData::Ready`] when its `value` passes
/// the check, [`BootstrapData::Invalid`] naming the Secret and the problem
/// otherwise.
///
/// # Errors
/// [`Error::Kube`] of the GET.
pub async fn checked(
    runtime: &MachineRuntime,
    kube: &kube::Client,
    uid: &str,
    ns: &str,
    secret: &str,
    p: &BootstrapPresence,
) -> Result<BootstrapData, Error> {
    let key = format!("{ns}/{secret}");
    let remembered = runtime.memo(uid).ignition.clone().filter(|c| {
        c.secret == key && p.resource_version.as_deref() == Some(c.resource_version.as_str())
    });
    let problem = match remembered {
        Some(c) => c.problem,
        None => {
            let Some(data) =
                crate::spent::kubernetes(stores::bootstrap_value(kube, ns, secret)).await?
            else {
                return Ok(BootstrapData::Missing(format!(
                    "the bootstrap data Secret {ns}/{secret} has no key 'value' yet"
                )));
            };
            let problem = ignition::check(&data.value)
                .err()
                .map(|e| problem_message(ns, secret, &e));
            if let Some(rv) = &p.resource_version {
                let check = IgnitionCheck {
                    secret: key,
                    resource_version: rv.clone(),
                    problem: problem.clone(),
                };
                runtime.update_memo(uid, |m| m.ignition = Some(check));
            }
            problem
        }
    };
    Ok(match problem {
        None => BootstrapData::Ready,
        Some(why) => BootstrapData::Invalid(why),
    })
}
