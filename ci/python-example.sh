#!/usr/bin/env bash
# Run the whole suite against the Python example implementation (protocol/examples/python),
# with the capability profile it declares: a second implementation, written from the spec and
# the protocol alone, must pass.
set -euo pipefail
cd "$(dirname "$0")/.."
example=protocol/examples/python
if ! python3 -c 'import psycopg' 2>/dev/null; then
    echo "python-example: installing $(tr '\n' ' ' < "$example/requirements.txt")"
    python3 -m pip install --quiet --disable-pip-version-check -r "$example/requirements.txt"
fi
# No `-p`: shared dependencies' features are then resolved over the workspace's default members,
# as `cargo test` resolves them, so this reuses that build instead of compiling them again.
cargo build --bin rewind-conformance
ci/run-against-server.sh python-example --profile "$example/profile.yaml" -- \
    python3 "$example/adapter.py" --listen 127.0.0.1:0
# The generated cases too: the spec model must pass a second implementation, not just the reference.
REWIND_COMMAND=fuzz ci/run-against-server.sh python-example-fuzz --profile "$example/profile.yaml" \
    --cases "${REWIND_FUZZ_CASES:-200}" --seed "${REWIND_FUZZ_SEED:-0xc1}" \
    --out target/ci/python-example-fuzz -- \
    python3 "$example/adapter.py" --listen 127.0.0.1:0
