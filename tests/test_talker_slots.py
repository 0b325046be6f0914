"""The talker's slots (utterances advancing in lockstep, one joining later with its prompt decoded
between the others' steps, one leaving early and one taking its slot) give each utterance, after
every call, the hidden state and logits it gets alone in a talker of one slot, bit for bit:
kz::Talker in C++ (native/tests/talker_slots, with flash attention and without) and the Python
engine's Talker over its C API (kz_talker). On x86-64 the decoding steps of a Q8_0 talker share
decodes and those of an F32 one cannot (ggml's F32 products of several columns sum in another
order than those of one): each of its slots decodes alone."""

from __future__ import annotations

import os
import pathlib
import platform
import subprocess

import numpy as np
import pytest

from kazetts.stages.talker import Talker

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


N_CTX = 512


def _utterance(rng, hidden: int, prefill: int, steps: int) -> list[np.ndarray]:
    """A prompt of `prefill` rows, then one row a step."""
    rows = rng.standard_normal((prefill + steps, hidden)).astype(np.float32) * 0.05
    return [rows[:prefill]] + [rows[prefill + i : prefill + i + 1] for i in range(steps)]


def _alone(path, utterances) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """Each utterance's outputs after each of its calls, in a talker of one slot."""
    talker = Talker(path, threads=2, n_ctx=N_CTX)
    outputs = []
    for calls in utterances:
        talker.reset()
        outputs.append([talker.step(rows) for rows in calls])
    talker.close()
    return outputs


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
def test_python_talker_slots_give_each_utterance_its_bits_alone(tiny_gguf, weights):
    """Three slots: two utterances start together (one prompt longer than n_batch), a third joins
    with its prompt among their steps (a larger reset: the others move to a larger context), the
    second is dropped midway and a fourth takes its slot; positions pass 256 (flash attention's
    split-KV rule on 2 threads). After every call each stepped slot has the hidden state and codec
    logits of its utterance alone, and a slot not stepped keeps its own."""
    path = tiny_gguf("tiny", "custom_voice", weights)[0]
    talker = Talker(path, threads=2, n_ctx=N_CTX, n_batch=64, slots=3)
    rng = np.random.default_rng(7)
    H = talker.hidden_size
    utterances = [_utterance(rng, H, 70, 200), _utterance(rng, H, 30, 60), _utterance(rng, H, 5, 290)]
    utterances.append(_utterance(rng, H, 12, 150))
    want = _alone(path, utterances)
    # tick -> [(slot, utterance, positions of its reset)]
    starts = {0: [(0, 0, 200), (1, 1, 200)], 5: [(2, 2, 400)], 20: [(1, 3, 300)]}
    running: dict[int, list[int]] = {}  # slot -> [utterance, calls done]
    last: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # slot -> outputs it must keep
    decodes, calls = talker.decodes, 0
    tick = 0
    while tick in starts or running:
        for slot, u, positions in starts.get(tick, []):
            talker.reset_slot(slot, positions)
            running[slot] = [u, 0]
        talker.step_slots([(slot, utterances[u][done]) for slot, (u, done) in running.items()])
        calls += sum(-(-len(utterances[u][done]) // talker.n_batch) for u, done in running.values())
        for slot, (u, done) in list(running.items()):
            hidden, logits = talker.outputs(slot)
            want_hidden, want_logits = want[u][done]
            assert np.array_equal(hidden, want_hidden) and np.array_equal(logits, want_logits), (
                f"slot {slot}, utterance {u}, call {done} (tick {tick}): max diff hidden "
                f"{np.abs(hidden - want_hidden).max()}, logits {np.abs(logits - want_logits).max()}"
            )
            last[slot] = hidden, logits
            running[slot][1] += 1
            if running[slot][1] == len(utterances[u]):
                del running[slot]
        for slot in set(last) - set(running):
            assert all(np.array_equal(a, b) for a, b in zip(talker.outputs(slot), last[slot]))
        tick += 1
    assert talker.capacity == 512
    if platform.machine() == "x86_64":
        assert talker.shares_steps == (weights == "q8_0")
    # shared steps: fewer decodes than calls (a slot alone would take one a chunk)
    assert (talker.decodes - decodes < calls) == talker.shares_steps
    talker.close()


def test_python_talker_slots_refuse_bad_calls(tiny_gguf):
    talker = Talker(tiny_gguf("tiny", "custom_voice", "f32")[0], threads=1, n_ctx=32, slots=2)
    row = np.zeros((1, talker.hidden_size), np.float32)
    talker.reset_slot(1, 2)
    with pytest.raises(ValueError, match="no slot 2 in a talker of 2"):
        talker.step_slots([(2, row)])
    with pytest.raises(ValueError, match="no slot 2 in a talker of 2"):
        talker.outputs(2)
    with pytest.raises(ValueError, match="listed twice"):
        talker.step_slots([(1, row), (1, row)])
    with pytest.raises(ValueError, match="does not fit the talker's context of 32"):
        talker.reset_slot(0, 33)
    talker.step_slots([(1, row), (0, row)])
    with pytest.raises(ValueError, match="more than the 32 positions"):
        talker.step_slots([(0, np.zeros((32, talker.hidden_size), np.float32))])
    with pytest.raises(ValueError, match="1 to 256 slots"):
        Talker(talker.file.path, threads=1, n_ctx=32, slots=0)
    talker.close()
    with pytest.raises(ValueError, match="the talker is closed"):
        talker.step(row)
