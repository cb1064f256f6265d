#!/usr/bin/env bash
# Run the real-runtime tier: the mocks and the reference implementation against pinned releases
# of the real runtimes (Codex 0.155.1 and 0.171.0, Claude Code 2.1.197 and 2.1.332, OpenCode
# 1.18.33 and 1.18.34), run offline against fake model APIs on loopback.
#
#   ci/real-runtimes.sh [extra arguments for the test binary, e.g. a test name filter]
#
# Step 1 installs the releases from the npm registry (needs Node.js, npm and the network the
# first time only) into the cache: $REWIND_REAL_RUNTIMES_DIR, else
# ~/.cache/rewind-conformance/real-runtimes. An installed release is reused; a CI cache should
# keep that directory (about 1.8 GB).
# Step 2 runs `cargo test --features real-runtimes --test real_runtimes`, which needs no network.
# Step 3 runs the real-runtime scenarios of the suite on the pinned releases (`run --runtimes
# real`) through the reference implementation: every runtime recovery scenario in process, and
# the release gate (end-to-end.feature) over the driver protocol against the reference server.
# REWIND_REAL_FEATURES overrides the in-process selection. REWIND_REAL_HTTP_GATE=no leaves the
# release gate out (`.ci/run` runs it over the driver protocol with the runtimes on a second
# host instead).
# REWIND_REAL_RELEASES=latest (default: pinned) makes steps 1 and 2 check the newest release of
# each runtime in place of the newest pinned one, both steps asking the npm registry which it is
# (the older pinned releases are checked either way; step 3 stays on the pinned ones); a
# difference from the mock names the release and the call.
# The wall time of each step and of the whole run is printed at the end.
#
# Exit status: that of the failing step (0 when all passed).
set -euo pipefail

case "${1:-}" in
-h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac

say() { printf 'real-runtimes: %s\n' "$*" >&2; }

cd "$(dirname "$0")/.."
command -v npm >/dev/null || { say "error: npm is needed to install the real runtimes"; exit 2; }

# The cargo features of every build here: `real-runtimes`, plus whatever the caller builds the
# harness with anyway (`REWIND_CI_FEATURES`, which must name it), so that no step rebuilds it.
cargo_features=${REWIND_CI_FEATURES:-real-runtimes}
case ",$cargo_features," in
*,real-runtimes,*) ;;
*) say "error: REWIND_CI_FEATURES ($cargo_features) must include real-runtimes"; exit 2 ;;
esac

start=$(date +%s)
say "building the tier"
cargo test --features "$cargo_features" --test real_runtimes --no-run

say "step 1: installing the pinned runtimes (cached)"
install_start=$(date +%s)
cargo test --features "$cargo_features" --test real_runtimes -- --exact \
    install::every_pinned_release_is_installed --nocapture
install_end=$(date +%s)

say "step 2: running the tier"
status=0
# Four tests at a time: they wait on the runtimes' processes and the fake models, about one CPU
# busy with two (55 s on two cores, 33 s with four, no less with eight).
RUST_TEST_THREADS=${RUST_TEST_THREADS:-4} \
    cargo test --features "$cargo_features" --test real_runtimes -- "$@" || status=$?
tier_end=$(date +%s)

say "step 3: the real-runtime scenarios through the reference"
# No `-p`: shared dependencies' features are then resolved over the workspace's default members,
# as `cargo test` resolves them, so this reuses that build instead of compiling them again.
cargo build -q --features "$cargo_features" --bin rewind-conformance --bin rewind-reference-server
harness=target/debug/rewind-conformance
mkdir -p target/ci
features=${REWIND_REAL_FEATURES:-features/runtime-recovery.feature}
# One scenario per CPU: each one's real runtimes keep a CPU busy, and each scenario directory
# running at once seeds the fixture's sessions through them once (runtime-recovery.feature on
# two cores: 28 s at -c 2, 32 s at 3, 38 s at 4).
concurrency=$(nproc)
for feature in $features; do
    say "  in process: $feature"
    "$harness" run --runtimes real --suite . --features "$feature" -c "$concurrency" \
        --json "target/ci/real-$(basename "$feature" .feature).json" \
        >"target/ci/real-$(basename "$feature" .feature).log" 2>&1 || {
        tail -60 "target/ci/real-$(basename "$feature" .feature).log"; status=1; }
    tail -1 "target/ci/real-$(basename "$feature" .feature).log"
done
if [ "${REWIND_REAL_HTTP_GATE:-yes}" != no ]; then
    say "  over HTTP: features/end-to-end.feature against the reference server"
    ci/run-against-server.sh real-runtimes-http --runtimes real --suite . \
        --features features/end-to-end.feature -c "$concurrency" -- \
        target/debug/rewind-reference-server --listen 127.0.0.1:0 || status=1
fi
end=$(date +%s)

say "install step: $((install_end - install_start)) s; tier: $((tier_end - install_end)) s; scenarios: $((end - tier_end)) s; wall time: $((end - start)) s"
exit "$status"
