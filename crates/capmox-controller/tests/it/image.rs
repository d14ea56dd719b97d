//! `make image` without a container engine: `scripts/image.sh` packs this
//! build's manager binary (the debug build nextest just made; `make image`
//! packs the release build the same way) into an OCI image archive. The test
//! reads the archive as a container runtime would — `index.json`, the
//! manifest, the config and the layers, each blob checked against its
//! digest — unpacks the root filesystem, and starts the binary from it with
//! the image's own dynamic loader and C library (`--version`, `--help`).
//! It also checks what clusterctl users expect of a provider image: a
//! non-root user, the entrypoint the Deployment relies on, no shell, the
//! OCI labels (source, version, licence, title).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `cmd`, panicking with its output when it fails; returns stdout.
fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `sha256:<hex>` of a file, by coreutils' `sha256sum` (independent of the
/// tool that wrote the image).
fn digest_of(path: &Path) -> String {
    let out = run(Command::new("sha256sum").arg(path));
    format!("sha256:{}", out.split_whitespace().next().unwrap())
}

/// The blob a descriptor points at, after checking its size and digest.
fn blob(layout: &Path, descriptor: &Value) -> PathBuf {
    let digest = descriptor["digest"].as_str().unwrap();
    let path = layout
        .join("blobs/sha256")
        .join(digest.strip_prefix("sha256:").unwrap());
    assert_eq!(digest_of(&path), digest, "{}", path.display());
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        descriptor["size"].as_u64().unwrap(),
        "size of {digest}"
    );
    path
}

fn json_of(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn image_archive_runs_the_manager_as_non_root_without_a_shell() {
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    let binary = Path::new(env!("CARGO_BIN_EXE_capmox-controller"));
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("image-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();

    run(Command::new(repo_root().join("scripts/image.sh"))
        .env("BINARY", binary)
        .env("VERSION", &version)
        .env("OUT", work.join("out"))
        // the Debian packages are downloaded once per target directory
        .env(
            "DEB_CACHE",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("image-debs"),
        ));
    let archive = work.join(format!("out/capmox-controller-{version}.oci.tar"));

    // The OCI image layout.
    let layout = work.join("layout");
    std::fs::create_dir_all(&layout).unwrap();
    run(Command::new("tar")
        .arg("-C")
        .arg(&layout)
        .arg("-xf")
        .arg(&archive));
    assert_eq!(
        json_of(&layout.join("oci-layout"))["imageLayoutVersion"],
        "1.0.0"
    );
    let index = json_of(&layout.join("index.json"));
    let manifests = index["manifests"].as_array().unwrap();
    assert_eq!(manifests.len(), 1);
    assert_eq!(manifests[0]["mediaType"], OCI_MANIFEST);
    assert_eq!(
        manifests[0]["annotations"]["org.opencontainers.image.ref.name"],
        version.as_str()
    );
    let manifest = json_of(&blob(&layout, &manifests[0]));
    assert_eq!(manifest["schemaVersion"], 2);
    assert_eq!(manifest["config"]["mediaType"], OCI_CONFIG);
    let config = json_of(&blob(&layout, &manifest["config"]));

    // What the Deployment and clusterctl users rely on.
    assert_eq!(config["os"], "linux");
    assert_eq!(config["architecture"], "amd64");
    assert_eq!(config["config"]["User"], "65532:65532");
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/capmox-controller"])
    );
    assert!(config["config"]["Cmd"].is_null(), "{config}");
    let labels: BTreeMap<String, String> =
        serde_json::from_value(config["config"]["Labels"].clone()).unwrap();
    assert_eq!(
        labels["org.opencontainers.image.title"],
        "capmox-controller"
    );
    assert_eq!(labels["org.opencontainers.image.version"], version);
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    assert_eq!(
        labels["org.opencontainers.image.source"],
        env!("CARGO_PKG_REPOSITORY")
    );

    // The root filesystem: the layers in order.
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(
        layers.len(),
        config["rootfs"]["diff_ids"].as_array().unwrap().len()
    );
    let rootfs = work.join("rootfs");
    std::fs::create_dir_all(&rootfs).unwrap();
    for layer in layers {
        assert_eq!(layer["mediaType"], OCI_LAYER_GZIP);
        run(Command::new("tar")
            .arg("-C")
            .arg(&rootfs)
            .arg("-xzf")
            .arg(blob(&layout, layer)));
    }
    let manager = rootfs.join("capmox-controller");
    assert_eq!(
        digest_of(&manager),
        digest_of(binary),
        "the binary as built"
    );
    for shell in [
        "bin/sh",
        "bin/bash",
        "bin/dash",
        "usr/bin/sh",
        "usr/bin/bash",
        "bin/busybox",
    ] {
        assert!(
            !rootfs.join(shell).exists(),
            "{shell} in the image: it must have no shell"
        );
    }
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap();
    assert!(
        passwd
            .lines()
            .any(|l| l == "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin"),
        "{passwd}"
    );
    let cas = std::fs::read_to_string(rootfs.join("etc/ssl/certs/ca-certificates.crt")).unwrap();
    assert!(cas.matches("-----BEGIN CERTIFICATE-----").count() > 50);

    // The binary starts with the image's loader and C library, and every
    // library it needs resolves inside the image.
    let loader = rootfs.join("lib64/ld-linux-x86-64.so.2");
    let libs = rootfs.join("lib/x86_64-linux-gnu");
    // `ld.so [--list] MANAGER [ARGS]`, with nothing from the host's
    // library cache or environment.
    let in_image = |list: bool, args: &[&str]| {
        let mut cmd = Command::new(&loader);
        cmd.arg("--inhibit-cache").arg("--library-path").arg(&libs);
        if list {
            cmd.arg("--list");
        }
        run(cmd.arg(&manager).args(args).env_clear())
    };
    let resolved = in_image(true, &[]);
    let rootfs_text = rootfs.display().to_string();
    for line in resolved.lines().filter(|l| l.contains("=>")) {
        let target = line.split("=>").nth(1).unwrap().trim();
        assert!(target.starts_with(&rootfs_text), "{line}");
    }
    assert!(resolved.contains("libc.so.6"), "{resolved}");
    assert_eq!(
        in_image(false, &["--version"]),
        format!("capmox-controller {}\n", env!("CARGO_PKG_VERSION"))
    );
    let help = in_image(false, &["--help"]);
    assert!(help.contains("Usage: capmox-controller"), "{help}");

    std::fs::remove_dir_all(&work).unwrap();
}
