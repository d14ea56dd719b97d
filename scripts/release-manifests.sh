#!/usr/bin/env sh
# Assembles out/infrastructure-components.yaml (the clusterctl components file)
# from the files listed in config/release/components.txt, in that order, and
# copies metadata.yaml and the cluster templates beside it, as a clusterctl
# local repository expects: out/infrastructure-proxmox/<version>/...
set -eu
cd "$(dirname "$0")/.."
version="${VERSION:-v0.1.0}"
out="${OUT_DIR:-out}"
repo="$out/infrastructure-proxmox/$version"
mkdir -p "$repo"
target="$out/infrastructure-components.yaml"
: > "$target"
grep -v '^#' config/release/components.txt | grep -v '^[[:space:]]*$' | while read -r f; do
  [ -f "$f" ] || { echo "release-manifests: missing $f (run make generate)" >&2; exit 1; }
  printf -- '---\n' >> "$target"
  # drop the leading comments, blank lines and document marker of each file
  awk 'started == 0 && (/^---[ \t]*$/ || /^#/ || /^[ \t]*$/) { next } { started = 1; print }' "$f" >> "$target"
done
cp "$target" "$repo/infrastructure-components.yaml"
cp metadata.yaml "$repo/metadata.yaml"
cp templates/cluster-template*.yaml "$repo/"
echo "wrote $target and $repo/"
