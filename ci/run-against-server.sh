#!/usr/bin/env bash
# Start a driver server, smoke-check it, run the suite against it, stop it.
#
#   ci/run-against-server.sh NAME [run options...] -- SERVER COMMAND...
#
# With REWIND_COMMAND=fuzz the generated cases run instead of the suite (the options are then
# the `fuzz` command's).
#
# The server command must print `listening on http://HOST:PORT` on stdout once it accepts
# connections (every driver server of this repository does; port 0 lets it pick a free one).
# Logs and results go to target/ci/NAME.{out,log,json}, the suite's output to
# target/ci/NAME-run.log. Exits with the suite's exit code (0: every scenario passed).
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1; shift
run_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do run_args+=("$1"); shift; done
[ "${1:-}" = "--" ] || { echo "usage: $0 NAME [run options...] -- SERVER COMMAND..." >&2; exit 2; }
shift
out=target/ci
mkdir -p "$out"
harness=target/debug/rewind-conformance
[ -x "$harness" ] || cargo build --bin rewind-conformance

# Made empty first: the server's shell opens them only once it runs, and the loop below may read
# before that (a busy machine has shown it).
: >"$out/$name.out"
: >"$out/$name.log"
"$@" >"$out/$name.out" 2>"$out/$name.log" &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true' EXIT
url=""
for _ in $(seq 1 150); do
    url=$(sed -n 's/^listening on //p' "$out/$name.out")
    [ -n "$url" ] && break
    kill -0 "$server" 2>/dev/null || { cat "$out/$name.log"; echo "$name: the server died"; exit 1; }
    sleep 0.1
done
[ -n "$url" ] || { echo "$name: the server did not say where it listens"; exit 1; }
echo "$name: smoke checks against $url"
"$harness" smoke --sut "$url"
echo "$name: the suite against $url"
started=$(date +%s)
status=0
case "${REWIND_COMMAND:-run}" in
    run) "$harness" run --sut "$url" --json "$out/$name.json" "${run_args[@]}" >"$out/$name-run.log" 2>&1 || status=$? ;;
    fuzz) "$harness" fuzz --sut "$url" "${run_args[@]}" >"$out/$name-run.log" 2>&1 || status=$? ;;
    *) echo "$name: REWIND_COMMAND must be run or fuzz"; exit 2 ;;
esac
tail -1 "$out/$name-run.log"
echo "$name: the run took $(( $(date +%s) - started ))s and exited $status"
[ "$status" -eq 0 ] || tail -60 "$out/$name-run.log"
exit "$status"
