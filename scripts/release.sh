#!/usr/bin/env bash
# Writes the release artifacts as a clusterctl local repository:
#
#   OUT_DIR/infrastructure-proxmox/VERSION/
#     infrastructure-components.yaml   every object of config/ (all *.yaml, any depth)
#     metadata.yaml                    release series -> CAPI contract
#     cluster-template*.yaml           the flavors of templates/
#     clusterclass-*.yaml              the ClusterClasses flavors use (clusterctl
#                                      adds clusterclass-<name>.yaml to a flavor)
#
# The components file takes every Kubernetes object under config/, so what
# is added there (webhooks, cert-manager Issuer and Certificate) is released
# without a list to keep. Objects are ordered as they must be created:
# Namespace, CRDs, RBAC, Secrets and ConfigMaps, Services, cert-manager
# objects, workloads, webhook configurations; within a kind by file name.
# The manager's image reference is set to IMAGE.
#
# Env: VERSION (default v + the workspace version), IMAGE (default
#      ghcr.io/capmox-rs/capmox-controller:VERSION), OUT_DIR (default out/release).
set -euo pipefail
cd "$(dirname "$0")/.."
version="${VERSION:-v$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)}"
image="${IMAGE:-ghcr.io/capmox-rs/capmox-controller:$version}"
out="${OUT_DIR:-out/release}"
repo="$out/infrastructure-proxmox/$version"
# clusterctl refuses a version that no release series of metadata.yaml
# covers (the series is the version's major.minor).
series="$(echo "$version" | sed -nE 's/^v([0-9]+)\.([0-9]+)\..*$/\1 \2/p')"
[ -n "$series" ] || { echo "release: VERSION $version is not v<major>.<minor>.<patch>" >&2; exit 1; }
read -r major minor <<<"$series"
awk -v major="$major" -v minor="$minor" '
  /^[[:space:]]*-[[:space:]]*major:/ { m = $NF }
  /^[[:space:]]*major:/ { m = $NF }
  /^[[:space:]]*minor:/ && m == major && $NF == minor { found = 1 }
  END { exit !found }
' metadata.yaml || {
  echo "release: metadata.yaml has no release series $major.$minor for $version; clusterctl would refuse this release (add the series with its contract first)" >&2
  exit 1; }
mkdir -p "$repo"

files="$(find config -name '*.yaml' -type f | LC_ALL=C sort)"
[ -n "$files" ] || { echo "release: no YAML under config/" >&2; exit 1; }
# One record per document: "<rank>\t<file>\t<n>\t<text with \x01 for newlines>",
# sorted by rank, then file and position; comments and blank lines before a
# document's first line are dropped.
# shellcheck disable=SC2086
awk '
  function rank(kind) {
    if (kind == "Namespace") return 0
    if (kind == "CustomResourceDefinition") return 1
    if (kind == "ServiceAccount") return 2
    if (kind == "ClusterRole" || kind == "Role") return 3
    if (kind == "ClusterRoleBinding" || kind == "RoleBinding") return 4
    if (kind == "Secret" || kind == "ConfigMap") return 5
    if (kind == "Service") return 6
    if (kind == "Issuer" || kind == "ClusterIssuer") return 7
    if (kind == "Certificate") return 8
    if (kind == "Deployment") return 9
    if (kind ~ /WebhookConfiguration$/) return 10
    return 11
  }
  function flush() {
    if (text != "" && kind != "" && kind != "Kustomization" && api != "") {
      printf "%d\t%s\t%06d\t%s\n", rank(kind), FILENAME_, n, text
    } else if (text != "" && kind == "") {
      printf "release: %s: a document without kind\n", FILENAME_ > "/dev/stderr"; bad = 1
    }
    text = ""; kind = ""; api = ""; n++
  }
  FNR == 1 { if (NR > 1) flush(); FILENAME_ = FILENAME; n = 0 }
  /^---[ \t]*$/ { flush(); next }
  text == "" && (/^#/ || /^[ \t]*$/) { next }
  /^kind:[ \t]/ { kind = $2 }
  /^apiVersion:[ \t]/ { api = $2 }
  { text = (text == "" ? $0 : text "\001" $0) }
  END { flush(); exit bad }
' $files | LC_ALL=C sort -t "$(printf '\t')" -k1,1n -k2,2 -k3,3 \
  | cut -f4- | awk '{ gsub("\001", "\n"); print "---"; print }' \
  | sed -E "s#^([[:space:]]+image:[[:space:]]*)ghcr\.io/capmox-rs/capmox-controller:[^[:space:]]+#\1${image}#" \
  > "$repo/infrastructure-components.yaml"

grep -q "image: ${image}\$" "$repo/infrastructure-components.yaml" \
  || { echo "release: no manager image line was set to $image" >&2; exit 1; }
cp metadata.yaml "$repo/metadata.yaml"
cp templates/cluster-template*.yaml templates/clusterclass-*.yaml "$repo/"
echo "release: wrote $repo/ ($(ls "$repo" | paste -sd ' '))"
