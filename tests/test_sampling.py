"""Sampling: the engine's talker sampler (kazetts.stages.sampling, libkazetts' kz_talker_choose)
against the goldens and in behaviour, and the numpy statement of the rules
(kazetts.validation.oracles.sampling) against HF's own logits processors (transformers 4.57.3, as
qwen-tts 0.1.1's generate configures them); tests/test_native_engine.py holds the two together."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from conftest import DUMPS, run_script
from kazetts import native
from kazetts.request import OLD_NAMES, REPETITION_PENALTY, TEMPERATURE, TOP_K, TOP_P, Request, field_names
from kazetts.stages.sampling import SamplerConfig, TalkerSampler, code_predictor_config, talker_config
from kazetts.validation import goldens
from kazetts.validation.oracles import sampling as oracle
from kazetts.validation.oracles.sampling import CodePredictorSampler, apply_top_k, margin, talker_suppress_tokens

CASE_NAMES = [case.name for case in goldens.CASES]


# --------------------------------------------------------------------------- goldens (greedy)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_greedy_talker_replay_reproduces_cb0_and_stop(name):
    """The engine's sampler picks the reference's CB0 on its logits; the oracle's processed row
    says how close a wrong pick was."""
    manifest, a = goldens.load_case(DUMPS / name)
    logits, codes = a["talker_logits"], a["codes"]
    eos = manifest["codec_eos_token_id"]
    sampler = TalkerSampler.for_talker(logits.shape[1], eos, greedy=True)
    processor = oracle.TalkerSampler.for_talker(logits.shape[1], eos, greedy=True)
    for frame in range(codes.shape[0]):
        processed = processor.process(logits[frame])
        token = sampler.choose(logits[frame])
        processor.history.append(token)
        assert token == codes[frame, 0], (
            f"{name} frame {frame}: chose {token}, reference {codes[frame, 0]}; "
            f"margin after processors {margin(processed):.3g}, "
            f"reference id's processed logit {processed[codes[frame, 0]]:.6g} vs chosen {processed[token]:.6g}"
        )
    assert logits.shape[0] == codes.shape[0] + 1
    last = logits[codes.shape[0]]
    processed = processor.process(last)
    token = sampler.choose(last)
    assert (token == eos) == (manifest["stopped_by"] == "eos"), (
        f"{name}: call after the last frame chose {token} (eos {eos}), stopped_by {manifest['stopped_by']}; "
        f"margin {margin(processed):.3g}"
    )


@pytest.mark.parametrize("name", CASE_NAMES)
def test_greedy_code_predictor_matches_codes(name):
    _, a = goldens.load_case(DUMPS / name)
    cp_logits, codes = a["cp_logits"], a["codes"]
    cp = CodePredictorSampler(SamplerConfig.code_predictor(greedy=True))
    for frame in range(cp_logits.shape[0]):
        for group in range(cp_logits.shape[1]):
            row = cp_logits[frame, group]
            token = cp.choose(row)
            assert token == codes[frame, group + 1], (
                f"{name} frame {frame} CB{group + 1}: chose {token}, reference {codes[frame, group + 1]}, "
                f"margin {margin(cp.process(row)):.3g}"
            )


# --------------------------------------------------------------------------- HF parity

PARITY_CASE = "cv_english_nonstream"
PARITY_SETTINGS = [
    {"do_sample": False, "top_k": 50, "top_p": 1.0, "temperature": 0.9, "repetition_penalty": 1.05},
    {"do_sample": True, "top_k": 50, "top_p": 1.0, "temperature": 0.9, "repetition_penalty": 1.05},
    {"do_sample": True, "top_k": 20, "top_p": 0.8, "temperature": 0.7, "repetition_penalty": 1.3},
    {"do_sample": True, "top_k": 0, "top_p": 0.95, "temperature": 1.0, "repetition_penalty": 1.05},
]
TALKER_EXPECTED = [
    "RepetitionPenaltyLogitsProcessor",
    "MinLengthLogitsProcessor",
    "MinNewTokensLengthLogitsProcessor",
    "SuppressTokensLogitsProcessor",
]


def _config(s: dict, code_predictor: bool = False) -> SamplerConfig:
    if code_predictor:
        return SamplerConfig.code_predictor(
            temperature=s["temperature"], top_k=s["top_k"], top_p=s["top_p"], greedy=not s["do_sample"]
        )
    return SamplerConfig(
        temperature=s["temperature"],
        top_k=s["top_k"],
        top_p=s["top_p"],
        repetition_penalty=s["repetition_penalty"],
        min_new_tokens=2,
        greedy=not s["do_sample"],
    )


def _parity_rows(manifest, a):
    """Recorded rows at steps 0, 1, 2, 3, 10 and the last call, plus a crafted row with ties at
    the top-k threshold and the reference's CB0 history at each of those steps."""
    logits, cb0 = a["talker_logits"], a["codes"][:, 0].astype(np.int64)
    steps = [0, 1, 2, 3, 10, logits.shape[0] - 1]
    rows = [logits[s] for s in steps]
    tied = logits[5].copy()
    eos = manifest["codec_eos_token_id"]
    order = [
        int(i)
        for i in np.argsort(tied)[::-1]
        if i < logits.shape[1] - 1024 and i != eos and i not in set(cb0[:5].tolist())
    ]
    tied[order[40:70]] = tied[order[40]]  # 30 ordinary ids tied across the top-50 threshold
    rows.append(tied)
    steps.append(5)
    histories = np.zeros((len(rows), max(steps) + 1), dtype=np.int64)
    for i, s in enumerate(steps):
        histories[i, :s] = cb0[:s]
    return np.stack(rows).astype(np.float32), histories, np.array(steps, dtype=np.int64)


def _assert_same(ours: np.ndarray, theirs: np.ndarray, what: str):
    assert ours.dtype == np.float32 and theirs.dtype == np.float32, what
    ours_inf, theirs_inf = np.isneginf(ours), np.isneginf(theirs)
    assert np.array_equal(ours_inf, theirs_inf), (
        f"{what}: -inf positions differ at {np.flatnonzero(ours_inf != theirs_inf)[:10]}"
    )
    finite = ~ours_inf
    diff = float(np.max(np.abs(ours[finite] - theirs[finite]))) if finite.any() else 0.0
    assert diff <= 1e-6, f"{what}: max abs diff {diff}"


def test_processors_match_hf_generate(ref_python, tiny_checkpoint, tmp_path):
    manifest, a = goldens.load_case(DUMPS / PARITY_CASE)
    ck = manifest["checkpoint"]
    checkpoint = tiny_checkpoint(ck["preset"], ck["model_type"], ck["seed"])
    rows, histories, lengths = _parity_rows(manifest, a)
    cp_rows = a["cp_logits"][0].astype(np.float32)
    case = manifest["case"]
    request = {"language": case["language"], "speaker": case["speaker"], "settings": PARITY_SETTINGS}
    np.savez(
        tmp_path / "in.npz",
        talker_rows=rows,
        histories=histories,
        lengths=lengths,
        cp_rows=cp_rows,
        text_ids=a["text_ids"],
        request=json.dumps(request),
    )
    result = run_script(ref_python, "hf_processors.py", checkpoint, tmp_path / "in.npz", tmp_path / "out.npz")
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    out = np.load(tmp_path / "out.npz")
    vocab, eos = rows.shape[1], manifest["codec_eos_token_id"]
    for index, (s, info) in enumerate(zip(PARITY_SETTINGS, report)):
        # generate's own list: the order this module implements
        warpers = (
            ([["TemperatureLogitsWarper"]] if s["temperature"] != 1.0 else [])
            + ([["TopKLogitsWarper"]] if s["top_k"] != 0 else [])
            + ([["TopPLogitsWarper"]] if s["top_p"] < 1.0 else [])
        )
        warpers = [w[0] for w in warpers] if s["do_sample"] else []
        assert [p["class"] for p in info["talker"]] == TALKER_EXPECTED + warpers, info["talker"]
        assert [p["class"] for p in info["code_predictor"]] == warpers, info["code_predictor"]
        # HF's talker input_ids are the generated ids only: empty at the first step
        assert info["talker_input_ids_lengths_during_generate"] == [0, 1, 2, 3]
        for i, (row, hist, length) in enumerate(zip(rows, histories, lengths)):
            sampler = oracle.TalkerSampler.for_talker(vocab, eos, _config(s))
            sampler.history = [int(t) for t in hist[:length]]
            _assert_same(sampler.process(row), out[f"talker_{index}"][i], f"settings {s}, talker row {i} step {length}")
        if s["do_sample"] and s["top_k"] == 50 and s["top_p"] == 1.0:
            # the crafted row: HF keeps more than k ids when values tie at the k-th one, so do we
            assert np.isfinite(out[f"talker_{index}"][-1]).sum() > 50
        cp = CodePredictorSampler(_config(s, code_predictor=True))
        for g, row in enumerate(cp_rows):
            _assert_same(cp.process(row), out[f"cp_{index}"][g], f"settings {s}, code predictor group {g}")


# --------------------------------------------------------------------------- sampling behaviour
# (the engine's talker sampler, drawing from the engines' stream; the code predictor's rule in numpy)

VOCAB, EOS = 3072, 2150


def _flat_logits(seed=0):
    return np.random.default_rng(seed).standard_normal(VOCAB).astype(np.float32)


def _run(seed, steps=30, **overrides):
    sampler = TalkerSampler.for_talker(VOCAB, EOS, **overrides)
    rng = native.Rng(seed)
    return [sampler.choose(_flat_logits(step), rng) for step in range(steps)]


def test_seeded_sampling_is_reproducible_and_seed_dependent():
    assert _run(1) == _run(1)
    assert _run(1) != _run(2)
    cp = CodePredictorSampler()
    a = [cp.choose(_flat_logits(i), np.random.default_rng(5)) for i in range(15)]
    b = [cp.choose(_flat_logits(i), np.random.default_rng(5)) for i in range(15)]
    assert a == b


def test_never_samples_suppressed_ids_or_early_eos():
    suppressed = set(talker_suppress_tokens(VOCAB, EOS))
    assert len(suppressed) == 1023 and EOS not in suppressed and min(suppressed) == VOCAB - 1024
    logits = np.full(VOCAB, -5.0, dtype=np.float32)
    logits[sorted(suppressed)] = 50.0
    logits[EOS] = 60.0
    rng = native.Rng(0)
    for trial in range(200):
        sampler = TalkerSampler.for_talker(VOCAB, EOS, temperature=2.0, top_k=0)
        first = [sampler.choose(logits, rng) for _ in range(2)]
        assert all(t not in suppressed and t != EOS for t in first), first
        assert sampler.choose(logits, rng) == EOS  # allowed from the third step, and dominant
    greedy = TalkerSampler.for_talker(VOCAB, EOS, greedy=True)
    assert [greedy.choose(logits) for _ in range(3)][2] == EOS


def test_top_k_keeps_ties_at_threshold():
    scores = np.arange(100, dtype=np.float32)
    scores[70:90] = 80.0  # 90..99 then twenty 80s: the 25th largest is 80, tied over 70..89
    kept = apply_top_k(scores, 25)
    assert np.isfinite(kept).sum() == 10 + 20
    assert np.all(np.isneginf(kept[:70])) and np.all(kept[70:] == scores[70:])
    sampler = CodePredictorSampler(SamplerConfig.code_predictor(temperature=1.0, top_k=25))
    rng = np.random.default_rng(0)
    assert all(sampler.choose(scores, rng) >= 70 for _ in range(500))


def test_repetition_penalty_applies_once_per_distinct_id_even_in_greedy():
    logits = np.zeros(VOCAB, dtype=np.float32)
    logits[[1, 2, 3]] = [2.0, -2.0, 1.95]
    processor = oracle.TalkerSampler.for_talker(VOCAB, EOS, greedy=True)
    processor.history = [1, 1, 1, 2]
    out = processor.process(logits)
    assert out[1] == np.float32(2.0) / np.float32(1.05) and out[2] == np.float32(-2.0) * np.float32(1.05)
    sampler = TalkerSampler.for_talker(VOCAB, EOS, greedy=True)
    sampler.history = [1, 1, 1, 2]
    assert sampler.choose(logits) == 3  # 2/1.05 < 1.95
    logits[3] = 1.9
    sampler.history = [1, 1, 1, 2]  # compounded (2 / 1.05**3 < 1.9) it would pick 3 again
    assert sampler.choose(logits) == 1 and sampler.history.tolist() == [1, 1, 1, 2, 1]


# --------------------------------------------------------------------------- a request's options


def test_request_sampling_defaults_are_the_references_and_map_to_both_samplers():
    s = Request()
    assert (s.temperature, s.top_k, s.top_p, s.repetition_penalty) == (np.float32(0.9), 50, 1.0, np.float32(1.05))
    assert (TEMPERATURE, TOP_K, TOP_P, REPETITION_PENALTY) == (0.9, 50, 1.0, 1.05)  # qwen_tts hard_defaults
    talker = talker_config(Request(temperature=0.7, top_k=5, top_p=0.8, repetition_penalty=1.3))
    assert (talker.temperature, talker.top_k, talker.top_p, talker.repetition_penalty, talker.min_new_tokens) == (
        np.float32(0.7),
        5,
        np.float32(0.8),
        np.float32(1.3),
        2,
    )
    cp = code_predictor_config(Request(greedy=True, cp_temperature=1.2, cp_top_k=0, cp_top_p=0.5))
    assert (cp.greedy, cp.temperature, cp.top_k, cp.top_p, cp.repetition_penalty, cp.min_new_tokens) == (
        True,
        np.float32(1.2),
        0,
        0.5,
        1.0,
        0,
    )


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("temperature", 0, "temperature must be a number > 0, got 0"),
        ("temperature", float("inf"), "temperature must be a number > 0, got inf"),
        ("temperature", 1e-50, "temperature must be a number > 0"),  # 0 in float32, as the native request holds it
        ("temperature", "0.7", "temperature must be a number > 0, got '0.7'"),
        ("top_k", -1, "top_k must be an integer >= 0 (0: off), got -1"),
        ("top_k", 2.5, "top_k must be an integer >= 0 (0: off), got 2.5"),
        ("top_k", True, "top_k must be an integer"),
        ("top_p", 0.0, "top_p must be a number in (0, 1], got 0.0"),
        ("top_p", 1.01, "top_p must be a number in (0, 1], got 1.01"),
        ("top_p", float("nan"), "top_p must be a number in (0, 1]"),
        ("repetition_penalty", -1.05, "repetition_penalty must be a number > 0, got -1.05"),
        ("cp_temperature", 0.0, "cp_temperature must be a number > 0"),
        ("cp_top_k", -2, "cp_top_k must be an integer >= 0"),
        ("cp_top_p", 5, "cp_top_p must be a number in (0, 1]"),
        ("greedy", "yes", "greedy must be True or False"),
        # float32 (the native request's type) cannot hold them: refused, not held as inf or 0
        ("temperature", 1e308, "temperature must be a number > 0, got 1e+308 (inf in float32)"),
        ("repetition_penalty", 1e-50, "repetition_penalty must be a number > 0, got 1e-50 (0 in float32)"),
        ("top_p", -1e300, "top_p must be a number in (0, 1], got -1e+300 (-inf in float32)"),
        # an integer too large for a float: refused by its length, without an OverflowError
        pytest.param(
            "temperature",
            10**399,
            "temperature must be a number > 0, got an integer of 400 digits (inf in float32)",
            id="temperature-400-digits",
        ),
        pytest.param(
            "cp_top_p",
            10**5000,
            "cp_top_p must be a number in (0, 1], got an integer of more than 4300 digits",
            id="cp_top_p-5001-digits",
        ),
        pytest.param(
            "top_k",
            -(10**30),
            "top_k must be an integer >= 0 (0: off), got an integer of 31 digits",
            id="top_k-31-digits",
        ),
    ],
)
def test_request_sampling_refuses_out_of_range_values(name, value, message):
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        Request(**{name: value})


def test_top_k_beyond_the_native_int32_keeps_every_token_as_it_says():
    """The native request holds top_k in an int32 (ctypes would wrap 2**32 + 5 to 5): a larger
    top_k is held as the int32's largest, which keeps every token, as the value asked."""
    assert Request(top_k=2**32 + 5).top_k == Request(cp_top_k=10**40).cp_top_k == 2**31 - 1
    assert Request(top_k=2**31 - 2).top_k == 2**31 - 2


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("speaker", 3, "speaker must be a string, got int"),
        ("language", None, "language must be a string, got NoneType"),
        ("instruct", b"calm", "instruct must be a string, got bytes"),
        ("ref_text", 1, "ref_text must be a string, got int"),
        ("xvector_only", "yes", "xvector_only must be True, False or None, got 'yes'"),
        ("ref_silence", 3, "ref_silence must be a number of seconds in 0..2"),
        ("text_streaming", 1, "text_streaming must be True or False, got 1"),
        ("seed", -1, "seed must be 0..9223372036854775807, got -1"),
        ("seed", 1.5, "seed must be an integer 0..9223372036854775807, got 1.5"),
        ("max_frames", 0, "max_frames must be >= 1, got 0"),
        ("chunk_frames", 0, "chunk_frames must be >= 1, got 0"),
        ("min_frames", -1, "min_frames must be >= 0, got -1"),
        ("speed", 5, "speed must be within 0.25..4.0, got 5"),
    ],
)
def test_request_fields_are_refused_in_one_line_naming_them(name, value, message):
    with pytest.raises(ValueError) as refused:
        Request(**{name: value})
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


@pytest.mark.parametrize("old, new", sorted(OLD_NAMES.items()))
def test_old_names_are_their_fields_with_a_warning_naming_the_new_one(old, new):
    with pytest.warns(DeprecationWarning, match=f"^{old}= is deprecated: use {new}=$"):
        assert field_names({old: True}) == {new: True}
