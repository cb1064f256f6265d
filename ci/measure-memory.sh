#!/usr/bin/env bash
# Peak memory of one run of the harness, everything it starts included.
#
#   ci/measure-memory.sh [HARNESS] [run options...]
#
# Runs `HARNESS run [options]` (default: target/release/rewind-conformance, the whole suite) and
# samples, every 100 ms while it runs:
#   - the proportional set size (PSS) of the harness and every process below it (the mock
#     runtimes, the programs it starts);
#   - the PSS of the embedded PostgreSQL cluster's processes (the postmaster detaches from the
#     harness; it is found by the cluster's directory in its command line, which carries the
#     harness's process id, and its backends are its children), shared buffers counted once, as
#     PSS divides shared pages among their users;
#   - the files of that cluster when it lives in memory (`/dev/shm`: the data directory is
#     memory there).
# Prints the peak of each and of their sum. Linux only (reads /proc).
set -euo pipefail
cd "$(dirname "$0")/.."
harness=${1:-target/release/rewind-conformance}
if [ $# -gt 0 ]; then shift; fi
[ -x "$harness" ] || { echo "no harness at $harness (cargo build --release)" >&2; exit 2; }

pss_kb() { # PSS of the given pids, in kB
    local total=0 pid kb
    for pid in "$@"; do
        kb=$(awk '/^Pss:/ { print $2; exit }' "/proc/$pid/smaps_rollup" 2>/dev/null || true)
        total=$((total + ${kb:-0}))
    done
    echo "$total"
}
descendants() { # the pid and every process below it
    local pid=$1 child
    echo "$pid"
    for child in $(cat "/proc/$pid/task/"*/children 2>/dev/null); do
        descendants "$child"
    done
}

"$harness" run "$@" >/dev/null 2>&1 &
run=$!
peak_harness=0 peak_pg=0 peak_files=0 peak_sum=0
while kill -0 "$run" 2>/dev/null; do
    mapfile -t tree < <(descendants "$run")
    harness_kb=$(pss_kb "${tree[@]}")
    mapfile -t pg < <(
        for postmaster in $(grep -l "rewind-pg-$run-" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
            [ "$postmaster" = "$run" ] || descendants "$postmaster"
        done | sort -u
    )
    pg_kb=$(pss_kb "${pg[@]}")
    files_kb=0
    for dir in /dev/shm/rewind-pg-"$run"-*; do
        kb=$(du -sk "$dir" 2>/dev/null | cut -f1 || true)
        files_kb=$((files_kb + ${kb:-0}))
    done
    sum=$((harness_kb + pg_kb + files_kb))
    [ "$harness_kb" -gt "$peak_harness" ] && peak_harness=$harness_kb
    [ "$pg_kb" -gt "$peak_pg" ] && peak_pg=$pg_kb
    [ "$files_kb" -gt "$peak_files" ] && peak_files=$files_kb
    [ "$sum" -gt "$peak_sum" ] && peak_sum=$sum
    sleep 0.1
done
status=0
wait "$run" || status=$?
mb() { awk -v k="$1" 'BEGIN { printf "%.0f MB", k / 1024 }'; }
echo "run exited $status"
echo "peak memory: harness and its children $(mb "$peak_harness"), PostgreSQL processes $(mb "$peak_pg"), cluster files in memory $(mb "$peak_files"); all together at once $(mb "$peak_sum")"
