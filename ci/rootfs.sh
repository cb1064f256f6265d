# shellcheck shell=bash
# Shared by the scripts that build a container image from this machine's files without any
# registry (ci/build-pg-image.sh, ci/runtime-host.sh). Source it; it defines functions only.
#
#   rootfs_layout ROOT             the host's top-level links (Debian 12 is usr-merged), /usr/bin
#                                  and a world-writable /tmp
#   rootfs_tools ROOT TOOL...      copies each host tool into ROOT/usr/bin, and sh as dash
#   rootfs_libs ROOT LIST FILE...  copies every shared library the FILEs load into ROOT at the
#                                  same path, and writes their paths to LIST

rootfs_layout() {
    local root=$1 d target
    for d in bin sbin lib lib32 lib64 libx32; do
        if [ -L "/$d" ]; then
            target=$(readlink "/$d")
            ln -s "$target" "$root/$d"
            case "$target" in /*) mkdir -p "$root$target" ;; *) mkdir -p "$root/$target" ;; esac
        elif [ -d "/$d" ]; then
            mkdir -p "$root/$d"
        fi
    done
    mkdir -p "$root/usr/bin" "$root/tmp"
    chmod 1777 "$root/tmp"
}

rootfs_tools() {
    local root=$1 tool path
    shift
    for tool in "$@"; do
        path=$(command -v "$tool") || { printf 'host tool %s not found\n' "$tool" >&2; return 1; }
        cp -L "$path" "$root/usr/bin/$tool"
    done
    ln -sf dash "$root/usr/bin/sh"
}

rootfs_libs() {
    local root=$1 list=$2 lib
    shift 2
    ldd "$@" 2>/dev/null | awk '
        $2 == "=>" && $3 == "not" { missing = missing " " $1; next }
        $2 == "=>" && $3 ~ /^\// { print $3; next }
        $1 ~ /^\// && $2 ~ /^\(0x/ { print $1 }
        END { if (missing != "") print "MISSING" missing > "/dev/stderr" }' |
        sort -u >"$list" || true
    while IFS= read -r lib; do
        mkdir -p "$root$(dirname "$lib")"
        [ -e "$root$lib" ] || cp -L "$lib" "$root$lib"
    done <"$list"
}
