"""End to end through kazetts.TTS against the reference goldens, and the request API's behaviour."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from conftest import DUMPS, golden_request
from kazetts.validation import goldens
from kazetts.engine.tts import TTS, frame_budget
from kazetts.request import Request

CASES = [case.name for case in goldens.CASES]


@pytest.fixture(scope="module")
def engines(tiny_tts):
    return tiny_tts


@pytest.mark.parametrize("name", CASES)
def test_greedy_end_to_end_matches_reference(name, engines):
    manifest, arrays = goldens.load_case(DUMPS / name)
    ck = manifest["checkpoint"]
    result = engines(ck["preset"], ck["model_type"], ck["seed"]).synthesize(
        manifest["case"]["text"], **golden_request(manifest, arrays)
    )
    same = (
        int((result.codes == arrays["codes"]).all(axis=1).sum()) if result.codes.shape == arrays["codes"].shape else 0
    )
    wave_diff = (
        float(np.abs(result.audio - arrays["waveform"]).max())
        if len(result.audio) == len(arrays["waveform"])
        else np.inf
    )
    print(
        f"{name}: {same}/{manifest['frames']} frames with all 16 codes identical; stopped by {result.stopped_by}; "
        f"waveform max abs diff {wave_diff:.2e}"
    )
    assert np.array_equal(result.codes, arrays["codes"])
    assert result.stopped_by == ["eos" if manifest["stopped_by"] == "eos" else "max_frames"]
    assert wave_diff <= goldens.GATES["codec_max_abs"]
    if name in goldens.F32_EXACT_CASES:
        assert wave_diff <= goldens.GATES["f32_checkpoint_waveform_max_abs"]


def test_stream_sends_the_first_frame_alone_then_chunks(engines):
    """First audio after one frame (time to first audio), then `chunk_frames` frames per push;
    the codec streams exactly, so the chunking changes no sample."""
    tts = engines()
    case = goldens.CASES_BY_NAME["long_window"]  # greedy: 119 frames before end-of-speech
    options = {"speaker": case.speaker, "language": case.language, "greedy": True, "max_frames": 11}
    chunks = list(tts.stream(case.text, chunk_frames=4, **options))
    assert [c.frames for c in chunks] == [1, 5, 9, 11]
    assert np.array_equal(np.concatenate([c.audio for c in chunks]), tts.synthesize(case.text, **options).audio)
    with pytest.raises(ValueError, match="chunk_frames"):
        next(tts.stream(case.text, speaker=case.speaker, chunk_frames=0))


def test_stream_concatenated_equals_synthesize_when_sampling(engines, monkeypatch):
    tts = engines()
    text = "Bonjour ! Le 14 juillet 1789, à Paris."
    predicted = []  # frames the code predictor has made when each chunk comes out
    predict = tts.code_predictor.predict
    monkeypatch.setattr(tts.code_predictor, "predict", lambda *a, **k: (predicted.append(1), predict(*a, **k))[1])
    seen = []
    streamed = []
    for chunk in tts.stream(text, speaker="vivian", language="french", seed=3, max_frames=12, chunk_frames=1):
        seen.append(len(predicted))
        streamed.append(chunk.audio)
    result = tts.synthesize(text, speaker="vivian", language="french", seed=3, max_frames=12)
    assert np.array_equal(np.concatenate(streamed), result.audio)
    assert len(streamed) == result.codes.shape[0] >= 2
    assert seen == list(range(1, len(streamed) + 1)), "audio arrives frame by frame, not at the end"
    other = tts.synthesize(text, speaker="vivian", language="french", seed=4, max_frames=12)
    assert not np.array_equal(other.codes, result.codes), "the seed drives sampling"


def test_long_text_is_split_in_order_and_crossfaded(engines):
    tts = engines()
    sentence = "Ceci est une phrase assez longue pour remplir un morceau de texte, avec des virgules. "
    text = sentence * 8  # about 700 characters: three pieces
    stream = tts.stream(text, speaker="vivian", language="french", greedy=True, max_frames=6)
    pieces = [c.piece for c in stream]
    stopped = stream.stopped_by
    assert pieces == sorted(pieces) and pieces[-1] == len(stopped) - 1 >= 2
    result = tts.synthesize(text, speaker="vivian", language="french", greedy=True, max_frames=6)
    frames = result.codes.shape[0]
    assert len(result.audio) == frames * 1920 - (len(stopped) - 1) * 240


def test_runaway_guard_warns(engines, monkeypatch):
    import kazetts.engine.tts as tts_module

    monkeypatch.setattr(tts_module, "frame_budget", lambda n_text_tokens, max_frames, n_prefill, n_ctx: 3)
    with pytest.warns(RuntimeWarning, match="budget of 3 frames"):
        result = engines().synthesize("Hello there.", speaker="ryan", language="english", greedy=True)
    assert result.codes.shape[0] == 3


def test_frame_budget_is_24_plus_8_per_text_id_within_the_context():
    assert frame_budget(10, None, 100, 2048) == 24 + 8 * 10
    assert frame_budget(10, 5, 100, 2048) == 5, "max_frames replaces the guard's budget"
    assert frame_budget(10, None, 2000, 2048) == frame_budget(10, 500, 2000, 2048) == 48, "clipped to the room"
    assert frame_budget(0, None, 2048, 2048) == frame_budget(0, 3, 3000, 2048) == 0, "no room"
    assert frame_budget(10, 2**40, 100, 2048) == 1948, "a max_frames beyond an int32 is all the room"


@pytest.mark.parametrize("text", ["Bonjour, ça va ? 12 345 €", "你好，世界。今天很好！", "Emoji 🙂🎉 ok", "x" * 400])
def test_many_scripts_give_audio(engines, text):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = engines().synthesize(text, speaker="vivian", language="auto", greedy=True, max_frames=4)
    assert result.codes.shape[1] == 16 and len(result.audio) > 0 and np.isfinite(result.audio).all()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"text": "   \n "}, "empty text"),
        ({"text": "Hi.", "speaker": "nobody"}, "unknown speaker"),
        ({"text": "Hi.", "language": "klingon"}, "unknown language"),
    ],
)
def test_bad_requests_fail_before_compute(engines, kwargs, message):
    tts = engines()
    position = tts.talker.position
    with pytest.raises(ValueError, match=message):
        tts.synthesize(**kwargs)
    assert tts.talker.position == position


def test_model_properties(engines):
    tts = engines()
    assert "vivian" in tts.speakers and "french" in tts.languages and tts.model_type == "custom_voice"
    assert engines("tiny", "base").speakers == [] and tts.sample_rate == 24000


def test_five_thousand_characters_are_all_said_in_order(engines):
    """Every piece of a 5,000-character multilingual text is synthesized, in order."""
    from kazetts.engine.text_split import split_text
    from kazetts.engine.tts import PIECE_CHARS

    sentences = [
        "Le 14 juillet 1789, à Paris. ",
        "今天天气很好，我们去公园吧！",
        "Emoji 🙂 and digits 12 345. ",
        "Ceci est une phrase assez longue, avec des virgules, des points et des accents. ",
    ]
    text = "".join(sentences[i % len(sentences)] for i in range(200))[:5000]
    expected = [p for p in split_text(text, PIECE_CHARS) if p.strip()]
    stream = engines().stream(text, speaker="vivian", language="auto", greedy=True, max_frames=2)
    pieces = [c.piece for c in stream]
    assert len(stream.stopped_by) == len(expected) >= 17
    assert pieces == sorted(pieces) and set(pieces) == set(range(len(expected)))


def test_a_model_directory_is_enough(tiny_gguf, tiny_tts):
    """kazetts.TTS("models/tiny"), as the CLI, the server and the docs speak of a model folder."""
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32")
    with TTS(talker.parent, threads=1, codec_weights="f32") as tts:
        assert (tts.talker.file.path, tts.mmproj) == (talker, str(mmproj))
        codes = tts.synthesize("Hello there.", speaker="vivian", greedy=True, max_frames=4).codes
    assert np.array_equal(
        codes, tiny_tts().synthesize("Hello there.", speaker="vivian", greedy=True, max_frames=4).codes
    )
    with pytest.raises(ValueError, match="is not a model directory: give a directory with one"):
        TTS(talker)
    with pytest.raises(ValueError, match="must hold exactly one"):
        TTS(talker.parent.parent)


# -- the request: kazetts.Request, the old names, the figures on the stream ----------------------------
TEXT = "Bonjour ! Le 14 juillet 1789, à Paris."
SAMPLING = dict(
    temperature=0.7, top_k=5, top_p=0.8, repetition_penalty=1.3, cp_temperature=1.3, cp_top_k=20, cp_top_p=0.9
)


def test_a_request_and_keyword_options_are_one_request(engines):
    """A Request given, or its fields as keywords, say the same; keywords override its fields
    (the Request itself unchanged)."""
    tts = engines()
    request = Request(speaker="vivian", language="french", seed=3, max_frames=8, **SAMPLING)
    given = tts.synthesize(TEXT, request)
    keywords = tts.synthesize(TEXT, speaker="vivian", language="french", seed=3, max_frames=8, **SAMPLING)
    assert np.array_equal(given.codes, keywords.codes) and np.array_equal(given.audio, keywords.audio)
    reseeded = tts.synthesize(TEXT, request, seed=4)
    assert request.seed == 3 and not np.array_equal(reseeded.codes, given.codes)
    assert np.array_equal(
        reseeded.codes,
        tts.synthesize(TEXT, speaker="vivian", language="french", seed=4, max_frames=8, **SAMPLING).codes,
    )


def _deprecations(call):
    """call()'s result and the (message, file) of each DeprecationWarning it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [(str(w.message), w.filename) for w in caught if issubclass(w.category, DeprecationWarning)]


def test_old_names_still_work_with_a_warning_and_say_the_same(engines):
    """subtalker_*, speaker_embedding and the lists stream once filled in: the same codes and
    samples as the new names, each with a DeprecationWarning naming the new one, shown at the caller."""
    tts = engines()
    options = dict(speaker="vivian", language="french", seed=3, max_frames=8)
    new = tts.synthesize(TEXT, **options, **SAMPLING)
    old_sampling = {name.replace("cp_", "subtalker_"): value for name, value in SAMPLING.items()}
    old, warned = _deprecations(lambda: tts.synthesize(TEXT, **options, **old_sampling))
    assert np.array_equal(old.codes, new.codes) and np.array_equal(old.audio, new.audio)
    assert warned == [
        (f"subtalker_{name}= is deprecated: use cp_{name}=", __file__) for name in ("temperature", "top_k", "top_p")
    ]

    timings, codes, stopped = {}, [], []
    audio, warned = _deprecations(
        lambda: [
            c.audio
            for c in tts.stream(TEXT, **options, **SAMPLING, timings=timings, codes_out=codes, stopped_by=stopped)
        ]
    )
    assert [message.split("=")[0] for message, _ in warned] == ["timings", "codes_out", "stopped_by"]
    assert all(file == __file__ for _, file in warned)
    assert np.array_equal(np.concatenate(audio), new.audio) and np.array_equal(np.stack(codes), new.codes)
    assert stopped == new.stopped_by and timings["frames"] == len(new.codes)

    base = engines("tiny", "base")
    xvector = np.random.default_rng(0).standard_normal(base.talker.hidden_size).astype(np.float32)
    new = base.synthesize(TEXT, xvector=xvector, greedy=True, max_frames=4)
    old, warned = _deprecations(lambda: base.synthesize(TEXT, speaker_embedding=xvector, greedy=True, max_frames=4))
    assert np.array_equal(old.codes, new.codes) and np.array_equal(old.audio, new.audio)
    assert warned == [("speaker_embedding= is deprecated: use xvector=", __file__)]


def test_unknown_options_and_a_request_of_another_type_are_one_line_type_errors(engines):
    tts = engines()
    with pytest.raises(TypeError, match=r"^unknown request option 'tempreature' \(did you mean 'temperature'\?\)"):
        tts.stream(TEXT, speaker="vivian", tempreature=0.7)
    with pytest.raises(TypeError, match=r"^request must be a kazetts.Request, got str"):
        tts.synthesize(TEXT, "vivian")
    with pytest.raises(TypeError, match="^subtalker_top_k is the old name of cp_top_k: give cp_top_k alone$"):
        tts.synthesize(TEXT, speaker="vivian", cp_top_k=3, subtalker_top_k=4)
    with pytest.raises(ValueError, match=r"^stream_text takes no ref_text: "):
        tts.stream_text(iter(["Hi."]), speaker="vivian", ref_text="Hi.")


@pytest.mark.parametrize("speed", [1.0, 1.5])
def test_the_stream_carries_codes_timings_and_stop_reasons(engines, speed):
    """Each chunk carries the codes of the frames decoded for it (at any speed: the time-stretch
    holds chunks back and adds one), the stream its stop reasons per piece and its timings, which
    synthesize's Result has too."""
    tts = engines()
    text = "Ceci est une phrase assez longue pour remplir un morceau de texte, avec des virgules. " * 4
    options = dict(speaker="vivian", language="french", seed=3, max_frames=5, speed=speed)
    result = tts.synthesize(text, **options)
    stream = tts.stream(text, **options)
    assert stream.stopped_by == [] and stream.timings == {}  # nothing runs before the first chunk is asked for
    chunks = list(stream)
    assert np.array_equal(np.concatenate([c.codes for c in chunks]), result.codes)
    assert [c.frames for c in chunks] == np.cumsum([len(c.codes) for c in chunks]).tolist()
    assert stream.stopped_by == result.stopped_by == ["max_frames", "max_frames"]
    assert stream.timings["frames"] == result.timings["frames"] == len(result.codes) == 10
    assert {"talker", "code_predictor", "codec", "first_chunk", "wall"} <= set(stream.timings)
