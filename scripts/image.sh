#!/usr/bin/env bash
# Builds the manager's OCI image archive without a container engine:
# scripts/image-rootfs.sh lays out the root filesystem in an umoci bundle,
# umoci (a Debian package) packs it as one layer of an OCI image layout and sets the user,
# entrypoint and labels, and tar makes the layout one archive
# (OUT/capmox-controller-VERSION.oci.tar), which `skopeo copy
# oci-archive:…`, `podman load` and container registries' upload tools read.
#
# Env: BINARY   the manager binary (required; `make image` passes the release build)
#      VERSION  image tag and org.opencontainers.image.version (required, e.g. v0.1.0)
#      OUT      output folder (default out/image)
#      DEB_CACHE folder for the Debian packages (default OUT/debs)
#      SOURCE   org.opencontainers.image.source (default: the repository URL)
set -euo pipefail
binary="${BINARY:?BINARY: the capmox-controller binary to put in the image}"
version="${VERSION:?VERSION: the image tag, e.g. v0.1.0}"
out="${OUT:-out/image}"
source_url="${SOURCE:-https://github.com/capmox-rs/cluster-api-provider-proxmox}"
here="$(cd "$(dirname "$0")" && pwd)"

command -v umoci >/dev/null 2>&1 || {
  echo "image: umoci not found (make tools installs it; Debian/Ubuntu: apt-get install umoci)" >&2
  exit 1
}
mkdir -p "$out"
out="$(cd "$out" && pwd)"
export DEB_CACHE="${DEB_CACHE:-$out/debs}"
work="$(mktemp -d "${TMPDIR:-/tmp}/capmox-image.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# Files are recorded with the owners they have in the bundle: root when
# root builds; a rootless build maps the builder to root.
rootless=()
if [ "$(id -u)" != 0 ]; then
  rootless=(--rootless)
fi
layout="$work/layout"
image="$layout:$version"
bundle="$work/bundle"
umoci init --layout "$layout"
umoci new --image "$image"
umoci unpack "${rootless[@]}" --image "$image" "$bundle" >/dev/null
"$here/image-rootfs.sh" "$bundle/rootfs" "$binary"
umoci repack --image "$image" --history.created_by "scripts/image-rootfs.sh" "$bundle"
umoci config --image "$image" \
  --os linux --architecture amd64 \
  --config.user 65532:65532 \
  --config.entrypoint /capmox-controller \
  --config.workingdir / \
  --config.label "org.opencontainers.image.title=capmox-controller" \
  --config.label "org.opencontainers.image.description=Cluster API infrastructure provider for Proxmox VE, across datacenters" \
  --config.label "org.opencontainers.image.source=$source_url" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.licenses=Apache-2.0"
umoci gc --layout "$layout"

archive="$out/capmox-controller-$version.oci.tar"
tar -C "$layout" --sort=name --owner=0 --group=0 --numeric-owner -cf "$archive.tmp" .
mv "$archive.tmp" "$archive"
echo "image: wrote $archive ($(du -h "$archive" | cut -f1))"
