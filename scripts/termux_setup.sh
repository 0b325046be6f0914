#!/usr/bin/env bash
# kazetts on an Android phone or tablet, in Termux (also Debian/Ubuntu on 64-bit ARM boards):
# system packages, kazetts without torch in .venv, llama-cpp-python and native/ compiled for
# this CPU, then a smoke synthesis on the tiny synthetic model checked against the goldens.
#
#   git clone <kazetts> && cd kazetts && bash scripts/termux_setup.sh
#
# Takes ~30-60 min on a phone (llama-cpp-python compiles from source). Environment knobs:
#   KAZETTS_CMAKE_ARGS  CMake flags of llama-cpp-python (default: -DGGML_NATIVE=ON, i.e. every
#                       extension of this CPU: NEON, dotprod, fp16, i8mm where present)
#   KAZETTS_SKIP_SMOKE  set to 1 to stop after the build
# Thread choice, thermals and memory per model: docs/android.md.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
log() { printf '== %s\n' "$*"; }

install_system_packages() {
    if command -v pkg >/dev/null && [ -n "${TERMUX_VERSION:-}" ]; then
        log "Termux packages"
        # python-numpy: a prebuilt numpy (pip would compile it); libsndfile + libffi: soundfile;
        # util-linux: taskset, to keep the threads on the big cores.
        pkg install -y python python-pip python-numpy clang cmake ninja make git binutils \
            libsndfile libffi util-linux
    elif command -v apt-get >/dev/null; then
        log "Debian/Ubuntu packages"
        local sudo=()
        [ "$(id -u)" -eq 0 ] || sudo=(sudo)
        "${sudo[@]}" apt-get update -qq
        DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq python3 python3-venv python3-pip \
            python3-numpy g++ cmake ninja-build make git libsndfile1 util-linux >/dev/null
    else
        echo "neither Termux's pkg nor apt-get found: install python3, a C++ compiler, cmake, ninja, make, git and libsndfile" >&2
        exit 1
    fi
}

# The venv sees the system numpy, so pip does not compile one.
install_kazetts() {
    local python
    python=$(command -v python3 || command -v python)
    test -x "$VENV/bin/python" || "$python" -m venv --system-site-packages "$VENV"
    log "kazetts + llama-cpp-python (compiled here with ${KAZETTS_CMAKE_ARGS:--DGGML_NATIVE=ON}; no torch)"
    CMAKE_ARGS=${KAZETTS_CMAKE_ARGS:--DGGML_NATIVE=ON} "$VENV/bin/pip" install -q -e '.[synthetic,server]'
}

# native/ against the ggml that llama-cpp-python just built. -o: the venv is installed above,
# without the Makefile's test extras (tiktoken and tokenizers would need a Rust toolchain).
# scikit-build-core: make llama-src downloads the sdist without build isolation, and pip still
# reads its metadata through the build backend.
build_native() {
    log "native code predictor and codec"
    "$VENV/bin/pip" install -q scikit-build-core
    make -o "$VENV/.installed" native PYTHON="$VENV/bin/python"
}

# CPUs of the fastest clusters: every core whose top frequency is above the slowest cluster's
# (all of them on a single-cluster CPU, or when cpufreq is not readable).
big_cores() {
    local cpu freq slowest="" cores=()
    for cpu in /sys/devices/system/cpu/cpu[0-9]*; do
        freq=$(cat "$cpu/cpufreq/cpuinfo_max_freq" 2>/dev/null) || continue
        if [ -z "$slowest" ] || [ "$freq" -lt "$slowest" ]; then slowest=$freq; fi
    done
    for cpu in /sys/devices/system/cpu/cpu[0-9]*; do
        freq=$(cat "$cpu/cpufreq/cpuinfo_max_freq" 2>/dev/null) || continue
        [ "$freq" -gt "$slowest" ] && cores+=("${cpu##*cpu}")
    done
    if [ ${#cores[@]} -eq 0 ]; then
        seq -s, 0 $(($(nproc) - 1))
    else
        (IFS=,; echo "${cores[*]}")
    fi
}

smoke_synthesis() {
    local cores threads py=$VENV/bin/python
    cores=$(big_cores)
    threads=$(tr ',' '\n' <<<"$cores" | wc -l)
    log "smoke synthesis on the tiny synthetic model: $threads threads pinned to CPUs $cores"
    "$py" scripts/make_checkpoint.py tiny models/tiny-custom_voice -q
    "$py" -m kazetts convert models/tiny-custom_voice -o models/tiny --type f32 -q
    taskset -c "$cores" "$py" -m kazetts say "Bonjour ! Le 14 juillet 1789, à Paris." --model models/tiny \
        --language french --speaker vivian --greedy --threads "$threads" -o out/smoke.wav --verbose
    taskset -c "$cores" "$py" -m kazetts validate models/tiny dumps --threads "$threads"
    log "out/smoke.wav written (synthetic weights: noise, not speech); every golden stage passed"
}

install_system_packages
install_kazetts
build_native
[ "${KAZETTS_SKIP_SMOKE:-0}" = 1 ] || smoke_synthesis
