#!/usr/bin/env bash
# Run the whole suite against a driver server and prove it ends exactly as the in-process run.
#
#   ci/http-driver.sh [PROFILE]   build, run in process, start the reference server, run over
#                                 HTTP, compare scenario by scenario; stop the server
#
# The results of both runs go to target/ci/{in-process,http}.json; the server's log to
# target/ci/reference-server.log. Exit 0 only when both runs end the same way and the HTTP run
# passed. An implementer can reuse the second half for their own server: start it, then run
# `rewind-conformance run --sut http://HOST:PORT --json FILE`.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/ci
mkdir -p "$out"
harness=target/debug/rewind-conformance
server_bin=target/debug/rewind-reference-server

cargo build --bin rewind-conformance -p rewind-conformance
cargo build --bin rewind-reference-server -p rewind-reference

echo "http-driver: the suite in process"
"$harness" run --json "$out/in-process.json" "$@" >"$out/in-process.log" 2>&1 || {
    tail -40 "$out/in-process.log"; echo "http-driver: the in-process run failed"; exit 1; }
tail -1 "$out/in-process.log"

"$server_bin" --listen 127.0.0.1:0 >"$out/reference-server.out" 2>"$out/reference-server.log" &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true' EXIT
url=""
for _ in $(seq 1 100); do
    url=$(sed -n 's/^listening on //p' "$out/reference-server.out")
    [ -n "$url" ] && break
    kill -0 "$server" 2>/dev/null || { cat "$out/reference-server.log"; echo "http-driver: the server died"; exit 1; }
    sleep 0.1
done
[ -n "$url" ] || { echo "http-driver: the server did not say where it listens"; exit 1; }
echo "http-driver: smoke checks against $url"
"$harness" smoke --sut "$url"
echo "http-driver: the suite over HTTP against $url"
started=$(date +%s)
status=0
"$harness" run --sut "$url" --json "$out/http.json" "$@" >"$out/http.log" 2>&1 || status=$?
tail -1 "$out/http.log"
echo "http-driver: HTTP run took $(( $(date +%s) - started ))s"
if [ "$status" -ne 0 ]; then
    tail -60 "$out/http.log"; echo "http-driver: the HTTP run exited $status"; exit 1
fi
"$harness" compare "$out/in-process.json" "$out/http.json"
