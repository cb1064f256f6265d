#!/usr/bin/env bash
# Run the whole suite against the reference server and prove it ends exactly as the in-process
# run, scenario for scenario.
#
#   ci/http-driver.sh [run options...]
#
# Results go to target/ci/{in-process,reference-server}.json. Exit 0 only when the HTTP run
# passed and both runs ended the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/ci
mkdir -p "$out"
harness=target/debug/rewind-conformance

cargo build --bin rewind-conformance -p rewind-conformance
cargo build --bin rewind-reference-server -p rewind-reference

echo "http-driver: the suite in process"
"$harness" run --json "$out/in-process.json" "$@" >"$out/in-process.log" 2>&1 || {
    tail -40 "$out/in-process.log"; echo "http-driver: the in-process run failed"; exit 1; }
tail -1 "$out/in-process.log"

ci/run-against-server.sh reference-server "$@" -- \
    target/debug/rewind-reference-server --listen 127.0.0.1:0
"$harness" compare "$out/in-process.json" "$out/reference-server.json"
