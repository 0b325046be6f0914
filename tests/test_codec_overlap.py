"""codec_threads: the codec decoder on its own thread, overlapped with the talker and the code
predictor, in both engines. The overlap changes when the codec runs, nothing else: the same
chunks (frames, pieces, samples) in the same order as serial, the same stops and errors, and no
thread left once a request ends."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest
import soundfile

from conftest import REPO
from kazetts import native
from kazetts.engine.native_tts import NativeTTS, auto_codec_threads
from kazetts.engine.tts import TTS
from kazetts.errors import KazettsError

LONG = "Ceci est une phrase assez longue pour remplir un morceau de texte, avec des virgules. " * 8
SHORT = "Hello world, this is the talker speaking."


@pytest.fixture(scope="module")
def engines(tiny_gguf):
    """engines(kind, codec_threads): a TTS ("python") or NativeTTS ("native") on the tiny model, F32 codec."""
    cache = {}

    def get(kind, codec_threads):
        if (kind, codec_threads) not in cache:
            make = TTS if kind == "python" else NativeTTS
            cache[kind, codec_threads] = make(
                *tiny_gguf("tiny", "custom_voice", "f32", 0),
                threads=1,
                codec_weights="f32",
                codec_threads=codec_threads,
            )
        return cache[kind, codec_threads]

    return get


def codec_workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("kazetts-codec")]


def chunks(tts: TTS, text: str, **options) -> list[tuple[int, int, np.ndarray]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # pieces cut at max_frames
        return [(c.piece, c.frames, c.audio) for c in tts.stream(text, speaker="vivian", language="french", **options)]


@pytest.mark.parametrize(
    "options",
    [
        dict(seed=5, max_frames=6, chunk_frames=4),
        dict(seed=5, max_frames=6, chunk_frames=1),
        dict(greedy=True, max_frames=9, chunk_frames=2, text_streaming=False),
    ],
    ids=["chunks4", "chunks1", "greedy_non_streaming_text"],
)
def test_python_overlap_streams_the_serial_chunks(engines, options):
    """Three pieces (crossfades, a codec reset per piece): every chunk the same, in the same order."""
    serial, overlapped = chunks(engines("python", 0), LONG, **options), chunks(engines("python", 1), LONG, **options)
    assert [(p, f) for p, f, _ in overlapped] == [(p, f) for p, f, _ in serial] and serial[-1][0] == 2
    assert all(np.array_equal(a, b) for (_, _, a), (_, _, b) in zip(serial, overlapped))
    assert not codec_workers()


def test_stream_text_overlap_gives_the_serial_chunks(engines):
    """Text arriving word by word (the talker waits for it): the audio decoded so far is out
    before each wait, overlapped or not, so the chunks are the same."""
    options = dict(speaker="vivian", language="english", seed=7, max_frames=20, chunk_frames=3)

    def run(tts):
        sent = []

        def words():
            for word in SHORT.split(" "):
                sent.append(word)
                yield word if len(sent) == 1 else " " + word

        chunks = [(c, len(sent)) for c in tts.stream_text(words(), **options)]
        got = [(c.piece, c.frames, n, c.audio) for c, n in chunks]
        return got, np.concatenate([c.codes for c, _ in chunks])

    (serial, serial_codes), (overlapped, overlapped_codes) = run(engines("python", 0)), run(engines("python", 1))
    assert [c[:3] for c in overlapped] == [c[:3] for c in serial]  # and each chunk came after as many words
    assert all(np.array_equal(a[3], b[3]) for a, b in zip(serial, overlapped))
    assert np.array_equal(serial_codes, overlapped_codes) and not codec_workers()


def test_synthesize_and_native_engine_agree_with_overlap(engines):
    """Non-streaming synthesize in both engines, serial and overlapped: one set of codes and samples."""
    options = dict(speaker="vivian", language="french", seed=3, max_frames=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = engines("python", 0).synthesize(LONG, **options)
        got = [engines("python", 1).synthesize(LONG, **options)]
    natives = [engines("native", n).synthesize(LONG, **options) for n in (0, 1)]
    for result in got + natives:
        assert np.array_equal(result.codes, want.codes) and np.array_equal(result.audio, want.audio)
    assert natives[0].chunks == natives[1].chunks and natives[1].pieces == 3


def test_python_overlap_stops_when_the_consumer_does(engines):
    """A consumer that stops reading closes the stream: the codec worker ends with it, no later
    audio is made, and the next request gives what a fresh one gives."""
    tts = engines("python", 1)
    stream = tts.stream(SHORT, speaker="vivian", language="french", greedy=True, max_frames=30, chunk_frames=1)
    first = [next(stream).audio for _ in range(2)]
    stream.close()
    assert not codec_workers()
    again = chunks(tts, SHORT, greedy=True, max_frames=30, chunk_frames=1)
    assert all(np.array_equal(a, b) for a, (_, _, b) in zip(first, again))


def test_python_overlap_codec_error_is_the_serial_error(engines, monkeypatch):
    """A codec failure on the worker surfaces as the serial path's exception, once, with no
    audio after it and no worker left; the engine then serves the next request."""
    raised = {}
    for n in (0, 1):
        tts, calls = engines("python", n), []
        real = tts.codec.stream

        def failing(codes, real=real, calls=calls):
            calls.append(len(codes))
            if len(calls) == 2:
                raise native.NativeError(-4, "compute failed: codec graph failed")
            return real(codes)

        monkeypatch.setattr(tts.codec, "stream", failing)
        got = []
        with pytest.raises(native.NativeError) as error:
            for chunk in tts.stream(SHORT, speaker="vivian", greedy=True, max_frames=12):
                got.append(chunk.frames)
        monkeypatch.undo()
        raised[n] = (str(error.value), got)
        assert not codec_workers()
        assert chunks(tts, SHORT, greedy=True, max_frames=3)
    assert raised[0] == raised[1] and raised[0][1] == [1]


def test_python_overlap_close_during_a_request(tiny_gguf):
    tts = TTS(*tiny_gguf("tiny", "custom_voice", "f32", 0), threads=1, codec_weights="f32", codec_threads=1)
    stream = tts.stream(SHORT, speaker="vivian", language="french", greedy=True, max_frames=30, chunk_frames=1)
    next(stream)
    tts.close()
    with pytest.raises(KazettsError, match="closed during the request"):
        list(stream)
    assert not codec_workers()


def _tasks() -> set:
    """The process's thread ids (a set, not a count: a thread of an earlier test may end meanwhile)."""
    return set(os.listdir("/proc/self/task"))


def test_native_overlap_cancel_and_stop(engines):
    """Cancel from another thread while chunk 2 is delivered, and a callback that stops at the
    first: the request ends there (no chunk after), the worker thread is joined, and the handle
    gives the uncancelled result next."""
    tts = engines("native", 1)
    options = dict(speaker="vivian", language="english", greedy=True, max_frames=30, chunk_frames=1)
    whole = tts.synthesize(SHORT, **options)
    tasks = _tasks()

    def on_chunk(audio, codes, frames_total):
        if frames_total == 2:
            canceller = threading.Thread(target=tts.cancel)
            canceller.start()
            canceller.join()
        return True

    cancelled = tts.synthesize(SHORT, on_chunk=on_chunk, **options)
    assert cancelled.stop_reason == "cancelled" and cancelled.codes.shape[0] == 2 and len(cancelled.chunks) == 2
    assert np.array_equal(cancelled.audio, whole.audio[: 2 * 1920])
    stopped = tts.synthesize(SHORT, on_chunk=lambda *a: False, **options)
    assert stopped.stop_reason == "cancelled" and stopped.codes.shape[0] == 1
    deadline = time.monotonic() + 5
    while not _tasks() <= tasks and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _tasks() <= tasks, "a thread the requests started is still running"
    again = tts.synthesize(SHORT, **options)
    assert np.array_equal(again.codes, whole.codes) and np.array_equal(again.audio, whole.audio)


def test_codec_threads_default_and_range(tiny_gguf):
    """The default is the spare cores beyond `threads` (at most `threads`), 0 without one; both
    engines refuse a count out of range, naming it."""
    cores = len(os.sched_getaffinity(0))
    for threads in (1, 2, 4):
        assert auto_codec_threads(threads) == max(0, min(cores - threads, threads))
    files = tiny_gguf("tiny", "custom_voice", "f32", 0)
    with pytest.raises(ValueError, match=r"^codec_threads must be 0\.\.512, got -1$"):
        TTS(*files, codec_threads=-1)
    with pytest.raises(native.NativeError, match="invalid argument: codec_threads must be <= 512"):
        NativeTTS(*files, codec_threads=513)


def test_say_codec_threads_flag(tiny_gguf, tmp_path):
    """`kazetts say --codec-threads N`: the same WAV serial and overlapped; a bad count is refused
    in one line, naming the flag."""
    model = tiny_gguf("tiny", "custom_voice", "f32", 0)[0].parent

    def say(*args):
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "kazetts",
                "say",
                "Bonjour !",
                "--model",
                str(model),
                "--speaker",
                "vivian",
                "--greedy",
                "--max-frames",
                "5",
                "--threads",
                "1",
                *args,
            ],
            capture_output=True,
            text=True,
            cwd=REPO,
        )

    wavs = []
    for n in (0, 1):
        out = tmp_path / f"c{n}.wav"
        r = say("-o", str(out), "--codec-threads", str(n))
        assert r.returncode == 0, r.stderr
        wavs.append(soundfile.read(out, dtype="int16")[0])
    assert len(wavs[0]) == 5 * 1920 and np.array_equal(wavs[0], wavs[1])
    bad = say("-o", str(tmp_path / "bad.wav"), "--codec-threads", "-1")
    assert bad.returncode == 2 and "argument --codec-threads: must be 0..512, got -1" in bad.stderr
