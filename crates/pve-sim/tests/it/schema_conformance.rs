//! Schema conformance: every route the simulator serves exists in the
//! official API schema (`apidoc.json`) with the same permission check, and
//! every route refuses what the schema refuses (an unknown parameter, a
//! wrongly typed one) with Proxmox's 400 shape. Skips, saying so, when the
//! schema file is absent (it is not committed to the repository).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use common::{Api, enc, fast_config, start};
use pve_sim::schema::Schema;
use serde_json::{Value, json};

fn schema_present() -> bool {
    if std::path::Path::new(common::SCHEMA).exists() {
        return true;
    }
    eprintln!(
        "SKIP: the official schema {} is absent; schema conformance not checked",
        common::SCHEMA
    );
    false
}

/// The `check` (or `user`) part of a permissions object, without descriptions.
fn perm_core(v: &Value) -> Value {
    match v.get("check") {
        Some(c) => json!({"check": c}),
        None => json!({"user": v.get("user").cloned().unwrap_or(Value::Null)}),
    }
}

#[test]
fn every_served_route_is_in_the_schema_with_its_permissions() {
    if !schema_present() {
        return;
    }
    let schema = Schema::load(std::path::Path::new(common::SCHEMA)).unwrap();
    assert!(schema.method_count() > 600);
    let routes = pve_sim::routes();
    assert!(routes.len() >= 60, "{}", routes.len());
    for (method, path) in routes {
        assert!(
            schema.has_method(method, path),
            "{method} {path} is not in the schema"
        );
        let theirs = perm_core(schema.permissions(method, path).unwrap());
        let ours = perm_core(&pve_sim::route_permissions(method, path).unwrap());
        assert_eq!(ours, theirs, "permissions of {method} {path}");
    }
}

fn typed_param(doc: &Value, method: &str, path: &str) -> Option<(String, &'static str)> {
    fn find<'a>(nodes: &'a [Value], path: &str) -> Option<&'a Value> {
        for n in nodes {
            if n["path"] == path {
                return Some(n);
            }
            if let Some(c) = n.get("children").and_then(Value::as_array)
                && let Some(f) = find(c, path)
            {
                return Some(f);
            }
        }
        None
    }
    let node = find(doc.as_array()?, path)?;
    let props = node["info"][method]["parameters"]["properties"].as_object()?;
    let path_params: Vec<String> = path
        .split('/')
        .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(String::from)
        .collect();
    props
        .iter()
        .filter(|(k, _)| !path_params.contains(k) && !k.ends_with("[n]"))
        .find_map(|(k, v)| match v["type"].as_str() {
            Some("integer") => Some((k.clone(), "integer")),
            Some("boolean") => Some((k.clone(), "boolean")),
            _ => None,
        })
}

#[tokio::test]
async fn every_route_refuses_what_the_schema_refuses() {
    if !schema_present() {
        return;
    }
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(common::SCHEMA).unwrap()).unwrap();
    let mut cfg = fast_config();
    cfg.cluster_mut("dc-a")
        .unwrap()
        .tokens
        .push(pve_sim::TokenConfig {
            id: "root@pam!sim".into(),
            secret: Some(pve_sim::Secret::new("root-secret")),
            privsep: false,
            expire: 0,
            acl: vec![],
        });
    let sim = start(cfg).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c).with_auth(Some("PVEAPIToken=root@pam!sim=root-secret".into()));
    // a real UPID for the task routes
    let upid = a
        .post("/nodes/pve-a1/qemu/9000/clone", &[("newid", "101")])
        .await
        .upid();
    a.task_result("pve-a1", &upid).await;
    let fill = |template: &str| {
        template
            .replace("{node}", "pve-a1")
            .replace("{vmid}", "9000")
            .replace("{storage}", "ceph")
            .replace("{upid}", &enc(&upid))
            .replace("{poolid}", "p1")
            .replace("{sid}", "vm:9000")
            .replace("{volume}", "ceph:base-9000-disk-0")
    };
    let unknown =
        "property is not defined in schema and the schema does not allow additional properties";
    let mut checked_types = 0;
    for (method, template) in pve_sim::routes() {
        let path = fill(template);
        let send = |params: Vec<(String, String)>| {
            let url = a.url(&path);
            let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
            let req = if method == "GET" || method == "DELETE" {
                a.client.request(m, url).query(&params)
            } else {
                a.client.request(m, url).form(&params)
            };
            a.send(req)
        };
        let r = send(vec![("zz_bogus".into(), "1".into())]).await;
        assert_eq!(r.status, 400, "{method} {template}: {r:?}");
        assert_eq!(
            r.reason, "Parameter verification failed.",
            "{method} {template}"
        );
        assert_eq!(
            r.body["errors"]["zz_bogus"], unknown,
            "{method} {template}: {r:?}"
        );
        assert_eq!(r.body["data"], Value::Null);

        if let Some((param, ty)) = typed_param(&doc, method, template) {
            let r = send(vec![(param.clone(), "x!".into())]).await;
            assert_eq!(r.status, 400, "{method} {template} {param}: {r:?}");
            assert_eq!(
                r.body["errors"][param.as_str()],
                format!("type check ('{ty}') failed - got 'x!'"),
                "{method} {template}: {r:?}"
            );
            checked_types += 1;
        }
    }
    assert!(
        checked_types >= 25,
        "only {checked_types} routes had a typed parameter"
    );
}

#[tokio::test]
async fn config_keys_are_validated_by_their_formats() {
    if !schema_present() {
        return;
    }
    let sim = start(fast_config()).await;
    let a = Api::new(sim.cluster("dc-a").unwrap());
    let cases = [
        (
            "net0",
            "virtio,bridge=vmbr0,tag=4095",
            "invalid format - format error\nnet0.tag: value must have a maximum value of 4094",
        ),
        (
            "net0",
            "virtio,bridge=vmbr0,mtu=65521",
            "invalid format - format error\nnet0.mtu: value must have a maximum value of 65520",
        ),
        (
            "net0",
            "virtio,bridge=vmbr0,speed=10",
            "invalid format - invalid key in comma-separated list property: speed",
        ),
        (
            "net0",
            "rtl9999,bridge=vmbr0",
            "invalid format - format error\nnet0.model: value 'rtl9999' does not have a value in the enumeration 'e1000, e1000-82540em, e1000-82544gc, e1000-82545em, e1000e, i82551, i82557b, i82559er, ne2k_isa, ne2k_pci, pcnet, rtl8139, virtio, vmxnet3'",
        ),
        (
            "scsi0",
            "ceph:10,discard=maybe",
            "invalid format - format error\nscsi0.discard: value 'maybe' does not have a value in the enumeration 'ignore, on'",
        ),
        ("cores", "0", "value must have a minimum value of 1"),
        (
            "ostype",
            "dos",
            "value 'dos' does not have a value in the enumeration 'other, wxp, w2k, w2k3, w2k8, wvista, win7, win8, win10, win11, l24, l26, solaris'",
        ),
        (
            "name",
            "bad_name",
            "invalid format - value does not look like a valid DNS name",
        ),
    ];
    for (k, v, msg) in cases {
        let r = a.put("/nodes/pve-a1/qemu/9000/config", &[(k, v)]).await;
        assert_eq!(r.status, 400, "{k}={v}: {r:?}");
        assert_eq!(r.body["errors"][k], msg, "{k}={v}");
    }
    // B13: malformed ipconfig strings
    for v in [
        "ip=10.0.0.21,gw=10.0.0.1",
        "ip=10.0.0.1391/24",
        "ip=10.0.0.21/24, gw=10.0.0.1",
    ] {
        let r = a
            .put("/nodes/pve-a1/qemu/9000/config", &[("ipconfig0", v)])
            .await;
        assert_eq!(r.status, 400, "{v}: {r:?}");
        assert!(
            r.body["errors"]["ipconfig0"]
                .as_str()
                .unwrap()
                .starts_with("invalid format"),
            "{v}: {r:?}"
        );
    }
    for v in [
        "ip=dhcp",
        "ip6=auto",
        "ip=10.0.0.21/24,gw=10.0.0.1,ip6=2001:db8::21/64,gw6=2001:db8::1",
    ] {
        let r = a
            .put("/nodes/pve-a1/qemu/9000/config", &[("ipconfig0", v)])
            .await;
        assert_eq!(r.status, 200, "{v}: {r:?}");
    }
}
