"""The native engine (kazetts/tts.h) against the reference goldens and against the Python engine.

Both engines run libkazetts' prompt layout and the rules of rules.h (CB0 sampling, the long-text
split), which are held here to their numpy statements (kazetts.validation.oracles): greedy codes
identical to the reference on every golden
case, and for one seed the two engines give identical codes and samples.
"""

from __future__ import annotations

import ctypes
import threading
import re
import warnings

import numpy as np
import pytest

from conftest import DUMPS, golden_request
from kazetts import native
from kazetts.engine import native_tts
from kazetts.engine.native_tts import NativeTTS
from kazetts.engine.tts import TTS
from kazetts.request import FIELDS, Request
from kazetts.stages import sampling
from kazetts.stages.sampling import SamplerConfig, talker_config
from kazetts.validation import goldens
from kazetts.validation.oracles import sampling as oracle

CASES = [case.name for case in goldens.CASES]


@pytest.fixture(scope="module")
def engines(tiny_gguf):
    """engines(kind, preset, model_type, seed): a NativeTTS ("native") or TTS ("python"), F32 codec."""
    cache = {}

    def get(kind="native", preset="tiny", model_type="custom_voice", seed=0):
        key = (kind, preset, model_type, seed)
        if key not in cache:
            talker, mmproj = tiny_gguf(preset, model_type, "f32", seed)
            make = NativeTTS if kind == "native" else TTS
            cache[key] = make(talker, mmproj, threads=2, codec_weights="f32")
        return cache[key]

    return get


@pytest.mark.parametrize("name", CASES)
def test_greedy_native_engine_matches_reference(name, engines):
    manifest, arrays = goldens.load_case(DUMPS / name)
    ck = manifest["checkpoint"]
    result = engines("native", ck["preset"], ck["model_type"], ck["seed"]).synthesize(
        manifest["case"]["text"], **golden_request(manifest, arrays)
    )
    assert result.codes.shape == arrays["codes"].shape
    same = int((result.codes == arrays["codes"]).all(axis=1).sum())
    diff = float(np.abs(result.audio - arrays["waveform"]).max())
    print(
        f"{name}: {same}/{manifest['frames']} frames identical, stop {result.stop_reason}, waveform max diff {diff:.2e}"
    )
    assert np.array_equal(result.codes, arrays["codes"])
    assert result.stop_reason == ("eos" if manifest["stopped_by"] == "eos" else "budget")
    assert diff <= 1e-4


def _both(engines, text, **options):
    """The same request through both engines: (Python result, native result)."""
    python = engines("python").synthesize(text, **options)
    return python, engines("native").synthesize(text, **options)


# every sampling option away from its default (the reference's), talker and code predictor
NON_DEFAULT = dict(
    temperature=0.7,
    top_k=5,
    top_p=0.8,
    repetition_penalty=1.3,
    cp_temperature=1.3,
    cp_top_k=20,
    cp_top_p=0.9,
)


@pytest.mark.parametrize(
    "seed, sampling",
    [
        (3, {}),
        (11, {}),
        (3, NON_DEFAULT),
        (3, {"top_k": 0, "top_p": 0.5}),
        (11, {"greedy": True, "repetition_penalty": 2.0}),
    ],
    ids=["seed3", "seed11", "seed3_non_default", "seed3_top_p_only", "greedy_penalty2"],
)
def test_sampled_engines_agree_for_one_seed(engines, seed, sampling):
    python, nat = _both(
        engines,
        "Bonjour ! Le 14 juillet 1789, à Paris.",
        speaker="vivian",
        language="french",
        seed=seed,
        max_frames=10,
        **sampling,
    )
    assert python.codes.shape[0] == nat.codes.shape[0] >= 1
    assert np.array_equal(python.codes, nat.codes)
    assert np.array_equal(python.audio, nat.audio)
    if sampling and not sampling.get("greedy"):  # the options reach the samplers: the defaults say something else
        default = engines("native").synthesize(
            "Bonjour ! Le 14 juillet 1789, à Paris.", speaker="vivian", language="french", seed=seed, max_frames=10
        )
        assert not np.array_equal(default.codes, nat.codes)


def test_native_default_request_is_the_python_one():
    """kz_tts_request's fields are kazetts.Request's, under the same names, and
    kz_tts_default_request is Request() (one definition of the defaults, the reference's)."""
    r, defaults = native_tts.lib().kz_tts_default_request(), Request()
    assert native_tts.NATIVE_FIELDS < FIELDS
    assert (r.speaker, r.language, r.instruct, bool(r.xvector), r.seed, r.max_frames, r.voice, r.xvector_only) == (
        None,
        None,
        None,
        False,
        -1,
        0,
        None,
        -1,
    )
    assert (defaults.speaker, defaults.language, defaults.instruct, defaults.xvector) == (None, "auto", None, None)
    # None in Python: -1 (a random seed), 0 (a budget) and -1 (auto) in C; no voice
    assert defaults.seed is None and defaults.max_frames is None and defaults.xvector_only is None
    special = {"speaker", "language", "instruct", "xvector", "seed", "max_frames", "voice", "xvector_only"}
    for name in native_tts.NATIVE_FIELDS - special:
        assert getattr(r, name) == getattr(defaults, name), name
    assert r.min_frames == talker_config(defaults).min_new_tokens == 2  # the reference's min_new_tokens


def test_min_frames_bans_end_of_speech_until_reached(engines):
    """A request's min_frames keeps a piece going past the end-of-speech it would say, on the same
    path until then; the budget still ends it."""
    tts, options = engines(), {"speaker": "vivian", "greedy": True, "text_streaming": False}
    plain = tts.synthesize("Bonjour.", max_frames=60, **options)
    n = plain.codes.shape[0]
    assert plain.stop_reason == "eos" and n < 50  # the tiny model ends this text itself
    longer = tts.synthesize("Bonjour.", max_frames=n + 5, min_frames=n + 5, **options)
    assert longer.stop_reason == "budget" and longer.codes.shape[0] == n + 5
    assert np.array_equal(longer.codes[:n], plain.codes)
    assert tts.synthesize("Bonjour.", max_frames=60, min_frames=n, **options).codes.shape[0] == n


@pytest.mark.parametrize(
    "name, value",
    [
        ("temperature", 0.0),
        ("temperature", float("inf")),
        ("top_k", -1),
        ("top_p", 0.0),
        ("top_p", 1.5),
        ("repetition_penalty", -1.0),
        ("repetition_penalty", float("nan")),
        ("cp_temperature", 0.0),
        ("cp_top_k", -3),
        ("cp_top_p", 2.0),
    ],
)
def test_both_engines_refuse_the_same_sampling_values(engines, name, value):
    """The same ranges in both engines, greedy or not: a ValueError naming the argument (Python),
    an invalid-argument status naming the request field (native), before any compute."""
    for greedy in (False, True):
        with pytest.raises(ValueError, match=f"^{name} must be "):
            engines("python").synthesize("Hi.", speaker="vivian", greedy=greedy, **{name: value})
        with pytest.raises(native.NativeError, match=f"invalid argument: {name} must be "):
            engines("native").synthesize("Hi.", speaker="vivian", greedy=greedy, **{name: value})


@pytest.mark.parametrize(
    "model_type, request_, message",
    [
        ("custom_voice", {}, "this custom_voice model needs a speaker; choose one of ['aiden'"),
        (
            "voice_design",
            {"xvector": np.ones(64, np.float32), "instruct": "A calm voice."},
            "this voice_design model takes no speaker",
        ),
        (
            "voice_design",
            {"speaker": "vivian", "instruct": "A calm voice."},
            "unknown speaker 'vivian'; choose one of none: this model has no named speakers",
        ),
        ("voice_design", {}, "this voice_design model needs an instruct describing the voice"),
        ("base", {}, "this base model needs a speaker_embedding (an x-vector of the voice to clone)"),
        # two faults in one request: both engines name the same one first
        ("custom_voice", {"speaker": "nobody", "language": "klingon"}, "unknown language 'klingon'"),
        (
            "custom_voice",
            {"speaker": "nobody", "xvector": np.ones(3, np.float32)},
            "give either a speaker name or a speaker embedding, not both",
        ),
        ("base", {"xvector": np.ones(3, np.float32), "instruct": "calm"}, "speaker embedding has 3 values"),
    ],
)
def test_both_engines_refuse_the_same_voices(engines, model_type, request_, message):
    """The voice each model type is made for, one rule with the same words in both engines (the
    native engine used to synthesize a CustomVoice model with no speaker)."""
    with pytest.raises(ValueError, match=re.escape(message)):
        engines("python", model_type=model_type).synthesize("Hi.", max_frames=2, **request_)
    with pytest.raises(native.NativeError, match="invalid argument: " + re.escape(message)):
        engines("native", model_type=model_type).synthesize("Hi.", max_frames=2, **request_)


def test_sampled_long_text_agrees_across_pieces_and_crossfades(engines):
    """Three pieces: the split, the sampler reset per piece, one random stream across pieces and
    the crossfade are the same rules in both engines."""
    text = "Ceci est une phrase assez longue pour remplir un morceau de texte, avec des virgules. " * 8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        python, nat = _both(engines, text, speaker="vivian", language="french", seed=5, max_frames=4)
    assert nat.pieces == len(python.stopped_by) == 3
    assert np.array_equal(python.codes, nat.codes)
    assert np.array_equal(python.audio, nat.audio)
    assert len(nat.audio) == nat.codes.shape[0] * 1920 - 2 * 240


def test_emoji_and_non_latin_text_agree(engines):
    python, nat = _both(engines, "Emoji 🙂🎉 ok, 你好！", speaker="ryan", greedy=True, max_frames=4)
    assert np.array_equal(python.codes, nat.codes) and np.array_equal(python.audio, nat.audio)


def test_stream_first_frame_alone_then_chunks(engines):
    case = goldens.CASES_BY_NAME["long_window"]
    result = engines().synthesize(
        case.text, speaker=case.speaker, language=case.language, greedy=True, max_frames=11, chunk_frames=4
    )
    assert [frames for frames, _ in result.chunks] == [1, 5, 9, 11]
    assert [n for _, n in result.chunks] == [1920, 4 * 1920, 4 * 1920, 2 * 1920]
    assert result.stop_reason == "budget" and result.timings["first_audio_ms"] <= result.timings["total_ms"]


def test_cancel_from_another_thread_then_synthesize_again(engines):
    tts = engines()
    options = dict(speaker="vivian", language="english", greedy=True, max_frames=30, chunk_frames=1)

    def on_chunk(audio, codes, frames_total):
        if frames_total == 2:  # cancel from another thread while frame 2 is being delivered
            canceller = threading.Thread(target=tts.cancel)
            canceller.start()
            canceller.join()
        return True

    cancelled = tts.synthesize("Hello world, this is the talker speaking.", on_chunk=on_chunk, **options)
    assert cancelled.stop_reason == "cancelled" and cancelled.codes.shape[0] == 2
    stopped = tts.synthesize("Hello world, this is the talker speaking.", on_chunk=lambda *a: False, **options)
    assert stopped.stop_reason == "cancelled" and stopped.codes.shape[0] == 1
    again = tts.synthesize("Hello world, this is the talker speaking.", **options)
    assert again.stop_reason in ("eos", "budget") and again.codes.shape[0] > 2
    assert np.array_equal(again.codes[:2], cancelled.codes)


@pytest.mark.parametrize(
    "text, options, message",
    [
        ("   \n ", {}, "empty text"),
        ("Hi.", {"speaker": "nobody"}, "unknown speaker 'nobody'; choose one of"),
        ("Hi.", {"speaker": "vivian", "language": "klingon"}, "unknown language 'klingon'; choose one of"),
        ("Hi.", {"speaker": "vivian", "chunk_frames": 0}, "chunk_frames must be >= 1"),
        ("Hi.", {"min_frames": -1}, "min_frames must be >= 0"),
        ("Hi.", {"temperature": 0.0}, "temperature must be > 0"),
        ("Hi.", {"top_p": 0.0}, "top_p must be in"),
        ("Hi.", {"speaker": "vivian", "xvector": np.zeros(64, np.float32)}, "give either a speaker name or"),
        ("Hi.", {"xvector": np.zeros(3, np.float32)}, "speaker embedding has 3 values; this model needs 64"),
    ],
)
def test_bad_requests_fail_before_compute(engines, text, options, message):
    called = []
    with pytest.raises(native.NativeError, match="invalid argument: " + message.replace("(", r"\(")):
        engines().synthesize(text, on_chunk=lambda *a: called.append(1) or True, **options)
    assert not called


def test_instruct_rules_and_struct_sizes(engines):
    with pytest.raises(native.NativeError, match="this base model does not take an instruct"):
        engines("native", "tiny", "base").synthesize("Hi.", instruct="calm", max_frames=2)
    tts = engines()
    r, _ = native_tts.c_request()
    r.struct_size = 8
    status = tts._lib.kz_tts_synthesize(tts._handle, b"Hi.", ctypes.byref(r), native_tts.CHUNK_CALLBACK(0), None, None)
    assert status == 1 and b"struct_size" in tts._lib.kz_tts_last_error(tts._handle)


def test_load_errors_name_the_file(tiny_gguf, tmp_path):
    talker, mmproj = tiny_gguf()
    with pytest.raises(native.NativeError, match="not found"):
        NativeTTS(tmp_path / "missing.gguf", mmproj)
    with pytest.raises(native.NativeError, match="not a Qwen3-TTS talker"):
        NativeTTS(mmproj, mmproj)
    with pytest.raises(native.NativeError, match="n_threads"):
        NativeTTS(talker, mmproj, threads=0)


def test_text_beyond_the_context_is_a_bad_request(tiny_gguf):
    small = NativeTTS(*tiny_gguf(), n_ctx=16, codec_weights="f32")
    with pytest.raises(native.NativeError, match="text too long for the talker context of 16"):
        small.synthesize(
            "Hello world, this sentence needs more than sixteen positions.", speaker="vivian", text_streaming=False
        )
    assert small.synthesize("Hi.", speaker="vivian", greedy=True, max_frames=2).codes.shape[0] >= 1


def test_model_info(engines):
    info = engines().info
    assert info["model_type"] == "custom_voice" and "vivian" in info["speakers"] and info["sample_rate"] == 24000
    assert info["languages"] == engines("python").languages and info["speakers"] == engines("python").speakers
    assert engines("native", "tiny", "base").info["speakers"] == []


# ---- the rules on their own ---------------------------------------------------------------------


def _talker_choose(logits, eos, history, config: SamplerConfig, rng: native.Rng | None):
    r, _ = native_tts.c_request(
        greedy=config.greedy,
        temperature=config.temperature,
        top_k=config.top_k,
        top_p=config.top_p,
        repetition_penalty=config.repetition_penalty,
        min_frames=config.min_new_tokens,
    )
    logits = np.ascontiguousarray(logits, dtype=np.float32)
    h = np.asarray(history, dtype=np.int32)
    return sampling.lib().kz_talker_choose(
        logits.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
        len(logits),
        eos,
        h.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
        len(h),
        ctypes.byref(r),
        rng.pointer if rng else None,
    )


@pytest.mark.parametrize(
    "config",
    [
        SamplerConfig(greedy=True),
        SamplerConfig(),
        SamplerConfig(temperature=0.7, top_k=5),
        SamplerConfig(top_k=0, repetition_penalty=1.3),
        SamplerConfig(top_p=0.8),
    ],
    ids=["greedy", "reference", "t0.7_k5", "no_topk_penalty1.3", "top_p0.8"],
)
def test_talker_sampler_is_the_numpy_one(config):
    """The engine's TalkerSampler (kz_talker_choose with the history it keeps) == the numpy
    oracle on every golden talker logits row, drawing from the same stream."""
    for name in CASES:
        manifest, arrays = goldens.load_case(DUMPS / name)
        logits, eos = arrays["talker_logits"], int(manifest["codec_eos_token_id"])
        want_sampler = oracle.TalkerSampler.for_talker(logits.shape[1], eos, config)
        got_sampler = sampling.TalkerSampler.for_talker(logits.shape[1], eos, config)
        py_rng, c_rng = native.Rng(7), native.Rng(7)
        for step, row in enumerate(logits):
            want = want_sampler.choose(row, None if config.greedy else py_rng)
            got = got_sampler.choose(row, None if config.greedy else c_rng)
            assert got == want, f"{name}: step {step}"
        assert py_rng.state.value == c_rng.state.value
        assert got_sampler.history.tolist() == want_sampler.history


def test_both_engines_refuse_a_text_longer_than_one_request_takes(engines):
    """10 MB of text kept a request planning its pieces for minutes: both engines refuse more than
    MAX_TEXT_CHARS code points at once, with the same words (and take that many)."""
    from kazetts.request import MAX_TEXT_CHARS

    text = "Voilà. " * (MAX_TEXT_CHARS // 7) + "é" * (MAX_TEXT_CHARS % 7 + 1)  # code points, not bytes
    message = f"the text is {MAX_TEXT_CHARS + 1} characters; one request takes at most {MAX_TEXT_CHARS}"
    with pytest.raises(ValueError, match=message):
        engines("python").synthesize(text, speaker="vivian", max_frames=1)
    with pytest.raises(native.NativeError, match="invalid argument: " + message):
        engines("native").synthesize(text, speaker="vivian", max_frames=1)


@pytest.mark.parametrize("greedy", [True, False])
@pytest.mark.parametrize("nan_at", ["all", "one"])
def test_nan_logits_are_an_error_in_both_samplers(greedy, nan_at):
    """A damaged model's NaN logits: kz_talker_choose returned 0 for them (argmax of NaN), the
    numpy sampler as well; both now refuse the step with the same words (kz_talker_choose: -2)."""
    from kazetts.errors import KazettsError
    from kazetts.stages.sampling import NAN_LOGITS

    vocab, eos = 3072, 2150
    row = np.random.default_rng(0).standard_normal(vocab).astype(np.float32)
    if nan_at == "all":
        row.fill(np.nan)
    row[17] = np.nan
    config = SamplerConfig(greedy=greedy)
    for sampler in (oracle.TalkerSampler, sampling.TalkerSampler):
        with pytest.raises(KazettsError, match=re.escape(NAN_LOGITS)):
            sampler.for_talker(vocab, eos, config).choose(row, None if greedy else native.Rng(1))
    assert _talker_choose(row, eos, [], config, None if greedy else native.Rng(1)) == sampling.NAN_STATUS
    if nan_at == "one":  # the same row without its NaN is a step like any other
        row[17] = 0.5
        assert _talker_choose(row, eos, [], config, None if greedy else native.Rng(1)) >= 0


@pytest.mark.parametrize("min_new_tokens", [0, 2, 5])
@pytest.mark.parametrize("greedy", [True, False])
def test_talker_end_of_speech_ban_is_the_numpy_one(min_new_tokens, greedy):
    """On logits where end-of-speech leads by far, both rules ban it exactly while fewer than
    min_new_tokens ids were generated (the request's min_frames)."""
    vocab, eos = 3072, 2150
    config = SamplerConfig(greedy=greedy, min_new_tokens=min_new_tokens)
    sampler = oracle.TalkerSampler.for_talker(vocab, eos, config)
    py_rng, c_rng = native.Rng(3), native.Rng(3)
    row = np.random.default_rng(0).standard_normal(vocab).astype(np.float32)
    row[eos] = 40.0
    for step in range(7):
        history = list(sampler.history)
        want = sampler.choose(row.copy(), None if greedy else py_rng)
        got = _talker_choose(row, eos, history, config, None if greedy else c_rng)
        assert got == want and (got == eos) == (step >= min_new_tokens), f"step {step}"
    r, _ = native_tts.c_request(greedy=True, min_frames=-1)  # greedy: no rng needed, only min_frames is wrong
    assert (
        sampling.lib().kz_talker_choose(
            row.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), vocab, eos, None, 0, ctypes.byref(r), None
        )
        == -1
    )


def test_rng_is_splitmix64():
    """The stream both engines draw from: splitmix64 of the seed, 53-bit uniforms."""
    state, mask = 42, 2**64 - 1
    rng = native.Rng(42)
    for _ in range(5):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        assert rng.random() == (z >> 11) / 2.0**53


# ------------------------------------------------------------------ several requests at once (#30)

# (kind, text, options, frames after which the request stops itself or None): different texts,
# voices, languages, seeds, sampling, lengths, chunkings; one streamed in, one stopped midway
TOGETHER = [
    (
        "synthesize",
        "Hello world, this is the first voice.",
        dict(speaker="vivian", language="english", greedy=True, max_frames=14, chunk_frames=3),
        None,
    ),
    (
        "synthesize",
        "Bonjour ! Une autre voix, une autre phrase.",
        dict(speaker="ryan", language="french", seed=7, max_frames=11, chunk_frames=2),
        None,
    ),
    (
        "synthesize",
        "A third one, stopped by its listener.",
        dict(speaker="serena", seed=3, max_frames=20, chunk_frames=1),
        5,
    ),
    (
        "stream_text",
        ["Streamed text ", "comes in ", "pieces."],
        dict(speaker="aiden", language="english", seed=11, max_frames=9),
        None,
    ),
]


def _say(tts, kind, text, options, stop_after, on_chunk_extra=None):
    def on_chunk(audio, codes, frames_total):
        if on_chunk_extra:
            on_chunk_extra(frames_total)
        return stop_after is None or frames_total < stop_after

    return getattr(tts, kind)(text, on_chunk=on_chunk, **options)


def test_requests_together_equal_requests_alone(tiny_gguf):
    """max_batch: requests said at once from several threads, joining and leaving mid-stream
    (the last starts once the first has delivered 4 frames or ended; one stops itself after 5),
    give each the codes, audio and chunks it gets alone, whichever steps ran together (which
    depends on the threads' timing: printed, not asserted)."""
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32", 0)
    tts = NativeTTS(talker, mmproj, threads=2, codec_weights="f32", max_batch=len(TOGETHER))
    alone = [_say(tts, *request) for request in TOGETHER]
    assert all(r.batch_max == 1 for r in alone)

    late_may_start = threading.Event()
    results = [None] * len(TOGETHER)

    def run(i, extra=None):
        try:
            results[i] = _say(tts, *TOGETHER[i], on_chunk_extra=extra)
        finally:
            late_may_start.set()

    threads = [threading.Thread(target=run, args=(0, lambda frames: frames >= 4 and late_may_start.set()))]
    threads += [threading.Thread(target=run, args=(i,)) for i in range(1, len(TOGETHER) - 1)]
    threads.append(threading.Thread(target=lambda: late_may_start.wait() and run(len(TOGETHER) - 1)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"most requests stepping together, per request: {[r.batch_max for r in results]}")
    for i, (got, want) in enumerate(zip(results, alone)):
        assert np.array_equal(got.codes, want.codes), i
        assert np.array_equal(got.audio, want.audio), i
        assert got.stop_reason == want.stop_reason, i
        if TOGETHER[i][0] == "synthesize":  # (text streamed in is cut into chunks where it waited for text)
            assert got.chunks == want.chunks, i
    assert results[2].stop_reason == "cancelled" and results[2].codes.shape[0] == 5


def test_one_request_more_than_max_batch_is_refused(tiny_gguf):
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32", 0)
    tts = NativeTTS(talker, mmproj, threads=2, codec_weights="f32", max_batch=1)
    inside, release, refused = threading.Event(), threading.Event(), []

    def hold(audio, codes, frames_total):
        inside.set()
        release.wait()
        return True

    holder = threading.Thread(target=lambda: tts.synthesize("Hello.", on_chunk=hold, speaker="vivian", max_frames=3))
    holder.start()
    inside.wait()
    try:
        with pytest.raises(native.NativeError, match="max_batch requests already"):
            tts.synthesize("Hello.", speaker="vivian", max_frames=3)
    finally:
        release.set()
        holder.join()
    assert tts.synthesize("Hello.", speaker="vivian", max_frames=3, greedy=True).codes.shape[0] >= 1
    with pytest.raises(native.NativeError, match="max_batch must be in 1..16, got 0"):
        NativeTTS(talker, mmproj, threads=2, max_batch=0)
    with pytest.raises(native.NativeError, match="queue must be >= 0, got -1"):
        NativeTTS(talker, mmproj, threads=2, queue=-1)


def test_a_request_beyond_max_batch_waits_in_the_queue(tiny_gguf):
    """max_batch 1, queue 1, a request running: of two more, one waits for the seat and then gets
    what it gets alone, the other is refused at once; kz_tts_cancel makes a waiting one give up."""
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32", 0)
    tts = NativeTTS(talker, mmproj, threads=2, codec_weights="f32", max_batch=1, queue=1)
    request = dict(speaker="vivian", max_frames=3, greedy=True)
    alone = tts.synthesize("Hello.", **request).codes
    inside, release, results = threading.Event(), threading.Event(), {}

    def hold(audio, codes, frames_total):
        inside.set()
        return release.wait(60)

    def run(name, **options):
        try:
            results[name] = tts.synthesize("Hello.", **{**request, **options})
        except native.NativeError as e:
            results[name] = e

    def two_more() -> tuple[str, list]:
        """The holder runs; two more requests: (the one waiting, the threads) once the other is refused."""
        inside.clear(), release.clear(), results.clear()
        threads = [threading.Thread(target=run, args=("holder",), kwargs=dict(on_chunk=hold))]
        threads[0].start()
        inside.wait()
        threads += [threading.Thread(target=run, args=(name,)) for name in ("a", "b")]
        for t in threads[1:]:
            t.start()
        for _ in range(12000):  # (the bound only keeps a bug from hanging the run)
            refused = [n for n in ("a", "b") if isinstance(results.get(n), native.NativeError)]
            if refused:
                break
            threading.Event().wait(0.005)
        assert len(refused) == 1 and "more wait already" in str(results[refused[0]])
        return ("b" if refused == ["a"] else "a"), threads

    queued, threads = two_more()
    release.set()
    for t in threads:
        t.join()
    assert np.array_equal(results[queued].codes, alone)

    queued, threads = two_more()
    tts.cancel()
    threads[1 if queued == "a" else 2].join()
    assert "cancelled (kz_tts_cancel) while it waited for a seat" in str(results[queued])
    release.set()
    for t in threads:
        t.join()
    assert results["holder"].stop_reason == "cancelled"
