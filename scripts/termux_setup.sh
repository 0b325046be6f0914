#!/usr/bin/env bash
# kazetts on an Android phone or tablet, in Termux (also Debian/Ubuntu on 64-bit ARM boards):
# system packages, then kazetts without torch in .venv through pip (llama-cpp-python and
# libkazetts compiled for this CPU), then a smoke synthesis on the tiny synthetic model checked
# against the goldens.
#
#   git clone <kazetts> && cd kazetts && bash scripts/termux_setup.sh
#
# Takes ~30-60 min on a phone (llama-cpp-python compiles from source). Environment knobs:
#   KAZETTS_CMAKE_ARGS  CMake flags of llama-cpp-python (default: llama_cpu_flags, in
#                       scripts/arm_cpu_flags.sh: GGML_NATIVE=OFF and the extensions dotprod,
#                       fp16, i8mm that EVERY core of this CPU reports, else the ARMv8.0 baseline)
#   KAZETTS_SKIP_SMOKE  set to 1 to stop after the build
# Thread choice, thermals and memory per model: docs/android.md.
set -euo pipefail
# shellcheck source=scripts/arm_cpu_flags.sh
source "$(dirname "${BASH_SOURCE[0]}")/arm_cpu_flags.sh"

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

# kazetts through pip and its build backend, as users install it, but its own build without
# isolation: an isolated build environment would not see the system numpy and pip would compile
# one for llama-cpp-python. So the build requirements (pyproject.toml) come first, into the venv,
# which sees the system numpy: llama-cpp-python compiles here for this CPU; then kazetts' wheel
# is built against it (libkazetts inside). Only that build skips isolation: the dependencies pip
# compiles from their sdists (soxr has no Android wheel) need their own build requirements
# (soxr: nanobind, setuptools_scm), which an isolated build installs. No test extras: tiktoken
# and tokenizers would need a Rust toolchain.
install_kazetts() {
    local python py=$VENV/bin/python cmake_args
    python=$(command -v python3 || command -v python)
    test -x "$py" || "$python" -m venv --system-site-packages "$VENV"
    cmake_args=${KAZETTS_CMAKE_ARGS:-$(llama_cpu_flags)}
    log "build requirements: scikit-build-core, llama-cpp-python (compiled with $cmake_args)"
    "$py" -m pip install -q scikit-build-core
    # shellcheck disable=SC2046  # one argument per requirement
    CMAKE_ARGS=$cmake_args "$py" -m pip install -q \
        $("$py" -m scikit_build_core.build requires | "$py" -c "import json, sys; print(*json.load(sys.stdin))")
    log "kazetts with libkazetts (no torch)"
    rm -rf build/termux-wheel
    "$py" -m pip wheel -q --no-deps --no-build-isolation -w build/termux-wheel .
    # pip keeps an installed kazetts of the same version over a local wheel: a re-run replaces it
    "$py" -m pip uninstall -q -y kazetts
    "$py" -m pip install -q "$(echo build/termux-wheel/kazetts-*.whl)[synthetic,server,wyoming]"
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
    # the installed command: `python -m kazetts` here would import the source tree's kazetts/
    local cores threads py=$VENV/bin/python kazetts=$VENV/bin/kazetts
    cores=$(big_cores)
    threads=$(tr ',' '\n' <<<"$cores" | wc -l)
    log "smoke synthesis on the tiny synthetic model: $threads threads pinned to CPUs $cores"
    "$py" scripts/make_checkpoint.py tiny models/tiny-custom_voice -q
    "$kazetts" convert models/tiny-custom_voice -o models/tiny --type f32 -q
    taskset -c "$cores" "$kazetts" say "Bonjour ! Le 14 juillet 1789, à Paris." --model models/tiny \
        --language french --speaker vivian --greedy --threads "$threads" -o out/smoke.wav --verbose
    taskset -c "$cores" "$kazetts" validate models/tiny dumps --threads "$threads"
    log "out/smoke.wav written (synthetic weights: noise, not speech); every golden stage passed"
}

main() {
    cd "$(dirname "$0")/.."
    install_system_packages
    install_kazetts
    [ "${KAZETTS_SKIP_SMOKE:-0}" = 1 ] || smoke_synthesis
}

# run, not sourced (a test sources it for its functions)
if [ "${BASH_SOURCE[0]}" = "$0" ]; then main "$@"; fi
