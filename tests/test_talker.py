"""The talker (llama.cpp through libkazetts' kz_talker) against the reference goldens (teacher-forced CB1..15)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import DUMPS
from kazetts.validation import goldens
from kazetts.stages.code_predictor import CodePredictor
from kazetts.stages.prompt import build_prompt, chat_text, instruct_text
from kazetts.stages.sampling import SamplerConfig, TalkerSampler
from kazetts.stages.talker import Talker
from kazetts.engine.talker_loop import TeacherForcing, run_talker

CASES = [case.name for case in goldens.CASES]
COSINE_GATE = goldens.GATES["cosine_min"]


def _cosines(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return (got * want).sum(-1) / (np.linalg.norm(got, axis=-1) * np.linalg.norm(want, axis=-1))


@pytest.fixture(scope="module")
def talkers(tiny_gguf):
    cache = {}

    def get(manifest):
        ck = manifest["checkpoint"]
        key = (ck["preset"], ck["model_type"], ck["seed"])
        if key not in cache:
            talker_path, mmproj_path = tiny_gguf(ck["preset"], ck["model_type"], "f32", ck["seed"])
            cache[key] = Talker(talker_path, threads=2), CodePredictor(mmproj_path, threads=1).embed_codes
        return cache[key]

    return get


def _prompt(talker, manifest, arrays):
    case = manifest["case"]
    ids = talker.tokenize(chat_text(case["text"]))
    instruct = talker.tokenize(instruct_text(case["instruct"])) if case["instruct"] else None
    prompt = build_prompt(
        talker.file,
        ids,
        language=case["language"],
        speaker=case["speaker"],
        instruct_ids=instruct,
        speaker_embedding=arrays.get("xvector"),
        text_streaming=not case["non_streaming"],
    )
    return ids, instruct, prompt


@pytest.mark.parametrize("name", CASES)
def test_teacher_forced_talker_matches_reference(name, talkers):
    manifest, arrays = goldens.load_case(DUMPS / name)
    talker, embed = talkers(manifest)
    ids, instruct, prompt = _prompt(talker, manifest, arrays)
    assert ids == arrays["text_ids"].tolist(), "llama.cpp's tokenizer disagrees with the reference's"
    if instruct is not None:
        assert instruct == arrays["instruct_ids"].tolist()
    prompt_diff = float(np.abs(prompt.prefill - arrays["prompt_embeds"]).max())
    assert prompt_diff <= goldens.GATES["prompt_max_abs"]

    voices = talker.file.voices
    sampler = TalkerSampler.for_talker(talker.file.codec_vocab_size, voices.codec_eos, SamplerConfig(greedy=True))
    teacher = TeacherForcing(arrays["codes"], embed)
    trace = run_talker(talker, prompt, sampler, teacher, max_frames=manifest["case"]["max_new_tokens"] - 1)

    got_cb0 = np.array([codes[0] for codes in trace.codes])
    hidden_cos = _cosines(trace.hidden, arrays["talker_hidden"])
    logits_cos = _cosines(trace.logits, arrays["talker_logits"])
    print(
        f"{name}: prompt max abs diff {prompt_diff:.1e}; {len(got_cb0)}/{manifest['frames']} frames, CB0 "
        f"identical {np.sum(got_cb0 == arrays['codes'][: len(got_cb0), 0])}; min cosine hidden "
        f"{hidden_cos.min():.7f} logits {logits_cos.min():.7f}; stopped by {trace.stopped_by}"
    )
    assert np.array_equal(got_cb0, arrays["codes"][:, 0])
    assert trace.stopped_by == ("eos" if manifest["stopped_by"] == "eos" else "max_frames")
    assert len(trace.hidden) == manifest["talker_calls"]
    assert hidden_cos.min() >= COSINE_GATE and logits_cos.min() >= COSINE_GATE


def test_clear_errors_before_compute(talkers):
    manifest, arrays = goldens.load_case(DUMPS / "cv_english_stream")
    talker, embed = talkers(manifest)
    ids, _, prompt = _prompt(talker, manifest, arrays)
    sampler = TalkerSampler.for_talker(talker.file.codec_vocab_size, talker.file.voices.codec_eos)
    teacher = TeacherForcing(arrays["codes"], embed)
    position = talker.position
    with pytest.raises(ValueError, match="text too long"):
        run_talker(talker, prompt, sampler, teacher, max_frames=talker.n_ctx)
    assert talker.position == position, "nothing was computed"
    with pytest.raises(ValueError, match="unknown speaker 'bob'"):
        build_prompt(talker.file, ids, speaker="bob")


def test_a_kv_cache_sized_to_the_utterance_computes_what_a_full_one_does(tiny_gguf):
    """reset(positions) gives the KV cache only what the utterance may take (whole 256-position
    steps, grown when a longer one comes): hidden states and logits are, bit for bit, those of a
    context of all n_ctx positions, across the 256-cell boundary of llama.cpp's attention."""
    manifest, arrays = goldens.load_case(DUMPS / "cv_english_stream")
    ck = manifest["checkpoint"]
    talker = Talker(tiny_gguf(ck["preset"], ck["model_type"], "f32", ck["seed"])[0], threads=2, n_ctx=1024)
    _, _, prompt = _prompt(talker, manifest, arrays)
    steps = 300 - len(prompt.prefill)
    inputs = np.random.default_rng(0).standard_normal((steps, talker.hidden_size)).astype(np.float32) * 0.05

    def utterance(positions):
        talker.reset(positions)
        outputs = [talker.step(prompt.prefill)]
        outputs += [talker.step(row) for row in inputs]
        return talker.capacity, outputs

    small, full = utterance(300), utterance(None)
    assert (small[0], full[0]) == (512, 1024)
    for (hidden_a, logits_a), (hidden_b, logits_b) in zip(small[1], full[1]):
        assert np.array_equal(hidden_a, hidden_b) and np.array_equal(logits_a, logits_b)
    assert utterance(300)[0] == 1024, "the cache keeps what the longest utterance took"
    with pytest.raises(ValueError, match="more than the 1024 positions"):
        talker.step(np.zeros((1024, talker.hidden_size), np.float32))
    talker.close()
