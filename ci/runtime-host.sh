#!/usr/bin/env bash
# A second host for the real runtimes: a container with its own network namespace and its own
# filesystem, holding installed releases of Codex, Claude Code and OpenCode and nothing of the
# harness's state, for `run --runtimes real --runtime-host docker:NAME`.
#
#   ci/runtime-host.sh start [NAME] [RELEASE_DIR...]   build the image if needed, start NAME
#   ci/runtime-host.sh stop [NAME]                     remove the container
#
# NAME defaults to rewind-runtime-host. Each RELEASE_DIR is an installed release of the runtime
# cache (e.g. codex-0.171.0); by default the pinned releases, as `rewind-conformance run
# --runtimes real` installs them (the cache is $REWIND_REAL_RUNTIMES_DIR, else
# ~/.cache/rewind-conformance/real-runtimes). The releases are copied into the image at the same
# paths, so the harness names a program by the path it resolved; the scenario directories are
# made inside the container by the harness, which reaches them only through `docker exec`.
#
# The image is built without any registry: this machine's shell and a few coreutils, the shared
# libraries they and the runtimes load, and the releases, packed with tar and loaded with
# `docker import` (tag localhost/rewind-runtime-host:<digest of the releases>; an existing one is
# reused). The container runs on the default bridge network: the harness's fake model APIs and
# the OpenCode server are reached over it, never over loopback. Needs a Docker engine (see
# ci/docker-engine.sh); CONTAINER_CLI picks another docker-compatible client.
#
# Prints the value for --runtime-host (docker:NAME) on stdout.
set -euo pipefail

# shellcheck source=ci/rootfs.sh
. "$(dirname "$0")/rootfs.sh"

say() { printf 'runtime-host: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

cli=${CONTAINER_CLI:-docker}
cache=${REWIND_REAL_RUNTIMES_DIR:-$HOME/.cache/rewind-conformance/real-runtimes}
# The pinned releases (src/real/install.rs, PINNED).
pinned=(codex-0.171.0 claude-code-2.1.332 opencode-1.18.34)

action=${1:-}
[ $# -gt 0 ] && shift
name=${1:-rewind-runtime-host}
[ $# -gt 0 ] && shift
case "$action" in
-h | --help | help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
stop)
    "$cli" rm -f "$name" >/dev/null 2>&1 || true
    say "removed $name"
    exit 0
    ;;
start) ;;
*) die "usage: ci/runtime-host.sh start|stop [NAME] [RELEASE_DIR...] (got '${action}')" ;;
esac
command -v "$cli" >/dev/null 2>&1 || die "no '$cli' command (run ci/docker-engine.sh first)"

releases=("$@")
[ ${#releases[@]} -gt 0 ] || releases=("${pinned[@]}")
dirs=()
for release in "${releases[@]}"; do
    dir=$cache/$release
    [ -d "$dir/node_modules" ] || die "release $release is not installed in $cache (run the suite with --runtimes real once, or ci/real-runtimes.sh)"
    dirs+=("$(cd "$dir" && pwd -P)")
done

# The tag names the releases and the version of this recipe.
recipe=1
digest=$(printf '%s\n' "$recipe" "${dirs[@]}" | sha256sum | cut -c1-12)
image=localhost/rewind-runtime-host:$digest

start=$(date +%s)
if "$cli" image inspect "$image" >/dev/null 2>&1; then
    say "image $image already exists; reusing it"
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/rewind-runtime-host.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    root=$work/rootfs
    mkdir -p "$root"
    rootfs_layout "$root"
    mkdir -p "$root"/{etc,dev,proc,sys,run,root,var/tmp}
    chmod 1777 "$root/var/tmp"
    # What the harness runs on the host: env (the runtime's environment and directory), sh,
    # mkdir and cat (directories and files), tr and grep (the processes naming a home), tar (a
    # copy of a transcript directory), sleep (the container's idle process).
    rootfs_tools "$root" dash env cat mkdir tr grep tar ls rm sleep || die "a host tool is missing"
    programs=()
    for dir in "${dirs[@]}"; do
        mkdir -p "$root$(dirname "$dir")"
        cp -a "$dir" "$root$dir"
        while IFS= read -r -d '' f; do programs+=("$f"); done < <(
            find "$dir/node_modules" -type f -perm -u+x -size +1M -print0)
    done
    rootfs_libs "$root" "$work/libs" "$root"/usr/bin/* "${programs[@]}"
    printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
    printf '%s\n' 'root:x:0:' >"$root/etc/group"
    printf '%s\n' 'passwd: files' 'group: files' 'hosts: files dns' >"$root/etc/nsswitch.conf"
    say "importing $(du -sh "$root" | cut -f1) as $image"
    tar -C "$root" -cf - . | "$cli" import \
        --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
        --change 'CMD ["/usr/bin/sleep", "infinity"]' - "$image" >/dev/null
fi

"$cli" rm -f "$name" >/dev/null 2>&1 || true
# --init reaps the processes the harness's `docker exec` calls leave behind.
"$cli" run -d --init --name "$name" --network bridge "$image" >/dev/null
"$cli" exec "$name" sh -c 'test -x /usr/bin/env' || die "the container $name does not run commands"
address=$("$cli" inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$name")
say "started $name ($image, address $address) in $(( $(date +%s) - start )) s"
echo "docker:$name"
