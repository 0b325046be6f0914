#!/usr/bin/env bash
# The native golden tests on 64-bit ARM, from an x86-64 Debian host: cross-builds llama.cpp's
# ggml + llama (from the llama-cpp-python sdist) at the ARMv8.0 baseline and native/ for aarch64
# (kazetts' own ARM kernels are chosen at run time from the CPU's hwcaps), then runs
# native/tests/golden_check under qemu-aarch64 at three feature levels from that one build:
# a Cortex-A53 (ARMv8.0: NEON only), a Cortex-A76 (a phone big core: dotprod, fp16) and qemu's
# "max" CPU (i8mm). Same gates as the Python tests on x86-64, plus, per level, that kazetts'
# Q8_0 kernel is the one the CPU calls for, and across levels, that the Q8_0 code predictor's
# outputs are the same bits. Entry point: make aarch64-test.
#
# Environment (make passes them): LLAMA_SRC (unpacked sdist), VENV_PYTHON (x86 runtime, used to
# build and convert the tiny checkpoints), SOXR_SRC (the unpacked python-soxr sdist: libsoxr in the
# cross-built libkazetts), KAZETTS_CACHE (the cross-built libraries are cached
# there, keyed by sources, flags and compiler), QEMU_CPUS (the qemu CPU models to run at, default
# "cortex-a53 cortex-a76 max"; a model expected_kernel does not know is given as MODEL:KERNEL),
# QEMU_FULL (the models of QEMU_CPUS that run every stage, default cortex-a53; "all": each of
# them; the others run LEVEL_STAGES only).
set -euo pipefail
# shellcheck source=scripts/apt_packages.sh
source "$(dirname "$0")/apt_packages.sh"
cd "$(dirname "$0")/.."

: "${LLAMA_SRC:?set LLAMA_SRC to the unpacked llama-cpp-python sdist (make aarch64-test does)}"
: "${VENV_PYTHON:?set VENV_PYTHON to the x86-64 runtime interpreter (make aarch64-test does)}"
KAZETTS_CACHE=${KAZETTS_CACHE:-$HOME/.cache/kazetts}
QEMU_CPUS=${QEMU_CPUS:-cortex-a53 cortex-a76 max}
QEMU_FULL=${QEMU_FULL:-cortex-a53}
# The stages whose instructions depend on the CPU's level: those of kazetts' kernels chosen from
# the hwcaps (the Q8_0 code predictor and talker, on the long case; the codec's FP16 sums, on the
# conv gemm shapes and the long case). ggml (built for ARMv8.0, no
# run-time dispatch) and the rest of native/ run the same instructions at every level (every gate
# line of a full run, figures included, was the same at the three levels, but for these stages and
# the first gate): the full run on the ARMv8.0 core shows that none of it needs more. At the other
# levels these stages and the first gate (always run) check the dispatch, and the digests (the
# code predictor's Q8_0 file and Q8_0-at-load outputs) show the same bits as on the ARMv8.0 core,
# so the Q8_0 agreement gates of the full run hold there too.
LEVEL_STAGES=("code predictor kernels" "quantized talkers" "conv gemm" "codec kernels")
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
ensure_packages() { apt_packages aarch64-linux-gnu-g++:g++-aarch64-linux-gnu qemu-aarch64:qemu-user cmake:cmake; }

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

# The kazetts Q8_0 kernel golden_check must find on a qemu CPU model (qemu 7.2's models, with the
# features of target/arm/cpu64.c): the ARMv8.0 cores NEON only, the ARMv8.2 ones dotprod, "max"
# i8mm. MODEL:KERNEL gives it for another model.
expected_kernel() {
    case $1 in
        *:*) echo "${1#*:}" ;;
        cortex-a35 | cortex-a53 | cortex-a57 | cortex-a72 | a64fx) echo neon ;;
        cortex-a76 | neoverse-n1) echo neon-dotprod ;;
        max) echo neon-i8mm ;;
        *) echo "no expected kernel for qemu CPU '$1': give it as $1:KERNEL (neon, neon-dotprod, neon-i8mm)" >&2; return 1 ;;
    esac
}

# golden_check at each level, each with its log; then one line per level and the Q8_0 code
# predictor's digest compared across levels. Fails when a level fails or the digests differ.
run_levels() {
    local spec cpu kernel start status digest stage rc=0 first="" summary=() args long_cases
    mapfile -t long_cases < <(grep -l '^mmproj_q8_0 ' "${cases[@]}")
    for spec in $QEMU_CPUS; do
        cpu=${spec%%:*}
        kernel=$(expected_kernel "$spec")
        args=(--expect-isa "$kernel")
        if [ "$QEMU_FULL" = all ] || [[ " $QEMU_FULL " == *" $cpu "* ]]; then
            args+=("${cases[@]}")
            log "golden_check under qemu-aarch64 -cpu $cpu (expected kernel: $kernel), every stage"
        else
            for stage in "${LEVEL_STAGES[@]}"; do args+=(--stage "$stage"); done
            args+=("${long_cases[@]}")
            log "golden_check under qemu-aarch64 -cpu $cpu (expected kernel: $kernel), the stages of the hwcaps' kernels"
        fi
        start=$SECONDS
        status=0
        qemu-aarch64 -L "$SYSROOT" -cpu "$cpu" "$NATIVE/tests/golden_check" "${args[@]}" \
            | tee "$BUILD/golden_check-$cpu.log" || status=$?
        digest=$(grep '^DIGEST ' "$BUILD/golden_check-$cpu.log" | cut -c8- | sort | paste -sd ';')
        summary+=("$(printf '%-12s %-13s %5d s  %s, exit %d; %s' "$cpu" "$kernel" $((SECONDS - start)) \
            "$(tail -n 1 "$BUILD/golden_check-$cpu.log")" "$status" "${digest:-no digest}")")
        [ "$status" -eq 0 ] || rc=1
        [ -n "$digest" ] && [ "$digest" = "${first:=$digest}" ] || rc=1
    done
    log "levels (cpu, kernel, time, gates, exit status, code predictor digest)"
    printf '  %s\n' "${summary[@]}"
    [ "$rc" -eq 0 ] || echo "FAIL: a level failed, or the code predictor's outputs differ between levels" >&2
    return $rc
}

main() {
    mkdir -p "$BUILD"
    ensure_packages
    cross_build_llama
    cross_build_native
    log "tiny checkpoints and GGUF files for every golden case (x86-64 host)"
    "$VENV_PYTHON" scripts/aarch64_prepare.py "$BUILD/goldens" >"$BUILD/cases.txt"
    mapfile -t cases <"$BUILD/cases.txt"
    run_levels
    log "done"
}

main "$@"
