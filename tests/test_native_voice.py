"""Voices in the native engine (kz_tts_request.voice, kazetts/tts.h): x-vector and ICL cloning
from a kazetts.Voice, against the reference's generate_voice_clone goldens and against the Python
engine (same codes and samples for one seed), and the requests both engines refuse in the same
words."""

from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import DUMPS
from kazetts import native
from kazetts.engine.native_tts import NativeTTS
from kazetts.engine.tts import TTS
from kazetts.engine.voice import Voice
from kazetts.validation import goldens

ICL_CASES = [c.name for c in goldens.CLONE_CASES if c.preset == "tiny"]


@pytest.fixture(scope="module")
def engines(tiny_gguf):
    """(Python TTS, NativeTTS) of the tiny Base model (F32, with its codec encoder)."""
    talker, mmproj = tiny_gguf("tiny", "base", "f32")
    return (
        TTS(talker, mmproj, threads=2, codec_weights="f32"),
        NativeTTS(talker, mmproj, threads=2, codec_weights="f32"),
    )


@pytest.fixture(scope="module")
def icl_voice(engines):
    python, _ = engines
    recording = goldens.RECORDINGS["en_16k"]  # a 16 kHz recording: resampled to 24 kHz on enrolment
    return python.enroll(goldens.recording_path(DUMPS, "en_16k"), ref_text=recording.text)


@pytest.mark.parametrize("name", ICL_CASES)
def test_native_icl_from_a_voice_matches_generate_voice_clone(name, engines):
    manifest, a = goldens.load_case(DUMPS / goldens.CLONE_DIR / name)
    case = manifest["case"]
    python, nat = engines
    voice = Voice(a["xvector"], python.model_fingerprint, ref_text=case["ref_text"], ref_codes=a["ref_codes"])
    request = dict(
        voice=voice,
        language=case["language"],
        text_streaming=not case["non_streaming"],
        greedy=True,
        max_frames=case["max_new_tokens"] - 1,
    )
    result = nat.synthesize(case["text"], **request)
    assert np.array_equal(result.codes, a["codes"]), f"{name}: ICL codes differ from generate_voice_clone's"
    want = python.synthesize(case["text"], **request)
    assert np.array_equal(result.audio, want.audio), "the reference part is cut, the rest decoded alike"


@pytest.mark.parametrize("xvector_only", [None, True])
@pytest.mark.parametrize("seed", [3, 11])
def test_both_engines_clone_alike_for_one_seed(engines, icl_voice, seed, xvector_only):
    python, nat = engines
    text = "Bonjour ! Le 14 juillet 1789, à Paris. Une deuxième phrase."
    options = dict(voice=icl_voice, language="french", seed=seed, max_frames=8, xvector_only=xvector_only)
    want, got = python.synthesize(text, **options), nat.synthesize(text, **options)
    assert want.codes.shape[0] >= 1 and np.array_equal(want.codes, got.codes)
    assert np.array_equal(want.audio, got.audio)


def test_icl_and_x_vector_cloning_differ(engines, icl_voice):
    _, nat = engines
    icl = nat.synthesize("Hello there.", voice=icl_voice, greedy=True, max_frames=6)
    xvec = nat.synthesize("Hello there.", voice=icl_voice, greedy=True, max_frames=6, xvector_only=True)
    assert not np.array_equal(icl.codes, xvec.codes), "the voice's reference reached the ICL prompt"


@pytest.mark.parametrize(
    "change, options, message",
    [
        (None, {"speaker": "vivian"}, "a cloned voice replaces speaker= and xvector=: give only one of them"),
        (
            None,
            {"xvector": np.ones(64, np.float32)},
            "a cloned voice replaces speaker= and xvector=",
        ),
        (None, {"instruct": "calm"}, "ICL voice cloning takes neither a speaker name nor an instruct"),
        ("text", {"xvector_only": False}, "ICL cloning (xvector_only=False) needs ref_text"),
        ("codes", {"xvector_only": False}, "this mmproj has no codec encoder"),
        ("model", {}, "this voice was made for a base model of hidden size 32, this is a base model of hidden size 64"),
        ("encoder", {}, "this voice was made for another speaker encoder (ffffffffffff"),
    ],
)
def test_both_engines_refuse_the_same_cloning_requests(engines, icl_voice, change, options, message):
    from dataclasses import replace

    from kazetts.engine.voice import ModelFingerprint

    python, nat = engines
    model = python.model_fingerprint
    voice = {
        None: icl_voice,
        "text": replace(icl_voice, ref_text=None),
        "codes": replace(icl_voice, ref_codes=None),
        "model": replace(icl_voice, x_vector=icl_voice.x_vector[:32], model=ModelFingerprint("base", 32, "0" * 64)),
        "encoder": replace(icl_voice, model=replace(model, speaker_encoder_sha256="f" * 64)),
    }[change]
    with pytest.raises(ValueError, match=re.escape(message)):
        python.synthesize("Hi.", voice=voice, max_frames=2, **options)
    with pytest.raises(native.NativeError, match="invalid argument: " + re.escape(message)):
        nat.synthesize("Hi.", voice=voice, max_frames=2, **options)


def test_a_voice_needs_a_base_model(tiny_gguf, icl_voice):
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32")
    message = "voice cloning needs a Base model; this is a custom_voice model"
    with pytest.raises(native.NativeError, match=re.escape(message)):
        NativeTTS(talker, mmproj, threads=2).synthesize("Hi.", voice=icl_voice, max_frames=2)
    with pytest.raises(native.NativeError, match="xvector_only needs a voice"):
        NativeTTS(talker, mmproj, threads=2).synthesize("Hi.", speaker="vivian", xvector_only=True, max_frames=2)


# -- speed (kz_tts_request.speed: the WSOLA stream of rules.h, as TTS.stream's) --------------------


@pytest.mark.parametrize("speed", [0.7, 1.6])
def test_both_engines_stretch_alike(tiny_gguf, speed):
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32")
    options = dict(speaker="vivian", language="french", seed=3, max_frames=12, speed=speed)
    text = "Bonjour ! Une phrase. Et encore une autre phrase, un peu plus longue."
    want = TTS(talker, mmproj, threads=2, codec_weights="f32").synthesize(text, **options)
    nat = NativeTTS(talker, mmproj, threads=2, codec_weights="f32")
    frames = []
    got = nat.synthesize(text, on_chunk=lambda audio, codes, total: frames.append(codes) or True, **options)
    assert np.array_equal(want.audio, got.audio) and np.array_equal(want.codes, got.codes)
    assert np.array_equal(np.concatenate(frames), got.codes), "every frame's codes reach the callback once"
    plain = nat.synthesize(text, **{**options, "speed": 1.0})
    assert np.array_equal(plain.codes, got.codes) and abs(len(got.audio) - len(plain.audio) / speed) <= 2


@pytest.mark.parametrize("speed", [0.2, 4.5, float("nan")])
def test_both_engines_refuse_the_same_speeds(tiny_gguf, speed):
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32")
    with pytest.raises(ValueError, match=r"speed must be within 0\.25\.\.4\.0"):
        TTS(talker, mmproj, threads=2).synthesize("Hi.", speaker="vivian", speed=speed)
    with pytest.raises(native.NativeError, match=r"invalid argument: speed must be within 0\.25\.\.4\.0"):
        NativeTTS(talker, mmproj, threads=2).synthesize("Hi.", speaker="vivian", speed=speed)


def test_the_speed_range_is_one_range():
    from kazetts.request import MAX_SPEED, MIN_SPEED

    text = (DUMPS.parent / "native" / "include" / "kazetts" / "tts.h").read_text()
    assert f"#define KZ_MIN_SPEED {MIN_SPEED}f" in text and f"#define KZ_MAX_SPEED {MAX_SPEED}f" in text
