#!/usr/bin/env bash
# The native golden tests on 64-bit ARM, from an x86-64 Debian host: cross-builds llama.cpp's
# ggml + llama (from the llama-cpp-python sdist) and native/ for aarch64 with NEON, dotprod and
# F16 arithmetic, then runs native/tests/golden_check under qemu-aarch64 emulating a Cortex-A76
# (a phone big core). Same gates as the Python tests on x86-64. Entry point: make aarch64-test.
#
# Environment (make passes them): LLAMA_SRC (unpacked sdist), VENV_PYTHON (x86 runtime, used to
# build and convert the tiny checkpoints), SOXR_SRC (the unpacked python-soxr sdist: libsoxr in the
# cross-built libkazetts), KAZETTS_CACHE (the cross-built libraries are cached
# there, keyed by sources, flags and compiler), QEMU_CPU (default cortex-a76).
set -euo pipefail
cd "$(dirname "$0")/.."

: "${LLAMA_SRC:?set LLAMA_SRC to the unpacked llama-cpp-python sdist (make aarch64-test does)}"
: "${VENV_PYTHON:?set VENV_PYTHON to the x86-64 runtime interpreter (make aarch64-test does)}"
KAZETTS_CACHE=${KAZETTS_CACHE:-$HOME/.cache/kazetts}
QEMU_CPU=${QEMU_CPU:-cortex-a76}
ARM_ARCH=armv8-a
TOOLCHAIN=$PWD/native/cmake/aarch64-linux-gnu.cmake
SYSROOT=/usr/aarch64-linux-gnu
BUILD=build/aarch64
# Only the libraries: no common/tools/examples/tests/server. OpenMP comes from the cross
# toolchain's libgomp, as on a glibc device; $ORIGIN keeps the installed libraries together.
LLAMA_FLAGS=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=OFF "-DGGML_CPU_ARM_ARCH=$ARM_ARCH"
    -DGGML_OPENMP=ON -DGGML_CCACHE=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF
    "-DCMAKE_INSTALL_RPATH=\$ORIGIN")

log() { printf '== %s (%s)\n' "$*" "$(date +%T)"; }

# Runs a command with its output in a log file, shown only when it fails.
quietly() {
    local log_file=$1
    shift
    "$@" >"$log_file" 2>&1 || { tail -n 40 "$log_file" >&2; echo "failed: $* (log: $log_file)" >&2; exit 1; }
}

# The cross compiler and qemu-user from Debian, installed when missing.
ensure_packages() {
    local missing=()
    command -v aarch64-linux-gnu-g++ >/dev/null || missing+=(g++-aarch64-linux-gnu)
    command -v qemu-aarch64 >/dev/null || missing+=(qemu-user)
    command -v cmake >/dev/null || missing+=(cmake)
    [ ${#missing[@]} -eq 0 ] && return
    log "installing ${missing[*]}"
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
}

# ggml + llama for aarch64, built once per (sources, flags, toolchain, compiler).
cross_build_llama() {
    KEY=$( { basename "$LLAMA_SRC"; printf '%s\n' "${LLAMA_FLAGS[@]}"; cat "$TOOLCHAIN"; aarch64-linux-gnu-g++ --version | head -1; } \
        | sha256sum | cut -c1-12)
    PREFIX=$KAZETTS_CACHE/aarch64-$KEY
    if [ -f "$PREFIX/.built" ]; then
        log "ggml + llama for aarch64: cached in $PREFIX"
        return
    fi
    log "cross-building ggml + llama for aarch64 ($ARM_ARCH) into $PREFIX"
    rm -rf "$BUILD/llama" "$PREFIX"
    quietly "$BUILD/llama-configure.log" cmake -S "$LLAMA_SRC/vendor/llama.cpp" -B "$BUILD/llama" \
        -DCMAKE_TOOLCHAIN_FILE="$TOOLCHAIN" -DCMAKE_INSTALL_PREFIX="$PREFIX" "${LLAMA_FLAGS[@]}"
    quietly "$BUILD/llama-build.log" cmake --build "$BUILD/llama" -j2 --target llama
    quietly "$BUILD/llama-install.log" cmake --install "$BUILD/llama"
    touch "$PREFIX/.built"
}

# One build directory per library build: CMake caches the library paths it found.
cross_build_native() {
    NATIVE=$BUILD/native-$KEY
    log "cross-building native/ and golden_check"
    quietly "$BUILD/native-configure.log" cmake -S native -B "$NATIVE" -DCMAKE_TOOLCHAIN_FILE="$TOOLCHAIN" \
        -DKAZETTS_GOLDEN_CHECK=ON -DKAZETTS_SOXR_SRC="${SOXR_SRC:-}" -DGGML_INCLUDE_DIR="$PREFIX/include" -DLLAMA_INCLUDE_DIR="$PREFIX/include" \
        -DGGML_LIB_DIR="$PREFIX/lib"
    quietly "$BUILD/native-build.log" cmake --build "$NATIVE" -j2
}

main() {
    mkdir -p "$BUILD"
    ensure_packages
    cross_build_llama
    cross_build_native
    log "tiny checkpoints and GGUF files for every golden case (x86-64 host)"
    local cases
    mapfile -t cases < <("$VENV_PYTHON" scripts/aarch64_prepare.py "$BUILD/goldens")
    log "golden_check under qemu-aarch64 -cpu $QEMU_CPU"
    qemu-aarch64 -L "$SYSROOT" -cpu "$QEMU_CPU" "$NATIVE/tests/golden_check" "${cases[@]}"
    log "done"
}

main "$@"
