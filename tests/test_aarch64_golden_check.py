"""native/tests/golden_check (what `make aarch64-test` runs under qemu) built for this host:
it passes on an intact golden case and its gates fail on a corrupted copy of the same case; its
conv gemm check (kz::conv_gemm_op against a scalar reference, bit for bit) and its rules check
(rules.h without a model) pass."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import DUMPS, run_script

CASE = "cv_english_stream"


@pytest.fixture(scope="module")
def golden_check(native_tests) -> pathlib.Path:
    return native_tests / "tests" / "golden_check"


def _corrupt(case_dir: pathlib.Path) -> None:
    """One small error per stage, each past its gate."""
    codes = np.load(case_dir / "codes.npy")
    codes[2, 7] = (codes[2, 7] + 1) % 2048  # a code predictor code: its codes, its embedding sum, the codec
    np.save(case_dir / "codes.npy", codes)
    hidden = np.load(case_dir / "talker_hidden.npy")
    hidden[5] = -hidden[5]
    np.save(case_dir / "talker_hidden.npy", hidden)


def test_passes_on_goldens_and_fails_on_corrupted_ones(golden_check, tmp_path):
    dumps = tmp_path / "dumps"
    shutil.copytree(DUMPS / CASE, dumps / "intact")
    shutil.copytree(DUMPS / CASE, dumps / "corrupted")
    _corrupt(dumps / "corrupted")
    prepared = run_script(sys.executable, "aarch64_prepare.py", tmp_path / "out", dumps)
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    run = subprocess.run([golden_check, *prepared.stdout.split()], capture_output=True, text=True, timeout=600)
    print(run.stdout)
    lines = run.stdout.splitlines()
    intact = [line for line in lines if line.startswith(("PASS intact", "FAIL intact"))]
    failed = {line.split(":")[0] for line in lines if line.startswith("FAIL corrupted")}
    assert len(intact) == 10 and all(line.startswith("PASS") for line in intact)
    assert failed == {
        "FAIL corrupted code predictor codes",
        "FAIL corrupted code predictor embedding sum",
        "FAIL corrupted codec f32",
        "FAIL corrupted codec f16",
        "FAIL corrupted talker hidden and logits",
        "FAIL corrupted engine codes",
    }
    assert run.returncode == 1


def test_conv_gemm_op_equals_its_scalar_reference(golden_check):
    """native/tests/check_conv_gemm.cpp: odd shapes, every edge mode, F32 and F16 weights, 1 and 2
    threads, whole and chunked, each output equal in its bits to a scalar sum in the kernel's order."""
    run = subprocess.run([golden_check, "--stage", "conv gemm"], capture_output=True, text=True, timeout=120)
    print(run.stdout)
    gates = [line for line in run.stdout.splitlines() if line.startswith(("PASS conv gemm", "FAIL conv gemm"))]
    assert gates and all(line.startswith("PASS") for line in gates), run.stdout + run.stderr
    assert run.returncode == 0


def test_rules_stage_passes_without_a_model(golden_check):
    """native/tests/check_rules.cpp: rules.h's WSOLA stream (length, the same samples however the
    input is cut) and joiner (the 10 ms held back, the crossfade) through the C ABI."""
    run = subprocess.run([golden_check, "--stage", "rules"], capture_output=True, text=True, timeout=120)
    print(run.stdout)
    gates = [line for line in run.stdout.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert len(gates) == 6 and all(line.startswith("PASS") for line in gates), run.stdout + run.stderr
    assert run.returncode == 0


def test_kernel_gate_fails_on_a_wrong_expectation(golden_check):
    """The first gate with --expect-isa (what scripts/aarch64_goldens.sh passes per qemu CPU):
    it passes with the kernel this CPU gets and fails with another, so a wrong dispatch fails.
    Without it (as above) the gate is skipped off ARM with its reason printed."""
    bare = subprocess.run([golden_check, "--stage", "none"], capture_output=True, text=True, timeout=120)
    line = next(line for line in bare.stdout.splitlines() if line.startswith("INFO q8 kernel for this CPU"))
    assert "not gated" in line and bare.returncode == 0
    best = line.split("q8::best_isa ")[1].split()[0]
    for expected, ok in [(best, True), ("neon-dotprod" if best != "neon-dotprod" else "neon", False)]:
        run = subprocess.run(
            [golden_check, "--stage", "none", "--expect-isa", expected], capture_output=True, text=True, timeout=120
        )
        print(run.stdout)
        assert f"{'PASS' if ok else 'FAIL'} q8 kernel for this CPU" in run.stdout
        assert run.returncode == (0 if ok else 1)
