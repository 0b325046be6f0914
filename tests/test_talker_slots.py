"""native/tests/talker_slots: kz::Talker's slots (utterances advancing in lockstep, one joining
later with its prompt decoded between the others' steps, one leaving early and one taking its
slot) give each utterance, after every call, the hidden state and logits it gets alone in a
talker of one slot, bit for bit, with flash attention and without. On x86-64 the decoding steps
of a Q8_0 talker share decodes and those of an F32 one cannot (ggml's F32 products of several
columns sum in another order than those of one): each of its slots decodes alone."""

from __future__ import annotations

import os
import pathlib
import platform
import subprocess

import pytest

SYNTHETIC_0_6B = (
    pathlib.Path(os.environ.get("KAZETTS_CACHE", pathlib.Path.home() / ".cache" / "kazetts"))
    / "models"
    / "synthetic-0.6b-base-0-gguf-q8_0"
    / "synthetic-0.6b-base-0-talker-q8_0.gguf"
)


def run_talker_slots(native_tests: pathlib.Path, *talkers: pathlib.Path) -> list[str]:
    """The program's lines; every gate must pass."""
    run = subprocess.run(
        [native_tests / "tests" / "talker_slots", *talkers], capture_output=True, text=True, timeout=900
    )
    print(run.stdout)
    gates = [line for line in run.stdout.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert len(gates) == 2 * len(talkers) and all(line.startswith("PASS") for line in gates), run.stdout + run.stderr
    assert run.returncode == 0
    return run.stdout.splitlines()


def shared(lines: list[str], talker: pathlib.Path) -> set[bool]:
    """Whether the steps shared decodes, per flash attention setting, on one talker file."""
    return {"steps shared: yes" in line for line in lines if line.startswith(f"INFO talker slots {talker.name},")}


def test_tiny_talkers(native_tests, tiny_gguf):
    f32, q8_0 = tiny_gguf("tiny", "custom_voice", "f32")[0], tiny_gguf("tiny", "custom_voice", "q8_0")[0]
    lines = run_talker_slots(native_tests, f32, q8_0)
    if platform.machine() == "x86_64":
        assert shared(lines, f32) == {False} and shared(lines, q8_0) == {True}


@pytest.mark.skipif(not SYNTHETIC_0_6B.exists(), reason=f"{SYNTHETIC_0_6B} missing (made by `make bench`)")
def test_synthetic_0_6b_q8_0_talker(native_tests):
    """The 0.6B talker's 28 layers and the KZQ8 kernels (x86-64 AVX-512 VNNI, ARM) for its products."""
    lines = run_talker_slots(native_tests, SYNTHETIC_0_6B)
    if platform.machine() == "x86_64":
        assert shared(lines, SYNTHETIC_0_6B) == {True}
