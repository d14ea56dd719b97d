//! The demo's tables: the live machine table (machine, role, datacenter,
//! Proxmox node, VMID, address, phase) and the final distribution per
//! datacenter. Plain text with aligned columns; the demo redraws it in place
//! on a terminal and prints it on each change otherwise.

use std::collections::BTreeMap;

use crate::observe::MachineRow;

/// Renders rows as aligned columns under a header (two spaces between columns).
pub fn columns(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, cell) in r.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(c);
            } else {
                let pad = widths[i].saturating_sub(c.chars().count());
                out.push_str(c);
                out.push_str(&" ".repeat(pad + 2));
            }
        }
        out.trim_end().to_string()
    };
    let mut out = line(header.to_vec());
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

fn dash(v: Option<&str>) -> String {
    v.filter(|s| !s.is_empty()).unwrap_or("-").to_string()
}

/// The live machine table.
pub fn machines(rows: &[MachineRow]) -> String {
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let phase = match (&r.reason, r.phase.as_str()) {
                (_, "Running") => "Running".to_string(),
                (_, "") => "Pending".to_string(),
                (Some(reason), p) if !matches!(reason.as_str(), "Ready" | "Provisioned" | "") => {
                    format!("{p} ({reason})")
                }
                (_, p) => p.to_string(),
            };
            vec![
                r.name.clone(),
                r.role().to_string(),
                dash(r.instance.as_deref().or(r.failure_domain.as_deref())),
                dash(r.proxmox_node.as_deref()),
                r.vmid.map_or_else(|| "-".to_string(), |v| v.to_string()),
                dash(r.address.as_deref()),
                if r.deleting {
                    "Deleting".to_string()
                } else {
                    phase
                },
            ]
        })
        .collect();
    columns(
        &[
            "MACHINE",
            "ROLE",
            "DATACENTER",
            "PVE NODE",
            "VMID",
            "ADDRESS",
            "PHASE",
        ],
        &body,
    )
}

/// The distribution per datacenter: control-plane machines, workers,
/// Kubernetes Nodes, and the VMs the simulated datacenter holds.
pub fn distribution(rows: &[MachineRow], vms: &BTreeMap<String, usize>) -> String {
    let mut dcs: Vec<String> = vms.keys().cloned().collect();
    for r in rows {
        if let Some(i) = &r.instance
            && !dcs.contains(i)
        {
            dcs.push(i.clone());
        }
    }
    let body: Vec<Vec<String>> = dcs
        .iter()
        .map(|dc| {
            let here: Vec<&MachineRow> = rows
                .iter()
                .filter(|r| r.instance.as_deref() == Some(dc.as_str()))
                .collect();
            vec![
                dc.clone(),
                here.iter().filter(|r| r.control_plane).count().to_string(),
                here.iter().filter(|r| !r.control_plane).count().to_string(),
                here.iter().filter(|r| r.node.is_some()).count().to_string(),
                vms.get(dc)
                    .map_or_else(|| "-".to_string(), |n| n.to_string()),
            ]
        })
        .collect();
    columns(
        &[
            "DATACENTER",
            "CONTROL PLANE",
            "WORKERS",
            "NODES",
            "VMS IN PROXMOX",
        ],
        &body,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, cp: bool, dc: &str, vmid: Option<u32>, phase: &str) -> MachineRow {
        MachineRow {
            name: name.into(),
            control_plane: cp,
            failure_domain: Some(dc.into()),
            instance: vmid.map(|_| dc.to_string()),
            vmid,
            proxmox_node: vmid.map(|_| "pve-a2".to_string()),
            node: (phase == "Running").then(|| name.to_string()),
            address: vmid.map(|_| "10.10.0.10".to_string()),
            phase: phase.into(),
            reason: (phase != "Running").then(|| "Cloning".to_string()),
            ..MachineRow::default()
        }
    }

    #[test]
    fn machine_table_is_aligned() {
        let rows = [
            row("wl1-cp-abcde", true, "dc-a", Some(1000), "Running"),
            row("wl1-md-dc-b-x-fghjk", false, "dc-b", None, "Provisioning"),
        ];
        assert_eq!(
            machines(&rows),
            "MACHINE              ROLE           DATACENTER  PVE NODE  VMID  ADDRESS     PHASE\n\
             wl1-cp-abcde         control-plane  dc-a        pve-a2    1000  10.10.0.10  Running\n\
             wl1-md-dc-b-x-fghjk  worker         dc-b        -         -     -           Provisioning (Cloning)\n"
        );
    }

    #[test]
    fn distribution_counts_per_datacenter() {
        let rows = [
            row("a", true, "dc-a", Some(1000), "Running"),
            row("b", false, "dc-a", Some(1001), "Provisioning"),
            row("c", true, "dc-b", Some(1000), "Running"),
        ];
        let vms = BTreeMap::from([
            ("dc-a".to_string(), 2),
            ("dc-b".to_string(), 1),
            ("dc-c".to_string(), 0),
        ]);
        assert_eq!(
            distribution(&rows, &vms),
            "DATACENTER  CONTROL PLANE  WORKERS  NODES  VMS IN PROXMOX\n\
             dc-a        1              1        1      2\n\
             dc-b        1              0        1      1\n\
             dc-c        0              0        0      0\n"
        );
    }
}
