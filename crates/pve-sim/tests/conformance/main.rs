//! The conformance suite of the simulator: it is checked against the
//! official Proxmox VE API schema (`apidoc.json`, the API viewer's data),
//! which is reference data kept beside the repository, not in it
//! (`../shared/pve-api/`; see the README's "Two test suites"). `make test`
//! leaves these tests out (filter `test(/^conformance::/)`), `make
//! conformance` runs only them, and each fails naming the missing path when
//! the data is absent.
//!
//! Every route the simulator serves exists in the schema with the same
//! permission check; every route refuses what the schema refuses (an
//! unknown parameter, a wrongly typed one) with Proxmox's 400 shape; values
//! are checked by their formats (`pve-tag`, `net`, `ipconfig`, the resize
//! size pattern, form booleans).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

#[path = "../it/common/mod.rs"]
mod common;

use common::{Api, enc, fast_config, start};
use pve_sim::schema::Schema;
use serde_json::{Value, json};

/// The official schema beside the repository: `<repo>/../shared/pve-api/apidoc.json`.
///
/// # Panics
/// When the file is absent, naming the path: the conformance suite never
/// passes without its reference data.
fn schema_path() -> PathBuf {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let repo = repo.canonicalize().unwrap_or(repo);
    let path = repo
        .parent()
        .unwrap_or(&repo)
        .join("shared/pve-api/apidoc.json");
    assert!(
        path.is_file(),
        "conformance: the official Proxmox API schema {} is missing (reference data beside the repository; `make test` does not need it)",
        path.display()
    );
    path
}

/// [`fast_config`] with every request validated against the official schema.
fn schema_config() -> pve_sim::SimConfig {
    fast_config().with_schema_path(Some(schema_path()))
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
    let schema = Schema::load(&schema_path()).unwrap();
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
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path()).unwrap()).unwrap();
    let mut cfg = schema_config();
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
    let sim = start(schema_config()).await;
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

#[tokio::test]
async fn form_json_and_booleans() {
    let sim = start(schema_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    // form booleans must be 1/0
    let r = a
        .post(
            "/nodes/pve-a1/qemu/9000/clone",
            &[("newid", "120"), ("full", "true")],
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"],
        json!({"full": "type check ('boolean') failed - got 'true'"})
    );
    // JSON bodies may use real booleans and numbers
    let r = a
        .post_json(
            "/nodes/pve-a1/qemu/9000/clone",
            json!({"newid": 120, "full": false, "name": "j1"}),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(a.run("pve-a1", r).await, "OK");
    assert_eq!(c.vm(120).unwrap().name.as_deref(), Some("j1"));
    // a raw ';' splits the pair: 'tags=a;b' is 'tags=a' plus an unknown parameter 'b'
    let r = a
        .send(
            a.client
                .put(a.url("/nodes/pve-a1/qemu/120/config"))
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body("tags=a;b"),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"],
        json!({"b": "property is not defined in schema and the schema does not allow additional properties"})
    );
    // percent-encoded it is one value
    let r = a
        .put("/nodes/pve-a1/qemu/120/config", &[("tags", "b;A")])
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(c.vm(120).unwrap().config["tags"], "a;b");
    // query parameters override body parameters
    let r = a
        .send(
            a.client
                .put(a.url("/nodes/pve-a1/qemu/120/config?name=from-query"))
                .form(&[("name", "from-body")]),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(c.vm(120).unwrap().name.as_deref(), Some("from-query"));
    // a path parameter repeated with another value is refused
    let r = a
        .put(
            "/nodes/pve-a1/qemu/120/config",
            &[("vmid", "121"), ("name", "x")],
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(r.body["errors"]["vmid"].is_string(), "{r:?}");
}

/// Clones the template 9000 of `dc-a` to VMID 101 (full, on `local-lvm`).
async fn clone_101(a: &Api) {
    let r = a
        .post(
            "/nodes/pve-a1/qemu/9000/clone",
            &[("newid", "101"), ("full", "1"), ("storage", "local-lvm")],
        )
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
}

/// Tags outside Proxmox's character set (`pve-tag` format) are refused.
#[tokio::test]
async fn tags_outside_the_character_set_are_refused() {
    let sim = start(schema_config()).await;
    let a = Api::new(sim.cluster("dc-a").unwrap());
    clone_101(&a).await;
    for bad in ["-lead", ".lead", "semi!colon"] {
        let r = a
            .put("/nodes/pve-a1/qemu/101/config", &[("tags", bad)])
            .await;
        assert_eq!(r.status, 400, "{bad}: {r:?}");
        assert!(
            r.body["errors"]["tags"]
                .as_str()
                .unwrap()
                .starts_with("invalid format - invalid characters in tag")
        );
    }
}

/// A negative resize size does not match the schema's size pattern.
#[tokio::test]
async fn negative_resize_size_is_refused() {
    let sim = start(schema_config()).await;
    let a = Api::new(sim.cluster("dc-a").unwrap());
    clone_101(&a).await;
    let r = a
        .put(
            "/nodes/pve-a1/qemu/101/resize",
            &[("disk", "scsi0"), ("size", "-5G")],
        )
        .await;
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(
        r.body["errors"],
        json!({"size": "value does not match the regex pattern"})
    );
}

/// `GET /cluster/resources?type=pool`: `pool` is not in the schema's enum.
#[tokio::test]
async fn unknown_resource_type_is_refused() {
    let sim = start(schema_config()).await;
    let a = Api::new(sim.cluster("dc-a").unwrap());
    let r = a.get("/cluster/resources?type=pool").await;
    assert_eq!(r.status, 400, "type enum from the schema: {r:?}");
}

/// The VM-shape values the provider writes (docs/vm-shapes.md: CPU model and
/// flags, PCI devices by mapping, firmware and machine type, CD-ROM drives
/// on each bus) pass the official schema; malformed ones are refused with
/// the key named.
#[tokio::test]
async fn vm_shape_values_pass_the_schema_and_malformed_ones_do_not() {
    let sim = start(schema_config()).await;
    let a = Api::new(sim.cluster("dc-a").unwrap());
    clone_101(&a).await;
    for (k, v) in [
        ("cpu", "x86-64-v2-AES,flags=+pcid"),
        ("cpu", "host,flags=+aes;-pcid"),
        ("hostpci0", "mapping=nvidia-a100,pcie=1,rombar=0,x-vga=1"),
        ("hostpci1", "mapping=vgpu,mdev=nvidia-63"),
        ("bios", "ovmf"),
        ("machine", "q35"),
        ("sata2", "none,media=cdrom"),
        ("scsi2", "none,media=cdrom"),
    ] {
        let r = a.put("/nodes/pve-a1/qemu/101/config", &[(k, v)]).await;
        assert_eq!(r.status, 200, "{k}={v}: {r:?}");
    }
    for (k, v) in [
        ("hostpci0", "mapping=nvidia-a100,pcie=maybe"),
        ("hostpci0", "mapping=vgpu,mdev=a/b"),
        ("cpu", "host,flags=aes"),
    ] {
        let r = a.put("/nodes/pve-a1/qemu/101/config", &[(k, v)]).await;
        assert_eq!(r.status, 400, "{k}={v}: {r:?}");
        assert!(r.body["errors"][k].is_string(), "{k}={v}: {r:?}");
    }
}
