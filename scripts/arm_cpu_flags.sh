# llama_cpu_flags [CPUINFO]: llama.cpp's CMake flags for the CPU backend on the ARM CPU this runs
# on, from the features EVERY core reports: the words all the `Features` lines of CPUINFO
# (default /proc/cpuinfo) share. A big.LITTLE SoC may pair cores of different extensions, and a
# process on a core without one of them dies of SIGILL where ggml uses it; ggml's ARM extensions
# are fixed when it is compiled, and GGML_NATIVE=ON takes them from the core CMake happened to run
# on (-mcpu=native). So GGML_NATIVE=OFF and GGML_CPU_ARM_ARCH: asimddp -> +dotprod, asimdhp ->
# +fp16, i8mm -> +i8mm on armv8.2-a; none of the three on every core (or no Features line):
# the ARMv8.0 baseline, armv8-a (kazetts' own kernels pick dotprod / i8mm at run time anyway).
# Sourced by scripts/termux_setup.sh and scripts/aarch64_pip_check.sh; tests/test_arm_cpu_flags.py.
llama_cpu_flags() {
    local arch
    arch=$(awk '
        /^Features[ \t]*:/ {
            cores++
            line = $0
            sub(/^[^:]*:/, "", line)
            split("", seen)
            n = split(line, words, /[ \t]+/)
            for (i = 1; i <= n; i++)
                if (words[i] != "" && !(words[i] in seen)) { seen[words[i]] = 1; count[words[i]]++ }
        }
        END {
            ext = ""
            if (cores > 0 && count["asimddp"] == cores) ext = ext "+dotprod"
            if (cores > 0 && count["asimdhp"] == cores) ext = ext "+fp16"
            if (cores > 0 && count["i8mm"] == cores) ext = ext "+i8mm"
            print (ext == "" ? "armv8-a" : "armv8.2-a" ext)
        }' "${1:-/proc/cpuinfo}") || return 1
    echo "-DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=$arch"
}
