#!/usr/bin/env bash
# Make a Docker engine answer on /var/run/docker.sock, for the `containers` feature's tests.
#
#   ci/docker-engine.sh [start]   install what is missing, start dockerd unless an engine answers
#   ci/docker-engine.sh stop      stop dockerd, but only if this script started it
#   ci/docker-engine.sh status    say whether an engine answers and who started it
#
# Meant for a root Debian 12 machine without systemd (CI, a developer sandbox). Installs, with
# apt-get and only when absent: `docker.io` (dockerd, containerd, runc, iptables) and
# `postgresql-15` (whose binaries ci/build-pg-image.sh packs into an image). Re-running is safe:
# nothing is installed or started twice.
#
# The pid of a dockerd started here goes to ${TMPDIR:-/tmp}/rewind-dockerd.pid; its log to
# ${TMPDIR:-/tmp}/rewind-dockerd.log. An engine that was already running (a system service,
# Docker Desktop, another job's) is used as it is and never stopped by `stop`.
#
# Environment: REWIND_DOCKERD_WAIT (seconds to wait for the engine, default 60),
# REWIND_DOCKERD_ARGS (extra dockerd arguments, word-split, e.g. "--storage-driver vfs").
set -euo pipefail

SOCKET=/var/run/docker.sock
STATE_DIR=${TMPDIR:-/tmp}
PID_FILE=$STATE_DIR/rewind-dockerd.pid
LOG_FILE=$STATE_DIR/rewind-dockerd.log
WAIT_SECONDS=${REWIND_DOCKERD_WAIT:-60}
PG_WANTED=/usr/lib/postgresql/15/bin/postgres

say() { printf 'docker-engine: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# True when a Docker API server answers on the socket (the docker CLI if there is one, else curl).
engine_answers() {
    [ -S "$SOCKET" ] || return 1
    if command -v docker >/dev/null 2>&1; then
        docker -H "unix://$SOCKET" version --format '{{.Server.Version}}' >/dev/null 2>&1
    elif command -v curl >/dev/null 2>&1; then
        curl -fsS --max-time 5 --unix-socket "$SOCKET" http://localhost/_ping >/dev/null 2>&1
    else
        return 1
    fi
}

# Prints the pid recorded by an earlier `start` if that process is still a running dockerd.
owned_pid() {
    local pid
    [ -f "$PID_FILE" ] || return 1
    pid=$(tr -dc '0-9' <"$PID_FILE")
    [ -n "$pid" ] || return 1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null || true)" = dockerd ] || return 1
    printf '%s\n' "$pid"
}

install_missing() {
    local packages=()
    command -v dockerd >/dev/null 2>&1 || packages+=(docker.io)
    [ -x "$PG_WANTED" ] || packages+=(postgresql-15)
    if [ ${#packages[@]} -eq 0 ]; then
        say "packages: nothing to install (dockerd and $PG_WANTED present)"
        return 0
    fi
    [ "$(id -u)" -eq 0 ] || die "need root to install ${packages[*]}"
    say "packages: installing ${packages[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # --no-upgrade leaves any already-installed package (e.g. a pinned postgresql) untouched.
    apt-get install -y -qq --no-install-recommends --no-upgrade "${packages[@]}" >/dev/null
    command -v dockerd >/dev/null 2>&1 || die "docker.io installed but no dockerd on PATH"
}

start_dockerd() {
    local pid waited=0 step=0.25 tries
    if engine_answers; then
        if pid=$(owned_pid); then
            say "engine: already running (dockerd pid $pid, started earlier by this script)"
        else
            rm -f "$PID_FILE"
            say "engine: already running (not started by this script; 'stop' will leave it alone)"
        fi
        return 0
    fi
    if pid=$(owned_pid); then
        # Our dockerd is alive but not answering yet (still starting): just wait for it below.
        say "engine: dockerd pid $pid (started earlier) is not answering yet; waiting"
    else
        rm -f "$PID_FILE"
        [ "$(id -u)" -eq 0 ] || die "need root to start dockerd"
        mkdir -p "$STATE_DIR"
        say "engine: starting dockerd on unix://$SOCKET (log: $LOG_FILE)"
        # setsid: the daemon outlives this script and is not hit by signals sent to its job.
        # shellcheck disable=SC2086 # REWIND_DOCKERD_ARGS is word-split on purpose
        setsid dockerd --host "unix://$SOCKET" ${REWIND_DOCKERD_ARGS:-} \
            </dev/null >>"$LOG_FILE" 2>&1 &
        pid=$!
        printf '%s\n' "$pid" >"$PID_FILE"
    fi
    tries=$(awk -v w="$WAIT_SECONDS" -v s="$step" 'BEGIN { printf "%d", w / s }')
    while ! engine_answers; do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$PID_FILE"
            say "dockerd exited; last lines of $LOG_FILE:"
            tail -n 20 "$LOG_FILE" >&2 || true
            die "dockerd did not start"
        fi
        waited=$((waited + 1))
        if [ "$waited" -ge "$tries" ]; then
            tail -n 20 "$LOG_FILE" >&2 || true
            die "no engine answered on $SOCKET within ${WAIT_SECONDS}s (dockerd pid $pid left running)"
        fi
        sleep "$step"
    done
    say "engine: dockerd pid $pid answers"
}

stop_dockerd() {
    local pid
    if ! pid=$(owned_pid); then
        rm -f "$PID_FILE"
        say "stop: no dockerd started by this script is running; nothing to do"
        return 0
    fi
    say "stop: stopping dockerd pid $pid"
    kill -TERM "$pid"
    # dockerd stops its containers and its own containerd before exiting.
    for _ in $(seq 1 120); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.25
    done
    if kill -0 "$pid" 2>/dev/null; then
        die "dockerd pid $pid still running 30s after SIGTERM (see $LOG_FILE)"
    fi
    rm -f "$PID_FILE"
    say "stop: dockerd stopped"
}

status() {
    local pid
    if engine_answers; then
        if pid=$(owned_pid); then
            say "status: engine answers on $SOCKET (dockerd pid $pid, started by this script)"
        else
            say "status: engine answers on $SOCKET (not started by this script)"
        fi
    else
        say "status: no engine answers on $SOCKET"
        return 1
    fi
}

case "${1:-start}" in
start)
    t0=$(now)
    install_missing
    t1=$(now)
    start_dockerd
    t2=$(now)
    if command -v docker >/dev/null 2>&1; then
        docker -H "unix://$SOCKET" version \
            --format 'docker-engine: engine {{.Server.Version}}, API {{.Server.APIVersion}}' >&2
    fi
    say "timings: packages $(elapsed "$t0" "$t1")s, engine $(elapsed "$t1" "$t2")s, total $(elapsed "$t0" "$t2")s"
    ;;
stop) stop_dockerd ;;
status) status ;;
-h | --help | help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' ;;
*) die "unknown command '$1' (start, stop, status)" ;;
esac
