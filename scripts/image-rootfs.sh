#!/usr/bin/env bash
# Lays out the root filesystem of the manager's image in ROOTFS (an empty or
# absent directory): the C runtime the binary links against and the CA
# certificates, unpacked from Debian's own packages (apt-get download +
# dpkg-deb, no container engine, no root needed), an /etc/passwd with the
# non-root user 65532 (nonroot) and no shell, and the binary as
# /capmox-controller. The same layout distroless "cc" images have; both
# `make image` (scripts/image.sh) and the Dockerfile use this script, so the
# two images are laid out alike.
#
# Usage: scripts/image-rootfs.sh ROOTFS BINARY
# Env:   DEB_CACHE  folder for the downloaded .deb files (default: ROOTFS/../debs);
#                   a package already there is not downloaded again.
set -euo pipefail
rootfs="${1:?usage: image-rootfs.sh ROOTFS BINARY}"
binary="${2:?usage: image-rootfs.sh ROOTFS BINARY}"
debs="${DEB_CACHE:-$(dirname "$rootfs")/debs}"
# The binary is linked against glibc (ldd: libc, libm, libgcc_s, the loader).
packages=(libc6 libgcc-s1 ca-certificates)

[ -x "$binary" ] || { echo "image-rootfs: $binary is not an executable file" >&2; exit 1; }
if [ -e "$rootfs" ] && [ -n "$(ls -A "$rootfs")" ]; then
  echo "image-rootfs: $rootfs is not empty" >&2; exit 1
fi
mkdir -p "$rootfs" "$debs"
debs="$(cd "$debs" && pwd)"

for p in "${packages[@]}"; do
  if ! compgen -G "$debs/${p}_*.deb" >/dev/null; then
    if ! (cd "$debs" && apt-get download "$p" 2>/dev/null); then
      if [ "$(id -u)" = 0 ]; then
        # A fresh Debian machine has no package lists yet.
        apt-get update -qq
        (cd "$debs" && apt-get download "$p")
      else
        echo "image-rootfs: apt-get download $p failed (run apt-get update as root once)" >&2
        exit 1
      fi
    fi
  fi
done
for p in "${packages[@]}"; do
  deb="$(compgen -G "$debs/${p}_*.deb" | sort -V | tail -n 1)"
  dpkg-deb -x "$deb" "$rootfs"
done
# Documentation and packaging metadata have no use at run time.
rm -rf "$rootfs/usr/share/doc" "$rootfs/usr/share/man" "$rootfs/usr/share/lintian" \
       "$rootfs/usr/share/info"

# CA bundle: what update-ca-certificates (a maintainer script, not run by
# dpkg-deb -x) writes, the certificates concatenated in name order.
mkdir -p "$rootfs/etc/ssl/certs"
find "$rootfs/usr/share/ca-certificates" -name '*.crt' -print0 | sort -z \
  | xargs -0 cat > "$rootfs/etc/ssl/certs/ca-certificates.crt"

# Users and groups: root and nonroot (65532), neither with a shell.
cat > "$rootfs/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
PASSWD
cat > "$rootfs/etc/group" <<'GROUP'
root:x:0:
nogroup:x:65534:
nonroot:x:65532:
GROUP
cat > "$rootfs/etc/nsswitch.conf" <<'NSS'
passwd: files
group: files
hosts: files dns
NSS
mkdir -p "$rootfs/root" "$rootfs/home/nonroot" "$rootfs/tmp"
chmod 0700 "$rootfs/root"
chmod 1777 "$rootfs/tmp"

install -m 0755 "$binary" "$rootfs/capmox-controller"
echo "image-rootfs: laid out $rootfs ($(du -sh "$rootfs" | cut -f1))"
