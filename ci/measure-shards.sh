#!/usr/bin/env bash
# Measures what splitting the suite into shards buys on this machine: the whole run against each
# of its shards run alone, one after another, as if each shard had a machine of its own (every
# run starts its own PostgreSQL, as a CI job does). Runs alternate (odd rounds: whole run first,
# even rounds: shards first) so that the noise of a shared machine hits both alike; the figures
# are medians over the rounds.
#
#   ci/measure-shards.sh [-- more run options]        # e.g. -- --tags '@bad-read'
#
# Settings (environment variables):
#   HARNESS  the harness binary (default target/release/rewind-conformance, built with
#            `cargo build --release --locked` when missing)
#   SHARDS   how many shards (default 4)
#   ROUNDS   how many rounds (default 5)
#   OUT      where the runs' logs and results go (default target/measure-shards)
#
# A warm-up whole run comes first (not counted): its results.json is the `--durations` file that
# balances the shards, as the previous run's results do in CI. At the end the last round's shards
# are merged (`merge`) and compared with its whole run (`compare`): the same scenarios, the same
# verdicts.
#
# Prints, per round and as medians: the whole run's wall time, each shard's, the slowest shard's,
# their sum, the ratio slowest shard / whole run (what a split run waits, against one machine)
# and the ratio sum / whole run (the machine time a split run costs, against one machine); and
# the median 1-minute load average when the runs started (other work on a shared machine slows
# the whole run, with 8 scenarios at once, more than a shard's).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
HARNESS=${HARNESS:-$root/target/release/rewind-conformance}
SHARDS=${SHARDS:-4}
ROUNDS=${ROUNDS:-5}
OUT=${OUT:-$root/target/measure-shards}

die() {
    printf 'measure-shards: %s\n' "$*" >&2
    exit 2
}
[ "${1:-}" = "--" ] && shift
case $SHARDS in '' | *[!0-9]* | 0 | 1) die "SHARDS must be a number from 2, not \`$SHARDS\`" ;; esac
case $ROUNDS in '' | *[!0-9]* | 0) die "ROUNDS must be a positive number, not \`$ROUNDS\`" ;; esac

if [ ! -x "$HARNESS" ]; then
    echo "building the harness (release)" >&2
    (cd "$root" && cargo build --release --locked -p rewind-conformance --bin rewind-conformance)
fi
rm -rf "$OUT"
mkdir -p "$OUT"
times=$OUT/times.tsv
: >"$times"

# Runs the harness with `run "$@"`, its output in $OUT/$name.log; prints its wall time in seconds.
timed() {
    local name=$1
    shift
    local start end status=0
    start=$(date +%s%N)
    "$HARNESS" run "$@" >"$OUT/$name.log" 2>&1 || status=$?
    end=$(date +%s%N)
    if [ "$status" -ne 0 ]; then
        echo "measure-shards: \`run $*\` exited $status (see $OUT/$name.log)" >&2
    fi
    awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f\n", (e - s) / 1e9 }'
}

echo "warm-up: the whole run, for the durations that balance the shards" >&2
timed warm-up --json "$OUT/durations.json" "$@" >/dev/null
scenarios=$("$HARNESS" run --list "$@" | sed -n 's/^\([0-9]*\) scenarios\{0,1\}, checking.*/\1/p')

# The 1-minute load average: how busy the machine was when a run started.
load() { cut -d ' ' -f 1 /proc/loadavg 2>/dev/null || echo 0; }
whole() {
    local at
    at=$(load)
    printf '%s\twhole\t0\t%s\t%s\n' "$1" \
        "$(timed "round$1-whole" --json "$OUT/round$1-whole.json" "${@:2}")" "$at" >>"$times"
}
shards() {
    local round=$1 i at
    for i in $(seq 1 "$SHARDS"); do
        at=$(load)
        printf '%s\tshard\t%s\t%s\t%s\n' "$round" "$i" "$(timed "round$round-shard$i" \
            --shard "$i/$SHARDS" --durations "$OUT/durations.json" \
            --json "$OUT/round$round-shard$i.json" "${@:2}")" "$at" >>"$times"
    done
}
for round in $(seq 1 "$ROUNDS"); do
    echo "round $round of $ROUNDS" >&2
    if [ $((round % 2)) -eq 1 ]; then
        whole "$round" "$@"
        shards "$round" "$@"
    else
        shards "$round" "$@"
        whole "$round" "$@"
    fi
done

# The last round's shards, merged, end as its whole run did.
last=$ROUNDS
merged=$OUT/merged
shard_files=()
for i in $(seq 1 "$SHARDS"); do shard_files+=("$OUT/round$last-shard$i.json"); done
if "$HARNESS" merge "${shard_files[@]}" --json "$merged.json" >"$merged.log" 2>&1 &&
    "$HARNESS" compare "$OUT/round$last-whole.json" "$merged.json" >"$OUT/compare.log" 2>&1; then
    check="merged shards of round $last = its whole run ($(grep '^compared [0-9]* scenarios' "$OUT/compare.log" | sed 's/.*: //'))"
else
    check="merged shards of round $last differ from its whole run or did not merge: see $merged.log and $OUT/compare.log"
fi

awk -F '\t' -v shards="$SHARDS" -v rounds="$ROUNDS" -v scenarios="$scenarios" \
    -v cpus="$(nproc)" -v check="$check" '
function median(list, n,    sorted, i, j, t) {
    for (i = 1; i <= n; i++) sorted[i] = list[i]
    for (i = 2; i <= n; i++) {
        t = sorted[i]
        for (j = i - 1; j >= 1 && sorted[j] > t; j--) sorted[j + 1] = sorted[j]
        sorted[j + 1] = t
    }
    return n % 2 ? sorted[(n + 1) / 2] : (sorted[n / 2] + sorted[n / 2 + 1]) / 2
}
$2 == "whole" { whole[$1] = $4 }
$2 == "shard" { shard[$1, $3] = $4 }
{ loads[++runs] = $5 }
END {
    printf "%d scenarios, %d shards (balanced by the warm-up run'"'"'s durations), %d rounds, %d CPUs, " \
        "load average at the runs'"'"' starts: median %.1f\n\n", scenarios, shards, rounds, cpus, \
        median(loads, runs)
    printf "| round | whole (s) |"
    for (i = 1; i <= shards; i++) printf " shard %d (s) |", i
    printf " slowest (s) | sum (s) | slowest / whole | sum / whole |\n|---|---|"
    for (i = 1; i <= shards; i++) printf "---|"
    printf "---|---|---|---|\n"
    for (r = 1; r <= rounds; r++) {
        max = 0; sum = 0
        printf "| %d | %.1f |", r, whole[r]
        for (i = 1; i <= shards; i++) {
            t = shard[r, i]; sum += t; if (t > max) max = t
            printf " %.1f |", t
            per[i, r] = t
        }
        w[r] = whole[r]; m[r] = max; s[r] = sum; ratio[r] = max / whole[r]; cost[r] = sum / whole[r]
        printf " %.1f | %.1f | %.2f | %.2f |\n", max, sum, ratio[r], cost[r]
    }
    printf "| median | %.1f |", median(w, rounds)
    for (i = 1; i <= shards; i++) {
        for (r = 1; r <= rounds; r++) col[r] = per[i, r]
        printf " %.1f |", median(col, rounds)
    }
    printf " %.1f | %.1f | %.2f | %.2f |\n\n", median(m, rounds), median(s, rounds), \
        median(ratio, rounds), median(cost, rounds)
    printf "ratio slowest shard / whole run (median of the rounds): %.2f\n", median(ratio, rounds)
    printf "ratio sum of the shards / whole run (median of the rounds): %.2f\n", median(cost, rounds)
    print check
}' "$times"
