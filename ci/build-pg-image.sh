#!/usr/bin/env bash
# Build a PostgreSQL container image without any registry, from this machine's PostgreSQL.
#
#   ci/build-pg-image.sh [--force] [image-ref]
#
# The image holds the host's server binaries (the highest /usr/lib/postgresql/<major>/bin/postgres,
# or REWIND_PG_MAJOR), the shared libraries they load, a shell and a few coreutils, and an
# entrypoint that understands the official `postgres` image's variables: POSTGRES_USER,
# POSTGRES_PASSWORD, POSTGRES_DB, POSTGRES_HOST_AUTH_METHOD, POSTGRES_INITDB_ARGS (also the
# *_FILE forms) and /docker-entrypoint-initdb.d/*.sql|*.sh. Like the official image it logs
# "database system is ready to accept connections" once on stdout (init server) and once on
# stderr (final server), which is what testcontainers-modules' Postgres waits for.
#
# The root filesystem is packed with tar and loaded with `docker import`: no base image, no pull.
# Default image-ref: localhost/rewind-pg:<major> (localhost/rewind-pg:15 on Debian 12). An
# existing image is kept unless --force. Needs root (files must belong to the image's postgres
# user) and a Docker engine (see ci/docker-engine.sh). CONTAINER_CLI picks another
# docker-compatible client (default: docker; DOCKER_HOST is honoured as usual).
set -euo pipefail

# shellcheck source=ci/rootfs.sh
. "$(dirname "$0")/rootfs.sh"

say() { printf 'build-pg-image: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

force=false
ref=
for arg in "$@"; do
    case "$arg" in
    --force | -f) force=true ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$arg'" ;;
    *) [ -z "$ref" ] || die "more than one image-ref given"; ref=$arg ;;
    esac
done
cli=${CONTAINER_CLI:-docker}
command -v "$cli" >/dev/null 2>&1 || die "no '$cli' command (run ci/docker-engine.sh first)"

# --- which PostgreSQL -------------------------------------------------------------------------
if [ -n "${REWIND_PG_MAJOR:-}" ]; then
    major=$REWIND_PG_MAJOR
else
    major=$(for p in /usr/lib/postgresql/*/bin/postgres; do
        [ -x "$p" ] && basename "$(dirname "$(dirname "$p")")"
    done | sort -V | tail -n 1)
fi
[ -n "$major" ] || die "no PostgreSQL server under /usr/lib/postgresql/*/bin (apt-get install postgresql-15)"
pgroot=/usr/lib/postgresql/$major
[ -x "$pgroot/bin/postgres" ] || die "$pgroot/bin/postgres is missing"
sharedir=$("$pgroot/bin/pg_config" --sharedir 2>/dev/null || echo "/usr/share/postgresql/$major")
[ -d "$sharedir" ] || die "PostgreSQL share directory $sharedir is missing"
full_version=$("$pgroot/bin/postgres" --version | awk '{ print $3 }')
ref=${ref:-localhost/rewind-pg:$major}

if ! $force && "$cli" image inspect "$ref" >/dev/null 2>&1; then
    say "image $ref already exists; keeping it (--force rebuilds)"
    exit 0
fi
[ "$(id -u)" -eq 0 ] || die "run as root: the image's files must be owned by its postgres user"

start=$(date +%s.%N)
work=$(mktemp -d "${TMPDIR:-/tmp}/rewind-pg-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
mkdir -p "$root"

# --- layout: mirror the host's top-level symlinks (Debian 12 is usr-merged) -----------------
rootfs_layout "$root"
mkdir -p "$root"/usr/{bin,sbin,lib,local/bin,share/postgresql,lib/locale} \
    "$root"/{etc,dev,proc,sys,tmp,run,var/lib/postgresql/data,docker-entrypoint-initdb.d}
ln -s ../run "$root/var/run"
mkdir -p "$root/run/postgresql"

# --- PostgreSQL itself ------------------------------------------------------------------------
mkdir -p "$root/usr/lib/postgresql"
cp -a "$pgroot" "$root/usr/lib/postgresql/"
# The JIT provider pulls in libLLVM (~120 MB); without it the server just runs with JIT off.
rm -rf "$root$pgroot/lib/llvmjit"* "$root$pgroot/lib/bitcode"
mkdir -p "$root$(dirname "$sharedir")"
cp -a "$sharedir" "$root$(dirname "$sharedir")/"
rm -rf "$root$sharedir/man"
# Debian builds against the system time zone database and ships a C.UTF-8 locale.
[ -d /usr/share/zoneinfo ] && cp -a /usr/share/zoneinfo "$root/usr/share/"
[ -d /usr/lib/locale/C.utf8 ] && cp -a /usr/lib/locale/C.utf8 "$root/usr/lib/locale/"

# --- a minimal userland for the entrypoint (and initdb/pg_ctl, which run /bin/sh) -------------
# `locale -a` is how initdb finds the collations to import.
rootfs_tools "$root" dash cat chmod chown env id locale ls mkdir rm sleep setpriv || die "a host tool is missing"

# --- every shared library those programs and the server's modules load ------------------------
mapfile -d '' elves < <(find "$root/usr/bin" "$root$pgroot" -type f \( -perm -u+x -o -name '*.so*' \) -print0)
rootfs_libs "$root" "$work/libs" "${elves[@]}"
: >"$work/libdirs"
while IFS= read -r lib; do
    dirname "$(readlink -f "$root$lib" | sed "s|^$root||")" >>"$work/libdirs"
done <"$work/libs"
sort -u "$work/libdirs" >"$root/etc/ld.so.conf"
ldconfig -r "$root" 2>/dev/null || say "warning: ldconfig -r failed; relying on the loader's default paths"

# --- accounts and name service (uid/gid 999 as in the official image) ------------------------
printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' \
    'postgres:x:999:999:PostgreSQL administrator:/var/lib/postgresql:/bin/sh' >"$root/etc/passwd"
printf '%s\n' 'root:x:0:' 'postgres:x:999:' >"$root/etc/group"
printf '%s\n' 'passwd: files' 'group: files' 'hosts: files dns' >"$root/etc/nsswitch.conf"
chown -R 999:999 "$root/var/lib/postgresql" "$root/run/postgresql"
chmod 700 "$root/var/lib/postgresql/data"
chmod 2775 "$root/run/postgresql"

# --- entrypoint -------------------------------------------------------------------------------
entry=$root/usr/local/bin/docker-entrypoint.sh
printf '#!/bin/sh\n# Generated by rewind-conformance ci/build-pg-image.sh for PostgreSQL %s.\nPG_BINDIR=%s/bin\n' \
    "$full_version" "$pgroot" >"$entry"
cat >>"$entry" <<'ENTRYPOINT'
# A small, POSIX-shell take on the official postgres image's docker-entrypoint.sh.
set -eu
PATH="$PG_BINDIR:/usr/local/bin:/usr/bin:/bin"
export PATH
: "${PGDATA:=/var/lib/postgresql/data}"
export PGDATA

log() { printf 'entrypoint: %s\n' "$*"; }
fail() { printf 'entrypoint: error: %s\n' "$*" >&2; exit 1; }

# VAR or VAR_FILE (the file's content), never both.
from_env_or_file() {
    eval "value=\${$1:-} file=\${$1_FILE:-}"
    if [ -n "$value" ] && [ -n "$file" ]; then fail "both $1 and $1_FILE are set"; fi
    if [ -n "$file" ]; then value=$(cat "$file"); fi
    eval "$1=\$value"
    unset "$1_FILE" 2>/dev/null || true
}

# `docker run IMAGE -c fsync=off` means `postgres -c fsync=off`.
case "${1:-postgres}" in -*) set -- postgres "$@" ;; esac
[ $# -gt 0 ] || set -- postgres
[ "$1" = postgres ] || exec "$@"
shift

# Started as root (e.g. --user 0): own the data directory, then come back as postgres.
if [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA"
    chown -R postgres:postgres "$PGDATA" /run/postgresql
    chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" postgres "$@"
fi

from_env_or_file POSTGRES_USER
from_env_or_file POSTGRES_PASSWORD
from_env_or_file POSTGRES_DB
from_env_or_file POSTGRES_INITDB_ARGS
POSTGRES_USER=${POSTGRES_USER:-postgres}
POSTGRES_DB=${POSTGRES_DB:-$POSTGRES_USER}

# True once the postmaster with pid $1 has written "ready" as line 8 of postmaster.pid.
postmaster_ready() {
    [ -f "$PGDATA/postmaster.pid" ] || return 1
    n=0
    while IFS= read -r line; do
        n=$((n + 1))
        if [ "$n" = 1 ] && [ "$line" != "$1" ]; then return 1; fi
        if [ "$n" = 8 ]; then case "$line" in ready*) return 0 ;; esac; fi
    done <"$PGDATA/postmaster.pid"
    return 1
}

psql_init() {
    psql -v ON_ERROR_STOP=1 --no-psqlrc --no-password --host /run/postgresql --port 5432 \
        --username "$POSTGRES_USER" "$@"
}

if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "$POSTGRES_PASSWORD" ] && [ "${POSTGRES_HOST_AUTH_METHOD:-}" != trust ]; then
        fail "the database is uninitialized and no superuser password is set: pass -e POSTGRES_PASSWORD=... (or POSTGRES_HOST_AUTH_METHOD=trust to allow every connection without one)"
    fi
    mkdir -p "$PGDATA"
    chmod 700 "$PGDATA"

    # No fsync wanted for the server (the usual test setting): no need to sync initdb's files either.
    nosync=
    case " $* " in *fsync=off*) nosync=--no-sync ;; esac
    if [ -n "$POSTGRES_PASSWORD" ]; then
        pwfile=/tmp/.rewind-initdb-pwfile
        (umask 077 && printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile")
        # shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is word-split, as in the official image
        initdb --username="$POSTGRES_USER" --pwfile="$pwfile" $nosync ${POSTGRES_INITDB_ARGS:-}
        rm -f "$pwfile"
    else
        # shellcheck disable=SC2086
        initdb --username="$POSTGRES_USER" $nosync ${POSTGRES_INITDB_ARGS:-}
    fi

    # Remote clients: the method the official image would choose (the server's password_encryption).
    method=${POSTGRES_HOST_AUTH_METHOD:-$(postgres -C password_encryption "$@")}
    printf '\nhost all all all %s\n' "$method" >>"$PGDATA/pg_hba.conf"
    printf "\nlisten_addresses = '*'\n" >>"$PGDATA/postgresql.conf"

    # An init-only server on the Unix socket; its log goes to stdout, so its "ready" line is there.
    postgres "$@" -c listen_addresses= -p 5432 2>&1 &
    init_pid=$!
    # Ready when postmaster.pid says so (what `pg_ctl -w` checks): no probe connection, no log noise.
    tries=0
    until postmaster_ready "$init_pid"; do
        kill -0 "$init_pid" 2>/dev/null || fail "the init server exited"
        tries=$((tries + 1))
        [ "$tries" -lt 600 ] || fail "the init server did not become ready in 60s"
        sleep 0.1
    done

    exists=$(printf '%s\n' "SELECT 1 FROM pg_database WHERE datname = :'db';" |
        psql_init --dbname postgres --set db="$POSTGRES_DB" --tuples-only --no-align)
    if [ -z "$exists" ]; then
        printf '%s\n' 'CREATE DATABASE :"db";' | psql_init --dbname postgres --set db="$POSTGRES_DB"
        log "created database $POSTGRES_DB"
    fi

    for f in /docker-entrypoint-initdb.d/*; do
        case "$f" in
        */\*) ;;
        *.sh)
            # shellcheck disable=SC1090 # user-supplied init scripts
            if [ -x "$f" ]; then log "running $f"; "$f"; else log "sourcing $f"; . "$f"; fi ;;
        *.sql) log "running $f"; psql_init --dbname "$POSTGRES_DB" -f "$f" ;;
        *) log "ignoring $f (only .sh and .sql are run)" ;;
        esac
    done

    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    wait "$init_pid" 2>/dev/null || true
    log "PostgreSQL init process complete; ready for start up."
fi

# The real server, logging to stderr.
exec postgres "$@"
ENTRYPOINT
chmod 755 "$entry"

# --- pack and import --------------------------------------------------------------------------
previous=$("$cli" image inspect --format '{{.Id}}' "$ref" 2>/dev/null || true)
say "importing $ref (PostgreSQL $full_version from $pgroot)"
tar -C "$root" --numeric-owner -cf - . |
    "$cli" import \
        --change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
        --change 'CMD ["postgres"]' \
        --change 'USER postgres' \
        --change 'EXPOSE 5432' \
        --change 'WORKDIR /var/lib/postgresql' \
        --change "ENV PATH=$pgroot/bin:/usr/local/bin:/usr/bin:/bin" \
        --change 'ENV PGDATA=/var/lib/postgresql/data' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'ENV TZ=Etc/UTC' \
        --change "LABEL org.opencontainers.image.title=rewind-pg org.opencontainers.image.version=$full_version" \
        --message "PostgreSQL $full_version from the host's $pgroot (rewind-conformance ci/build-pg-image.sh)" \
        - "$ref" >/dev/null
current=$("$cli" image inspect --format '{{.Id}}' "$ref")
if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
    # The replaced image is now untagged; drop it unless a container still uses it.
    "$cli" image rm "$previous" >/dev/null 2>&1 || say "kept the previous image ${previous#sha256:} (still used by a container or image)"
fi
size=$("$cli" image inspect --format '{{.Size}}' "$ref" | awk '{ printf "%.0f MB", $1 / 1e6 }')
say "built $ref ($size) in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s"
