#!/usr/bin/env bash
# Run the real-runtime tier: the mocks and the reference implementation against pinned releases
# of the real runtimes (Codex 0.155.1 and 0.171.0, Claude Code 2.1.197 and 2.1.332, OpenCode
# 1.18.33 and 1.18.34), run offline against fake model APIs on loopback.
#
#   ci/real-runtimes.sh [extra arguments for the test binary, e.g. a test name filter]
#
# Step 1 installs the releases from the npm registry (needs Node.js, npm and the network the
# first time only) into the cache: $REWIND_REAL_RUNTIMES_DIR, else <cargo target dir>/real-runtimes.
# An installed release is reused; a CI cache should keep that directory (about 1.8 GB).
# Step 2 runs `cargo test --features real-runtimes --test real_runtimes`, which needs no network.
# The wall time of each step and of the whole run is printed at the end.
#
# Exit status: that of the failing step (0 when both passed).
set -euo pipefail

case "${1:-}" in
-h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac

say() { printf 'real-runtimes: %s\n' "$*" >&2; }

cd "$(dirname "$0")/.."
command -v npm >/dev/null || { say "error: npm is needed to install the real runtimes"; exit 2; }

start=$(date +%s)
say "building the tier"
cargo test --features real-runtimes --test real_runtimes --no-run

say "step 1: installing the pinned runtimes (cached)"
install_start=$(date +%s)
cargo test --features real-runtimes --test real_runtimes -- --exact \
    install::every_pinned_release_is_installed --nocapture
install_end=$(date +%s)

say "step 2: running the tier"
status=0
cargo test --features real-runtimes --test real_runtimes -- "$@" || status=$?
end=$(date +%s)

say "install step: $((install_end - install_start)) s; tests: $((end - install_end)) s; wall time: $((end - start)) s"
exit "$status"
