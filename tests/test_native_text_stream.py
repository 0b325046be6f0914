"""Text streamed into the native engine (kz_tts_stream_* in kazetts/tts.h): for the same text and
seed, however the text is cut (word by word, byte by byte, inside a UTF-8 character, at random),
the native stream gives exactly the codes and samples of kz_tts_synthesize(text) and of the Python
engine's TTS.stream_text, greedy and sampled; cancel, empty text and bad requests."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest

from kazetts.engine.native_tts import NativeTTS
from kazetts.engine.tts import TTS
from kazetts.native import NativeError

SENTENCE = "Hello there, it's 12:30 and we're late; don't  wait.\nOK?"
MIXED = "Grüße, 你好！ 🙂 ok."
SAMPLED = dict(seed=5, temperature=0.7, top_k=5, top_p=0.8, repetition_penalty=1.3, cp_temperature=1.3)


@pytest.fixture(scope="module")
def engines(tiny_gguf):
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32")
    return NativeTTS(talker, mmproj, threads=2, codec_weights="f32"), TTS(
        talker, mmproj, threads=2, codec_weights="f32"
    )


def cuts(text: str, how: str, rng: random.Random) -> list:
    if how == "words":
        words = text.split(" ")
        return [words[0]] + [" " + w for w in words[1:]]
    data = text.encode()
    if how == "bytes":
        return [data[i : i + 1] for i in range(len(data))]
    at = sorted(rng.sample(range(1, len(data)), rng.randint(1, min(8, len(data) - 1))))
    return [data[a:b] for a, b in zip([0, *at], [*at, len(data)])]


def python_stream(python: TTS, text: str, **options) -> tuple[np.ndarray, np.ndarray]:
    """The codes and samples of the Python engine's stream_text, word by word."""
    chunks = list(python.stream_text(iter(cuts(text, "words", None)), **options))
    return np.concatenate([c.codes for c in chunks]), np.concatenate([c.audio for c in chunks])


@pytest.mark.parametrize("text", [SENTENCE, MIXED])
@pytest.mark.parametrize("sampling", ["greedy", "sampled"])
def test_the_native_stream_gives_the_codes_and_samples_of_the_whole_text(engines, text, sampling):
    native, python = engines
    options = dict(speaker="vivian", language="english", max_frames=12)
    options.update(dict(greedy=True) if sampling == "greedy" else SAMPLED)
    whole = native.synthesize(text, **options)
    codes, python_audio = python_stream(python, text, **options)
    assert np.array_equal(codes, whole.codes)
    assert np.array_equal(python_audio, whole.audio)
    rng = random.Random(3)
    for how in ("words", "bytes", "random", "random"):
        streamed = native.stream_text(cuts(text, how, rng), **options)
        assert np.array_equal(streamed.codes, whole.codes), how
        assert np.array_equal(streamed.audio, whole.audio), how
        assert streamed.stop_reason == whole.stop_reason


def test_the_piece_budget_and_speed_as_the_python_stream(engines):
    """No frame cap: a piece ends at its text's budget once its text is known; speed 1.5."""
    native, python = engines
    options = dict(speaker="ryan", language="auto", seed=2, speed=1.5)
    text = "Short one."
    codes, python_audio = python_stream(python, text, **options)
    streamed = native.stream_text(cuts(text, "bytes", None), **options)
    assert np.array_equal(streamed.codes, codes)
    assert np.array_equal(streamed.audio, python_audio)
    whole = native.synthesize(text, **options)
    assert np.array_equal(streamed.codes, whole.codes) and np.array_equal(streamed.audio, whole.audio)


def test_long_text_in_the_pieces_and_crossfades_of_the_python_stream(engines):
    """Past PIECE_CHARS // 2 the pieces end at settled sentence ends or cut points, each piece's
    tail crossfaded into the next and the last one flushed at the end: as TTS.stream_text."""
    native, python = engines
    text = "Une phrase assez longue pour remplir un morceau, avec des virgules et des mots. " * 5 + "Fin"
    options = dict(speaker="vivian", language="french", seed=4, max_frames=3)
    codes, python_audio = python_stream(python, text, **options)
    streamed = native.stream_text(cuts(text, "words", None), **options)
    assert streamed.pieces == 3
    assert np.array_equal(streamed.codes, codes)
    assert np.array_equal(streamed.audio, python_audio)


def test_random_texts_cut_at_random(engines):
    native, _ = engines
    rng = random.Random(9)
    alphabet = [
        "a",
        "Z",
        "é",
        "e\u0301",
        " ",
        "  ",
        "\n",
        ".",
        ",",
        "'s",
        '"',
        "1",
        "23",
        "你",
        "。",
        "🙂",
        ")",
        "word",
    ]
    for _ in range(6):
        text = "x" + "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 20)))
        options = dict(speaker="vivian", greedy=True, max_frames=4)
        whole = native.synthesize(text, **options)
        streamed = native.stream_text(cuts(text, "random", rng), **options)
        assert np.array_equal(streamed.codes, whole.codes), repr(text)
        assert np.array_equal(streamed.audio, whole.audio), repr(text)


def test_cancel_while_the_stream_waits_for_text(engines):
    native, _ = engines
    heard = threading.Event()

    def text():
        yield "Hello "
        assert heard.wait(120), "no audio came from the first word"
        native.cancel()
        yield "there, more words after the cancel."

    result = native.stream_text(text(), on_chunk=lambda *_: heard.set() or True, speaker="vivian", greedy=True)
    assert result.stop_reason == "cancelled" and 0 < len(result.codes)


def test_a_callback_that_stops_the_stream(engines):
    native, _ = engines
    result = native.stream_text(cuts(SENTENCE, "words", None), on_chunk=lambda *_: False, speaker="vivian", greedy=True)
    assert result.stop_reason == "cancelled" and len(result.codes) == 1  # the first frame's chunk only


@pytest.mark.parametrize("chunks", [[], ["  ", "\n", b"\t"]])
def test_an_empty_stream_has_nothing_to_say(engines, chunks):
    with pytest.raises(NativeError, match="empty text: there is nothing to say"):
        engines[0].stream_text(chunks, speaker="vivian", greedy=True)


def test_bad_requests_fail_at_begin_before_any_text(engines):
    native, _ = engines

    def never():
        raise AssertionError("text was read")
        yield ""

    for options, message in [
        (dict(speaker="nobody"), "nobody"),
        (dict(speaker="vivian", text_streaming=False), "text_streaming must be 1"),
        (dict(speaker="vivian", top_p=0.0), "top_p must be in"),
        (dict(speaker="vivian", speed=9.0), "speed must be within"),
    ]:
        with pytest.raises(NativeError, match=message):
            native.stream_text(never(), **options)
    assert native.stream_text(["Ok."], speaker="vivian", greedy=True, max_frames=2).stop_reason == "budget"


def test_text_that_is_not_utf8(engines):
    native, _ = engines
    with pytest.raises(NativeError, match="not UTF-8"):
        native.stream_text([b"ok \xff"], speaker="vivian", greedy=True, max_frames=2)
    with pytest.raises(NativeError, match="inside a UTF-8 character"):
        native.stream_text([b"ok \xe4\xbd"], speaker="vivian", greedy=True, max_frames=2)
