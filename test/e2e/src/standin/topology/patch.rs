//! ClusterClass inline patches: which templates a patch definition selects
//! and the JSON patches (RFC 6902) it applies with values from variables.
//! Source: CAPI `internal/controllers/topology/cluster/patches/inline`
//! (selector matching, `valueFrom.variable`, `valueFrom.template`).

use serde_json::{Map, Value, json};

use super::TopologyError;
use super::variables::{lookup, render_template};
use crate::crds::clusterclass::{ClusterClassPatch, JsonPatch, PatchSelector};

/// The role of a template in the topology, which `matchResources` selects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The InfraCluster template (`infrastructureCluster: true`).
    InfrastructureCluster,
    /// The control plane template or the control plane's InfraMachine
    /// template (`controlPlane: true`).
    ControlPlane,
    /// A template of the MachineDeployment class named here
    /// (`machineDeploymentClass.names`).
    MachineDeployment(String),
}

/// Whether `selector` picks a template of `api_version`/`kind` in role `target`.
pub fn selects(selector: &PatchSelector, api_version: &str, kind: &str, target: &Target) -> bool {
    if selector.api_version != api_version || selector.kind != kind {
        return false;
    }
    let m = &selector.match_resources;
    match target {
        Target::InfrastructureCluster => m.infrastructure_cluster == Some(true),
        Target::ControlPlane => m.control_plane == Some(true),
        Target::MachineDeployment(class) => m
            .machine_deployment_class
            .as_ref()
            .is_some_and(|c| c.names.iter().any(|n| n == class || n == "*")),
    }
}

/// Applies every patch definition selecting `template` (by its
/// `apiVersion`/`kind` and `target`), in the class's order.
///
/// # Errors
/// [`TopologyError::Patch`] naming the patch: `enabledIf` (the stand-in does
/// not evaluate Go templates), a variable path without value, an operation
/// other than add/replace/remove, or a JSON patch that does not apply.
pub fn apply_all(
    patches: &[ClusterClassPatch],
    target: &Target,
    template: &mut Value,
    vars: &Map<String, Value>,
) -> Result<(), TopologyError> {
    let api_version = template["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let kind = template["kind"].as_str().unwrap_or_default().to_string();
    for p in patches {
        let fail = |message: String| TopologyError::Patch {
            patch: p.name.clone(),
            message,
        };
        let selected: Vec<&JsonPatch> = p
            .definitions
            .iter()
            .filter(|d| selects(&d.selector, &api_version, &kind, target))
            .flat_map(|d| d.json_patches.iter())
            .collect();
        if selected.is_empty() {
            continue;
        }
        if p.enabled_if.is_some() {
            return Err(fail(
                "enabledIf is not supported by the stand-in's topology controller".into(),
            ));
        }
        let ops = selected
            .into_iter()
            .map(|jp| operation(jp, vars))
            .collect::<Result<Vec<Value>, String>>()
            .map_err(fail)?;
        let patch: json_patch::Patch =
            serde_json::from_value(Value::Array(ops)).map_err(|e| fail(e.to_string()))?;
        json_patch::patch(template, &patch).map_err(|e| fail(e.to_string()))?;
    }
    Ok(())
}

/// One RFC 6902 operation with its value resolved.
fn operation(jp: &JsonPatch, vars: &Map<String, Value>) -> Result<Value, String> {
    match jp.op.as_str() {
        "remove" => return Ok(json!({"op": "remove", "path": jp.path})),
        "add" | "replace" => {}
        other => return Err(format!("op {other:?}: only add, replace and remove")),
    }
    let value = match (&jp.value, &jp.value_from) {
        (Some(v), None) => v.0.clone(),
        (None, Some(from)) => match (&from.variable, &from.template) {
            (Some(path), None) => lookup(vars, path)
                .cloned()
                .ok_or_else(|| format!("{}: variable {path:?} has no value", jp.path))?,
            (None, Some(t)) => render_template(t, vars).map_err(|e| format!("{}: {e}", jp.path))?,
            _ => return Err(format!("{}: valueFrom needs variable or template", jp.path)),
        },
        _ => return Err(format!("{}: needs value or valueFrom", jp.path)),
    };
    Ok(json!({"op": jp.op, "path": jp.path, "value": value}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crds::clusterclass::{ClassNames, PatchDefinition, PatchSelectorMatch, ValueFrom};

    fn patch(target: PatchSelectorMatch, ops: Vec<JsonPatch>) -> ClusterClassPatch {
        ClusterClassPatch {
            name: "p".into(),
            description: None,
            enabled_if: None,
            definitions: vec![PatchDefinition {
                selector: PatchSelector {
                    api_version: "infrastructure.cluster.x-k8s.io/v1alpha3".into(),
                    kind: "ProxmoxMachineTemplate".into(),
                    match_resources: target,
                },
                json_patches: ops,
            }],
        }
    }

    fn from_var(path: &str, var: &str) -> JsonPatch {
        JsonPatch {
            op: "add".into(),
            path: path.into(),
            value: None,
            value_from: Some(ValueFrom {
                variable: Some(var.into()),
                template: None,
            }),
        }
    }

    fn template() -> Value {
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha3",
               "kind": "ProxmoxMachineTemplate",
               "spec": {"template": {"spec": {"memoryMiB": 1}}}})
    }

    #[test]
    fn selected_patches_apply_variables_others_do_not() {
        let workers = patch(
            PatchSelectorMatch {
                machine_deployment_class: Some(ClassNames {
                    names: vec!["worker".into()],
                }),
                ..Default::default()
            },
            vec![from_var("/spec/template/spec/memoryMiB", "size.memoryMiB")],
        );
        let mut vars = Map::new();
        vars.insert("size".into(), json!({"memoryMiB": 2048}));
        let mut t = template();
        apply_all(
            std::slice::from_ref(&workers),
            &Target::MachineDeployment("worker".into()),
            &mut t,
            &vars,
        )
        .unwrap();
        assert_eq!(t["spec"]["template"]["spec"]["memoryMiB"], 2048);
        let mut cp = template();
        apply_all(&[workers], &Target::ControlPlane, &mut cp, &vars).unwrap();
        assert_eq!(cp, template());
    }

    #[test]
    fn missing_variable_and_enabled_if_are_named() {
        let mut p = patch(
            PatchSelectorMatch {
                control_plane: Some(true),
                ..Default::default()
            },
            vec![from_var("/spec/template/spec/memoryMiB", "absent")],
        );
        let err = apply_all(
            std::slice::from_ref(&p),
            &Target::ControlPlane,
            &mut template(),
            &Map::new(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("\"absent\" has no value"), "{err}");
        p.enabled_if = Some("{{ .x }}".into());
        let err = apply_all(&[p], &Target::ControlPlane, &mut template(), &Map::new()).unwrap_err();
        assert!(err.to_string().contains("enabledIf"), "{err}");
    }
}
