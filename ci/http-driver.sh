#!/usr/bin/env bash
# Run the whole suite against the reference server in its alternative variant (spec-correct,
# but taking the other reading wherever the ambiguity register accepts several) and prove it
# ends exactly as the in-process run of the recommended variant, scenario for scenario, while
# taking those other readings (ci/precision-check.py). This proves both the HTTP driver path and
# the suite's precision.
#
#   ci/http-driver.sh [run options...]
#
# Results go to target/ci/{in-process,reference-alternative}.json. When target/ci/in-process.json is
# already there and REWIND_REUSE_IN_PROCESS=1 (`.ci/run` writes it during `cargo test`), the
# in-process run is not repeated. Exit 0 only when the HTTP run passed and both runs ended the
# same way.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/ci
mkdir -p "$out"
harness=target/debug/rewind-conformance

# No `-p`: shared dependencies' features are then resolved over the workspace's default members,
# as `cargo test` resolves them, so this reuses that build instead of compiling them again.
cargo build --bin rewind-conformance --bin rewind-reference-server

if [ "${REWIND_REUSE_IN_PROCESS:-}" = 1 ] && [ -s "$out/in-process.json" ]; then
    echo "http-driver: comparing with the in-process results of \`cargo test\`"
else
    echo "http-driver: the suite in process"
    "$harness" run --json "$out/in-process.json" "$@" >"$out/in-process.log" 2>&1 || {
        tail -40 "$out/in-process.log"; echo "http-driver: the in-process run failed"; exit 1; }
    tail -1 "$out/in-process.log"
fi

ci/run-against-server.sh reference-alternative "$@" -- \
    target/debug/rewind-reference-server --listen 127.0.0.1:0 --variant alternative
"$harness" compare "$out/in-process.json" "$out/reference-alternative.json"
ci/precision-check.py "$out/in-process.json" "$out/reference-alternative.json"
