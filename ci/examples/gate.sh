#!/bin/sh
# Gate an implementation on the rewind-conformance suite, in any CI: start the implementation's
# driver-protocol v1 server, wait for its handshake, smoke-check it, run the suite in shards
# (one after another, or all at once; balanced by the durations of the previous gate run when
# there is one), merge the shards' results into the reports of one run (`merge`), and exit with
# the worst exit code of the shards and the merge (0: every shard passed; see the README's exit
# codes: 1 conformance failures, 2 bad usage, 3 the harness could not run or the shards do not
# merge, 4 protocol violations). ci/examples/github-actions.yml is the same for GitHub Actions.
#
#   SUT_START='./your-server --listen 127.0.0.1:8080' ci/examples/gate.sh [-- more run options]
#
# Settings (environment variables):
#   SUT_START     required: the command that starts your server (run with `sh -c` from the
#                 directory gate.sh was started in, on this machine, as this user: the harness
#                 hands the server local program paths and directories). PLACEHOLDER: yours.
#   SUT_URL       where it answers (default http://127.0.0.1:8080); the handshake is
#                 GET $SUT_URL/rewind-driver
#   SUT_WAIT      seconds to wait for the handshake (default 60)
#   PROFILE       your capability profile file (--profile); default: everything declared
#   EXPECTATIONS  your expectations file (--expectations); optional
#   REWIND_DATABASE_URL  a PostgreSQL server whose role has CREATEDB (--database-url); without
#                 it every shard starts its own throwaway cluster from the local binaries
#   SHARDS        how many shards (default 4)
#   PARALLEL      1 runs the shards at once, 0 one after another (default 0)
#   REPORT_DIR    where the reports go (default reports): the merged run's (junit.xml,
#                 results.json, summary.md, rules.html, fault-matrix.md, compat-matrix.md, and
#                 merge.log), one directory per shard (shard-I/: the same reports, and run.log)
#                 and the server's log (server.log)
#   DURATIONS     a previous run's results, whose scenario durations balance the shards by time
#                 (--durations); default $REPORT_DIR/durations.json, which every gate run whose
#                 shards merged leaves there (a copy of the merged results.json); without the
#                 file the shards are balanced by count
#   HARNESS_DIR   the rewind-conformance checkout (default: the one this script is in)
#   HARNESS       the harness binary (default $HARNESS_DIR/target/release/rewind-conformance,
#                 built with cargo when missing)
# Arguments after `--` are passed to every shard's `run` (e.g. `-- --request-timeout 60`).
set -eu

here=$(pwd)
script_dir=$(cd "$(dirname "$0")" && pwd)
HARNESS_DIR=${HARNESS_DIR:-$(cd "$script_dir/../.." && pwd)}
HARNESS=${HARNESS:-$HARNESS_DIR/target/release/rewind-conformance}
SUT_URL=${SUT_URL:-http://127.0.0.1:8080}
SUT_WAIT=${SUT_WAIT:-60}
SHARDS=${SHARDS:-4}
PARALLEL=${PARALLEL:-0}
REPORT_DIR=${REPORT_DIR:-reports}
DURATIONS=${DURATIONS:-}

say() { printf 'gate: %s\n' "$*"; }
die() { printf 'gate: %s\n' "$*" >&2; exit "${2:-2}"; }

[ "${1:-}" = "--" ] && shift
[ $# -eq 0 ] || [ "${1#-}" != "$1" ] || die "usage: SUT_START='...' $0 [-- run options]"
[ -n "${SUT_START:-}" ] || die "set SUT_START to the command that starts your server"
case $SHARDS in '' | *[!0-9]* | 0) die "SHARDS must be a positive number, not \`$SHARDS\`" ;; esac
command -v curl >/dev/null 2>&1 || die "curl is needed to wait for the server's handshake"

mkdir -p "$REPORT_DIR"
REPORT_DIR=$(cd "$REPORT_DIR" && pwd)
# A file setting as an absolute path.
absolute() {
    case $2 in /*) file=$2 ;; *) file=$here/$2 ;; esac
    [ -f "$file" ] || die "$1: no file \`$file\`"
    printf '%s' "$file"
}
[ -z "${PROFILE:-}" ] || PROFILE=$(absolute PROFILE "$PROFILE")
[ -z "${EXPECTATIONS:-}" ] || EXPECTATIONS=$(absolute EXPECTATIONS "$EXPECTATIONS")
if [ -n "$DURATIONS" ]; then
    DURATIONS=$(absolute DURATIONS "$DURATIONS")
elif [ -f "$REPORT_DIR/durations.json" ]; then
    DURATIONS=$REPORT_DIR/durations.json
fi

if [ ! -x "$HARNESS" ]; then
    say "building the harness in $HARNESS_DIR"
    (cd "$HARNESS_DIR" && cargo build --release --locked -p rewind-conformance --bin rewind-conformance)
fi

# A process and all its descendants (POSIX `ps`), so that stopping `sh -c "$SUT_START"` or a
# shard stops what it started.
# shellcheck disable=SC2317 # called by the EXIT trap
tree() {
    printf '%s\n' "$1"
    for child in $(ps -A -o pid= -o ppid= | awk -v parent="$1" '$2 == parent { print $1 }'); do
        tree "$child"
    done
}
server=""
shard_pids=""
# shellcheck disable=SC2317 # called by the EXIT trap
stop() {
    pids=""
    for pid in $shard_pids $server; do
        pids="$pids $(tree "$pid")"
    done
    # shellcheck disable=SC2086 # a list of process ids
    [ -z "${pids# }" ] || kill -TERM $pids 2>/dev/null || true
    for pid in $shard_pids $server; do
        wait "$pid" 2>/dev/null || true
    done
}
trap 'stop' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

say "starting the server: $SUT_START"
sh -c "$SUT_START" >"$REPORT_DIR/server.log" 2>&1 &
server=$!
waited=0
until curl -fsS "$SUT_URL/rewind-driver" >/dev/null 2>&1; do
    if ! kill -0 "$server" 2>/dev/null; then
        cat "$REPORT_DIR/server.log" >&2
        die "the server exited before answering at $SUT_URL" 3
    fi
    if [ "$waited" -ge "$SUT_WAIT" ]; then
        cat "$REPORT_DIR/server.log" >&2
        die "nothing answered GET $SUT_URL/rewind-driver within $SUT_WAIT s" 3
    fi
    sleep 1
    waited=$((waited + 1))
done
say "the server answers at $SUT_URL"

# The harness carries the whole suite (features, fixtures, catalog, register) in its binary: it
# runs from any directory.
if [ -n "${REWIND_DATABASE_URL:-}" ]; then
    "$HARNESS" smoke --sut "$SUT_URL" --database-url "$REWIND_DATABASE_URL"
else
    "$HARNESS" smoke --sut "$SUT_URL"
fi

# One shard: `run --shard I/N`, its reports in shard-I/, its output in shard-I/run.log, its exit
# code in shard-I/exit-code.
run_shard() {
    shard=$1
    shift
    dir=$REPORT_DIR/shard-$shard
    mkdir -p "$dir"
    # A shard that writes no results this time must not leave the last run's to merge.
    rm -f "$dir/results.json"
    set -- run --sut "$SUT_URL" --shard "$shard/$SHARDS" --report-dir "$dir/" "$@"
    [ -z "$DURATIONS" ] || set -- "$@" --durations "$DURATIONS"
    [ -z "${PROFILE:-}" ] || set -- "$@" --profile "$PROFILE"
    [ -z "${EXPECTATIONS:-}" ] || set -- "$@" --expectations "$EXPECTATIONS"
    [ -z "${REWIND_DATABASE_URL:-}" ] || set -- "$@" --database-url "$REWIND_DATABASE_URL"
    status=0
    "$HARNESS" "$@" >"$dir/run.log" 2>&1 || status=$?
    echo "$status" >"$dir/exit-code"
    return "$status"
}

if [ -n "$DURATIONS" ]; then
    say "balancing the shards by the durations in $DURATIONS"
else
    say "no durations of an earlier run: balancing the shards by count"
fi
i=1
while [ "$i" -le "$SHARDS" ]; do
    if [ "$PARALLEL" = 1 ]; then
        say "shard $i/$SHARDS started"
        run_shard "$i" "$@" &
        shard_pids="$shard_pids $!"
    else
        say "shard $i/$SHARDS"
        run_shard "$i" "$@" || true
        tail -n 1 "$REPORT_DIR/shard-$i/run.log"
    fi
    i=$((i + 1))
done
for pid in $shard_pids; do
    wait "$pid" || true
done
shard_pids=""

# Every shard's exit code, then the shards merged into one run's reports; the worst exit code.
worst=0
set -- merge --report-dir "$REPORT_DIR"
i=1
while [ "$i" -le "$SHARDS" ]; do
    dir=$REPORT_DIR/shard-$i
    status=$(cat "$dir/exit-code" 2>/dev/null || echo 3)
    say "shard $i/$SHARDS exited $status: $(tail -n 1 "$dir/run.log" 2>/dev/null)"
    [ "$status" -le "$worst" ] || worst=$status
    set -- "$@" "$dir/results.json"
    i=$((i + 1))
done
merged=0
"$HARNESS" "$@" >"$REPORT_DIR/merge.log" 2>&1 || merged=$?
tail -n 1 "$REPORT_DIR/merge.log"
say "merge exited $merged (see $REPORT_DIR/merge.log)"
[ "$merged" -le "$worst" ] || worst=$merged
if [ "$merged" -eq 0 ] || [ "$merged" -eq 1 ] || [ "$merged" -eq 4 ]; then
    # The merged run's durations balance the next gate run's shards.
    cp "$REPORT_DIR/results.json" "$REPORT_DIR/durations.json"
else
    {
        printf '## Rewind conformance: the shards did not merge (exit code %s)\n\n```\n' "$merged"
        cat "$REPORT_DIR/merge.log"
        printf '```\n'
    } >"$REPORT_DIR/summary.md"
fi
say "reports in $REPORT_DIR; exit code $worst"
exit "$worst"
