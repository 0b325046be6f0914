#!/usr/bin/env bash
# Builds our qemu TCG plugin (scripts/qemu/kzcount.c: instructions per stage, see
# scripts/aarch64_count.py) as build/qemu-plugin/libkzcount.so for the installed qemu-user.
#
# Debian's qemu-user takes `-plugin FILE` but ships neither a plugin nor the API header
# (include/qemu/qemu-plugin.h); the qemu source package has it. It is fetched with apt-get
# source through a private apt set-up in KAZETTS_CACHE/qemu-src/apt (its own deb-src list and
# package lists; the system's /etc/apt is neither read for sources nor changed, no root needed
# for that part), the source package of the installed qemu-user's version (the newest of the
# same upstream version if the archive no longer has it), and the header taken out of its
# orig tarball. Without apt (not Debian, no network to deb.debian.org): the same file from
# qemu's git tag, checked against the sha256 of Debian's. KZ_QEMU_PLUGIN_H=FILE skips both.
#
# Environment: KAZETTS_CACHE (default ~/.cache/kazetts), KZ_QEMU_PLUGIN_H.
set -euo pipefail
# shellcheck source=scripts/apt_packages.sh
source "$(dirname "$0")/apt_packages.sh"
cd "$(dirname "$0")/.."

KAZETTS_CACHE=${KAZETTS_CACHE:-$HOME/.cache/kazetts}
SRC=$KAZETTS_CACHE/qemu-src
OUT=build/qemu-plugin/libkzcount.so
PLUGIN_C=scripts/qemu/kzcount.c
# qemu 7.2's include/qemu/qemu-plugin.h (plugin API version 1), as in Debian's 7.2+dfsg orig
# tarball and qemu's v7.2.0 tag
HEADER_SHA256=19f277b037d05a8bcb5069f2f81a465d177208e5903048a915c56627d4c3748e
UPSTREAM_HEADER=https://gitlab.com/qemu-project/qemu/-/raw/v7.2.0/include/qemu/qemu-plugin.h

log() { printf '== %s (%s)\n' "$*" "$(date +%T)" >&2; }

ensure_packages() { apt_packages gcc:gcc qemu-aarch64:qemu-user curl:curl xz:xz-utils; }

# apt-get / apt-cache ($1) with our own source list, package lists and cache: nothing of
# /etc/apt's sources.
private_apt() {
    local tool=$1
    shift
    "$tool" -q -o Dir::Etc::SourceList="$SRC/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null \
        -o Dir::State::Lists="$SRC/apt/lists" -o Dir::Cache="$SRC/apt/cache" -o Debug::NoLocking=1 \
        -o APT::Sandbox::User=root "$@"
}

# The header from Debian's qemu source package; prints its path.
header_from_debian() {
    command -v apt-get >/dev/null && [ -r /etc/os-release ] || return 1
    local codename version upstream dsc orig
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    version=$(dpkg-query -W -f='${source:Version}' qemu-user 2>/dev/null) || return 1
    [ -n "$codename" ] && [ -n "$version" ] || return 1
    upstream=${version#*:}
    upstream=${upstream%%-*} # 7.2+dfsg
    local header=$SRC/qemu-$upstream/include/qemu/qemu-plugin.h
    if [ -f "$header" ]; then
        echo "$header"
        return 0
    fi
    mkdir -p "$SRC/apt/lists/partial" "$SRC/apt/cache/archives/partial" "$SRC/dl"
    local keyring=/usr/share/keyrings/debian-archive-keyring.gpg signed=""
    [ -f "$keyring" ] && signed="[signed-by=$keyring] "
    cat >"$SRC/apt/sources.list" <<EOF
deb-src ${signed}http://deb.debian.org/debian $codename main
deb-src ${signed}http://deb.debian.org/debian ${codename}-updates main
deb-src ${signed}http://deb.debian.org/debian-security ${codename}-security main
EOF
    log "apt-get update of the deb-src lists ($codename) into $SRC/apt"
    private_apt apt-get update >"$SRC/apt/update.log" 2>&1 || { tail -5 "$SRC/apt/update.log" >&2; return 1; }
    # the installed version, else the newest source of the same upstream version
    local versions
    versions=$(private_apt apt-cache showsrc qemu 2>/dev/null | sed -n 's/^Version: //p')
    if ! grep -qxF "$version" <<<"$versions"; then
        local newest
        newest=$(grep -F ":$upstream-" <<<"$versions" | sort -V | tail -1)
        [ -n "$newest" ] || return 1
        log "qemu $version is no longer in the archive: taking the source of $newest"
        version=$newest
    fi
    log "apt-get source --download-only qemu=$version"
    (cd "$SRC/dl" && private_apt apt-get source --download-only "qemu=$version" >"$SRC/dl/source.log" 2>&1) ||
        { tail -5 "$SRC/dl/source.log" >&2; return 1; }
    orig=$(ls "$SRC/dl"/qemu_"$upstream".orig.tar.* 2>/dev/null | head -1)
    [ -n "$orig" ] || return 1
    mkdir -p "$(dirname "$header")"
    tar xOf "$orig" --wildcards '*/include/qemu/qemu-plugin.h' >"$header.tmp" && [ -s "$header.tmp" ] || return 1
    mv "$header.tmp" "$header"
    echo "$header"
}

header_from_upstream() {
    local header=$SRC/upstream-v7.2.0/qemu-plugin.h
    mkdir -p "$(dirname "$header")"
    [ -f "$header" ] || curl -fsSL "$UPSTREAM_HEADER" -o "$header"
    echo "$HEADER_SHA256  $header" | sha256sum -c --quiet >&2 || { rm -f "$header"; return 1; }
    echo "$header"
}

main() {
    ensure_packages
    local header=${KZ_QEMU_PLUGIN_H:-}
    if [ -z "$header" ]; then
        header=$(header_from_debian) || header=$(header_from_upstream) ||
            { echo "no qemu-plugin.h: set KZ_QEMU_PLUGIN_H to qemu 7.2's include/qemu/qemu-plugin.h" >&2; exit 1; }
    fi
    if ! echo "$HEADER_SHA256  $header" | sha256sum -c --quiet >/dev/null 2>&1; then
        echo "note: $header is not qemu 7.2's plugin header (sha256 differs); building anyway" >&2
    fi
    if [ -f "$OUT" ] && [ "$OUT" -nt "$PLUGIN_C" ] && [ "$OUT" -nt "$header" ] && [ "$OUT" -nt "$0" ]; then
        echo "$OUT"
        return
    fi
    mkdir -p "$(dirname "$OUT")"
    # built aside, then renamed into place: a qemu still running the old plugin keeps its file
    gcc -shared -fPIC -O2 -Wall -Wextra -Wno-unused-parameter -I"$(dirname "$header")" -o "$OUT.new" "$PLUGIN_C"
    mv -f "$OUT.new" "$OUT"
    log "built $OUT (header $header)"
    echo "$OUT"
}

main "$@"
