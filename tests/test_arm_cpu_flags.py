"""llama_cpu_flags (scripts/arm_cpu_flags.sh), the llama.cpp flags scripts/termux_setup.sh builds
llama-cpp-python with on a device: only the extensions EVERY core reports in /proc/cpuinfo, so
that no thread on a little core meets an instruction it lacks (SIGILL). Fake cpuinfo files of
real SoC layouts; sourcing termux_setup.sh defines the function and runs nothing."""

from __future__ import annotations

import pathlib
import subprocess

import pytest
from conftest import REPO

A53 = "fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid"  # ARMv8.0 (A53, A73)
A55 = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp"  # A55, A76
A710 = (  # ARMv9.0 (A510, A710, X2)
    "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 "
    "sm3 sm4 asimddp sha512 asimdfhm dit uscat ilrcpc flagm ssbs sb paca pacg dcpodp flagm2 frint i8mm bf16 bti"
)
BASELINE = "-DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=armv8-a"


def cpuinfo(*cores: str) -> str:
    """/proc/cpuinfo of an arm64 Linux with these cores' Features, in its layout."""
    return "".join(
        f"processor\t: {i}\nBogoMIPS\t: 38.40\nFeatures\t: {features}\nCPU implementer\t: 0x41\n"
        f"CPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: 0xd05\nCPU revision\t: 0\n\n"
        for i, features in enumerate(cores)
    )


CASES = {
    "a53 + a73 (ARMv8.0)": (cpuinfo(*[A53] * 8), BASELINE),
    "a55 + a76": (cpuinfo(*[A55] * 4, *[A55] * 4), "-DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod+fp16"),
    "a510 + a710 + x2": (
        cpuinfo(*[A710] * 8),
        "-DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod+fp16+i8mm",
    ),
    "dotprod on the big cores only": (cpuinfo(*[A53] * 4, *[A55] * 4), BASELINE),
    "i8mm on the big cores only": (
        cpuinfo(*[A55] * 4, *[A710] * 4),
        "-DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod+fp16",
    ),
    "one core": (cpuinfo(A55), "-DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod+fp16"),
    "no Features line (x86-64, or qemu-user's host view)": (
        "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f\n\n",
        BASELINE,
    ),
    "Features without a tab, words spaced twice": (
        "Features: fp  asimd asimdhp asimddp \nFeatures:fp asimd asimddp asimdhp\n",
        "-DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod+fp16",
    ),
}


def flags(script: str, path: pathlib.Path, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", 'source "$1" && llama_cpu_flags "$2"', "bash", str(REPO / "scripts" / script), str(path)],
        check=False,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=30,
    )


@pytest.mark.parametrize("case", CASES)
def test_flags_are_what_every_core_has(case, tmp_path):
    text, want = CASES[case]
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    run = flags("arm_cpu_flags.sh", path, tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout == want + "\n"


def test_termux_setup_sourced_defines_it_and_runs_nothing(tmp_path):
    """termux_setup.sh's default KAZETTS_CMAKE_ARGS; sourcing it (from another directory)
    installs nothing and prints only the function's line."""
    path = tmp_path / "cpuinfo"
    path.write_text(cpuinfo(*[A53] * 4, *[A55] * 4))
    run = flags("termux_setup.sh", path, tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout == BASELINE + "\n" and run.stderr == ""
    assert "${KAZETTS_CMAKE_ARGS:-$(llama_cpu_flags)}" in (REPO / "scripts" / "termux_setup.sh").read_text()


def test_missing_cpuinfo_fails(tmp_path):
    run = flags("arm_cpu_flags.sh", tmp_path / "absent", tmp_path)
    assert run.returncode != 0 and run.stdout == ""
