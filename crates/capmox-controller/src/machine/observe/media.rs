//! This machine's bootstrap ISO volumes on the instance's ISO storages: the
//! deletion's sweep, so an ISO whose record was lost to a crash (or never
//! written, by an older version) is still found and deleted.
//!
//! Every storage with content `iso` is listed once (a shared storage from
//! one node, a local one from each node that has it) with
//! `GET /nodes/{node}/storage/{storage}/content?content=iso`; files named
//! after this machine's UID (`capmox-<vmid>-<uid>.iso`) are reported.
//!
//! Machines deleted together share each storage's listing
//! ([`crate::machine::runtime::iso_lists`]): one listing sent after their
//! deletions began answers all of them.
//!
//! A sweep that found none during the deletion is not repeated by the
//! deletion's later reconciles (releasing the claims, removing the
//! finalizer): nothing is uploaded while a machine is deleted. Before, every
//! one of them listed every ISO storage again (15 listings per deleted
//! machine in spread-60: three sweeps of five storages).

use std::collections::BTreeSet;

use crate::machine::context::Run;
use crate::machine::decide::{Facts, MediaVolume, Observed, VmFact};
use crate::machine::vm::marker::is_iso_of;
use crate::pve::{NodeName, StorageId};
use crate::reasons::Reason;

/// Lists this machine's ISO volumes.
pub async fn observe(run: &mut Run<'_>, facts: &Facts) -> Observed {
    let unreachable = |detail: String| {
        Observed::Vm(VmFact::Unreachable(Reason::InstanceUnreachable {
            instance: facts.instance.clone().unwrap_or_default(),
            detail,
        }))
    };
    let memo = run.rt().memo(&run.me.uid);
    if facts.deleting && memo.media_swept {
        return Observed::MediaFound(Vec::new());
    }
    // A listing sent after the deletion began shows every ISO this machine
    // can have (nothing is uploaded while it is deleted): listings are
    // shared by the machines deleted together. (The sweep runs only in a
    // deletion, whose first reconcile sets `deleting_since`.)
    let since = memo
        .deleting_since
        .unwrap_or_else(tokio::time::Instant::now);
    let Ok(inst) = run.instance().cloned() else {
        return unreachable("no client".into());
    };
    let snap = match run
        .rt()
        .resources
        .get(&inst.identity, inst.api.as_ref(), None)
        .await
    {
        Ok(s) => s,
        Err(e) => return unreachable(e.to_string()),
    };
    let mut seen_shared = BTreeSet::new();
    let mut found = Vec::new();
    for s in snap
        .storages()
        .into_iter()
        .filter(|s| s.available && s.content.iter().any(|c| c == "iso"))
    {
        if s.shared && !seen_shared.insert(s.storage.clone()) {
            continue;
        }
        let (Ok(node), Ok(sid)) = (
            NodeName::new(s.node.clone()),
            StorageId::new(s.storage.clone()),
        ) else {
            continue;
        };
        match run
            .rt()
            .iso_lists
            .get(&inst.identity, inst.api.as_ref(), &node, &sid, since)
            .await
        {
            Ok(list) => found.extend(list.volids.iter().filter_map(|volid| {
                let file = volid.rsplit('/').next()?;
                is_iso_of(file, &run.me.uid).then(|| MediaVolume {
                    node: node.clone(),
                    volid: volid.clone(),
                })
            })),
            Err(e) => {
                return unreachable(format!(
                    "cannot list the ISO volumes of storage {} on {}: {e}",
                    s.storage, s.node
                ));
            }
        }
    }
    if facts.deleting && found.is_empty() {
        run.rt().update_memo(&run.me.uid, |m| m.media_swept = true);
    }
    Observed::MediaFound(found)
}
