"""Text streamed in: final token boundaries against llama.cpp's own tokenizer, pieces that lose
and reorder nothing, and TTS.stream_text giving exactly the codes of TTS.stream (greedy)."""

from __future__ import annotations

import asyncio
import random

import numpy as np
import pytest

from kazetts.engine.text_split import piece_end
from kazetts.engine.text_stream import TextPieces, final_boundary
from kazetts.engine.tts import PIECE_CHARS, TTS
from kazetts.stages.prompt import ROLE_TOKENS, TAIL_TOKENS, chat_text
from kazetts.validation.oracles import text_stream as oracle

SENTENCE = "Hello there, it's 12:30 and we're late; don't  wait.\nOK?"


@pytest.fixture(scope="module")
def tts(tiny_gguf):
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32")
    return TTS(talker, mmproj, threads=2, codec_weights="f32")


def body(tts, text: str) -> list[int]:
    ids = tts.talker.tokenize(chat_text(text))
    return ids[ROLE_TOKENS : len(ids) - TAIL_TOKENS]


def read_pieces(pieces: TextPieces) -> list[tuple[str, list[int]]]:
    """Every piece as the frame loop reads it: token by token until the piece ends."""
    out = []
    while pieces.next_piece():
        i = 0
        while pieces.token(i) is not None:
            i += 1
        out.append((pieces.text, list(pieces.tokens)))
    return out


def random_chunks(text: str, rng: random.Random, as_bytes: bool) -> list:
    data = text.encode() if as_bytes else text
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(0, 12)))) if len(data) > 1 else []
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]


ALPHABET = [
    "a",
    "b",
    "Z",
    "é",
    "e\u0301",
    " ",
    "  ",
    "\t",
    "\n",
    "\n\n",
    ".",
    ",",
    "!",
    "?",
    "'",
    "'s",
    "'re",
    '"',
    "1",
    "23",
    "-",
    "你",
    "好",
    "，",
    "。",
    "🙂",
    "(",
    ")",
    "don",
    "word",
    "  \n ",
]


def test_final_boundaries_never_change_a_committed_token(tts):
    """Random texts and random chunkings (str, and UTF-8 bytes cut inside characters): every
    token committed early is the token the whole text gives (TextPieces re-checks each step)."""
    rng = random.Random(7)
    for _ in range(300):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 30)))
        if not text.strip():
            continue
        for as_bytes in (False, True):
            pieces = read_pieces(TextPieces(random_chunks(text, rng, as_bytes), tts.talker.tokenize, 1000))
            assert [tokens for _, tokens in pieces] == [body(tts, text)], repr(text)


def test_the_commit_rule_is_its_statement():
    """libkazetts' kz_text_final_boundary and kz_text_piece_end against the rule in Python
    strings (kazetts/validation/oracles/text_stream.py) on random texts, limits and states."""
    rng = random.Random(11)
    for _ in range(2000):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 40)))
        limit, piece_chars = rng.randint(0, 45), rng.randint(1, 40)
        committed, ended = oracle.final_boundary(text, rng.randint(0, 40)), rng.random() < 0.5
        assert final_boundary(text, limit) == oracle.final_boundary(text, limit), (text, limit)
        assert final_boundary(text) == oracle.final_boundary(text), text
        expected = oracle.piece_end(text, piece_chars, committed, ended)
        assert piece_end(text, piece_chars, committed, ended) == expected, (text, piece_chars, committed, ended)


def test_early_tokens_are_committed_before_the_text_ends(tts):
    pulled = []

    def words():
        for word in SENTENCE.split(" "):
            pulled.append(word)
            yield word + " "

    pieces = TextPieces(words(), tts.talker.tokenize, PIECE_CHARS)
    assert pieces.next_piece()
    assert len(pulled) == 1 and pieces.tokens == body(tts, "Hello")  # final once its space came
    assert pieces.token(1) is not None and len(pulled) == 2 and not pieces.closed
    assert final_boundary("Hel") == 0 and final_boundary("Hello wor") == 5 and final_boundary("don't") == 3


def test_long_text_is_cut_into_pieces_that_join_back(tts):
    text = (
        "Ceci est une phrase assez longue pour remplir un morceau de texte, avec des virgules. " * 9
        + "Un mot"
        + "x" * 400
    )
    words = [w + " " for w in text.split(" ")]
    words[-1] = words[-1][:-1]
    pieces = read_pieces(TextPieces(words, tts.talker.tokenize, PIECE_CHARS))
    assert "".join(t for t, _ in pieces) == text
    assert len(pieces) >= 4 and all(len(t) <= PIECE_CHARS for t, _ in pieces)
    assert all(tokens == body(tts, t) for t, tokens in pieces)
    assert pieces[0][0].endswith(". ")  # cut at a sentence end past PIECE_CHARS // 2


def test_stream_text_word_by_word_gives_the_codes_of_the_whole_text(tts):
    options = dict(speaker="vivian", language="english", greedy=True, max_frames=24)
    whole = tts.synthesize(SENTENCE, **options)
    sent, first_audio_after = [], []

    def words():
        for word in SENTENCE.split(" "):
            sent.append(word)
            yield word if len(sent) == 1 else " " + word

    chunks = []
    stream = tts.stream_text(words(), **options)
    for chunk in stream:
        if len(chunk.audio) and not first_audio_after:
            first_audio_after.append(len(sent))
        chunks.append(chunk)
    assert np.array_equal(np.concatenate([c.codes for c in chunks]), whole.codes)
    assert np.array_equal(np.concatenate([c.audio for c in chunks]), whole.audio)
    assert stream.stopped_by == whole.stopped_by and stream.timings["frames"] == len(whole.codes)
    n_words = len(SENTENCE.split(" "))
    assert first_audio_after[0] < n_words, "speech starts before the last word is sent"


def test_stream_text_takes_async_chunks_and_bytes(tts):
    """(sampled, with the sampling options: the same seed gives the same audio as stream)"""
    options = dict(
        speaker="ryan",
        language="auto",
        seed=5,
        max_frames=10,
        temperature=0.7,
        top_k=5,
        top_p=0.8,
        repetition_penalty=1.3,
        cp_temperature=1.3,
        cp_top_k=20,
        cp_top_p=0.9,
    )
    text = "Grüße, 你好！ 🙂 ok."
    whole = tts.synthesize(text, **options)

    async def deltas():
        data = text.encode()
        for i in range(0, len(data), 3):  # cuts inside multi-byte characters
            await asyncio.sleep(0)
            yield data[i : i + 3]

    audio = tts.stream_text(deltas(), **options)  # made outside the event loop, iterated in it

    async def collect():
        return [chunk async for chunk in audio]

    chunks = asyncio.run(collect())
    assert np.array_equal(np.concatenate([c.audio for c in chunks]), whole.audio)
    assert np.array_equal(np.concatenate([c.codes for c in chunks]), whole.codes)
    assert audio.stopped_by == whole.stopped_by and audio.timings["frames"] == len(whole.codes)


def test_stream_text_checks_the_voice_before_reading_text(tts):
    def never():
        raise AssertionError("text was read")
        yield ""

    with pytest.raises(ValueError, match="unknown speaker"):
        tts.stream_text(never(), speaker="nobody")
    with pytest.raises(ValueError, match=r"^top_p must be a number in \(0, 1\], got 2.0$"):
        tts.stream_text(never(), speaker="vivian", top_p=2.0)
    with pytest.raises(ValueError, match="empty text"):
        list(tts.stream_text(iter([" ", "\n"]), speaker="vivian"))


def test_a_one_token_text_is_said(tts):
    """Its trailing text is empty (the embedding row reader used to fail on no rows)."""
    assert len(body(tts, "Hi")) == 1
    result = tts.synthesize("Hi", speaker="vivian", greedy=True, max_frames=3)
    streamed = np.concatenate(
        [c.audio for c in tts.stream_text(iter(["H", "i"]), speaker="vivian", greedy=True, max_frames=3)]
    )
    assert result.codes.shape[0] == 3 and np.array_equal(streamed, result.audio)
