#!/usr/bin/env bash
# The browser client tier (features/client.feature): the reference browser client in Debian's
# headless Chromium, driven over WebDriver, against the reference implementation in process and
# then over the driver protocol (the reference server), each run saving its screenshots.
#
#   ci/browser-client.sh [run options...]
#
# Needs `chromium` and `chromium-driver` (Debian). Reports go to target/ci/client-in-process/
# and target/ci/client-http/ (`--report-dir`: screenshots under client/<scenario>/). The harness
# is built with the features in REWIND_CI_FEATURES (default `browser`; it must include it), so
# that a CI job reuses the build its other steps made. REWIND_CLIENT_IN_PROCESS=no leaves the
# in-process run out, for a job whose other run already took the client scenarios in process.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/ci
mkdir -p "$out"
harness=target/debug/rewind-conformance

# No `-p`: shared dependencies' features are then resolved over the workspace's default members,
# as `cargo test` resolves them, so this reuses that build instead of compiling them again.
cargo build --features "${REWIND_CI_FEATURES:-browser}" --bin rewind-conformance \
    --bin rewind-reference-server

if [ "${REWIND_CLIENT_IN_PROCESS:-yes}" != no ]; then
    echo "browser-client: the client scenarios in process"
    started=$(date +%s)
    "$harness" run --tags @client --report-dir "$out/client-in-process" "$@"
    echo "browser-client: in process in $(( $(date +%s) - started ))s"
fi

started=$(date +%s)
ci/run-against-server.sh client-http --tags @client --report-dir "$out/client-http" "$@" -- \
    target/debug/rewind-reference-server --listen 127.0.0.1:0
echo "browser-client: over the driver protocol in $(( $(date +%s) - started ))s"
