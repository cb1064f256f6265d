#!/usr/bin/env bash
# Generated conversations judged by the spec model: a bounded, seeded slice in process, and the
# same cases over the driver protocol against the reference server in its alternative variant
# (the other reading wherever the ambiguity register accepts several, which the spec model must
# accept too).
#
#   ci/fuzz.sh                       # REWIND_FUZZ_CASES (200) cases of REWIND_FUZZ_SEED (0xc1)
#
# Cases and shrunk failures go to target/ci/fuzz; the HTTP run's output to
# target/ci/fuzz-http-run.log. Exit 0 only when every case passed both ways.
set -euo pipefail
cd "$(dirname "$0")/.."
cases=${REWIND_FUZZ_CASES:-200}
seed=${REWIND_FUZZ_SEED:-0xc1}
# No `-p`: shared dependencies' features are then resolved over the workspace's default members,
# as `cargo test` resolves them, so this reuses that build instead of compiling them again.
cargo build --bin rewind-conformance --bin rewind-reference-server
echo "fuzz: $cases cases of seed $seed in process"
target/debug/rewind-conformance fuzz --cases "$cases" --seed "$seed" --out target/ci/fuzz
echo "fuzz: the same cases over the driver protocol (the reference server, alternative variant)"
REWIND_COMMAND=fuzz ci/run-against-server.sh fuzz-http --cases "$cases" --seed "$seed" \
    --out target/ci/fuzz-http -- \
    target/debug/rewind-reference-server --listen 127.0.0.1:0 --variant alternative
