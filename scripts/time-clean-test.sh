#!/usr/bin/env bash
# `make time-clean-test RECORD`: how long `make test` takes from a fresh
# clone of HEAD with an empty target directory (the build and every test),
# as a new user or CI would run it. Writes RECORD, a JSON object that
# `make bench` reports in its goal table (test/e2e/src/bench/clean_test.rs),
# and the run's output beside it (RECORD with `.log` for `.json`).
#
# Only what is committed is measured: uncommitted changes are not in the
# clone (a warning says so). Run it on an otherwise idle machine: the build
# takes both cores.
set -euo pipefail
record=${1:?usage: time-clean-test.sh RECORD.json}
case $record in /*) ;; *) record=$PWD/$record ;; esac
log=${record%.json}.log
repo=$(git rev-parse --show-toplevel)
commit=$(git -C "$repo" rev-parse --short HEAD)
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
  echo "time-clean-test: uncommitted changes are not measured; this measures commit $commit" >&2
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/capmox-clean-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The run's output goes beside the record only when the record is written:
# an interrupted run leaves the last record and its log as they were.
run_log=$work/make-test.log
git clone -q --no-hardlinks "$repo" "$work/src"
git -C "$work/src" checkout -q "$commit"
mkdir -p "$(dirname "$record")"
echo "time-clean-test: make test in a fresh clone of $commit ($work), output in $run_log, then in $log" >&2
start=$(date +%s)
rc=0
# The clone's own environment, as CI gives it: no target directory or
# compiler wrapper of the caller's.
env -u CARGO_TARGET_DIR -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS -u MAKEFLAGS -u MAKELEVEL \
  CARGO_TARGET_DIR="$work/target" make -C "$work/src" test >"$run_log" 2>&1 || rc=$?
seconds=$(( $(date +%s) - start ))
summary=$(sed -n 's/^ *Summary \[[^]]*\] *//p' "$run_log" | tail -n 1 | tr -d '"\\')
finished=$(date -u '+%Y-%m-%d %H:%M UTC')
printf '{"commit":"%s","seconds":%d,"exit_code":%d,"finished":"%s","cores":%d,"summary":"%s"}\n' \
  "$commit" "$seconds" "$rc" "$finished" "$(nproc)" "$summary" >"$record"
cp "$run_log" "$log"
echo "time-clean-test: $commit: make test exited $rc after ${seconds} s${summary:+ ($summary)}; wrote $record" >&2
exit "$rc"
