"""kazetts.TTS(max_batch=N): requests said at once from several threads give each the codes and
samples it gets alone; a request beyond the seats waits (queue) or is refused (BusyError)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import kazetts
from kazetts.engine.tts import TTS

# (kind, text, options, chunks to read before stopping: None = all)
REQUESTS = [
    ("synthesize", "Hello world, this is the first voice.", dict(speaker="vivian", greedy=True, max_frames=14), None),
    (
        "stream",
        "Bonjour ! Une autre voix, une autre phrase.",
        dict(speaker="ryan", language="french", seed=7, max_frames=11, chunk_frames=2),
        None,
    ),
    ("stream", "A third one, stopped by its listener.", dict(speaker="serena", seed=3, max_frames=20), 3),
    (
        "stream_text",
        ["Text that ", "arrives in ", "pieces, ", "word by word."],
        dict(speaker="vivian", seed=11, max_frames=12, chunk_frames=3),
        None,
    ),
]


def _say(tts: TTS, kind: str, text, options: dict, stop_after: int | None, after_chunk=None):
    """(codes, audio, chunk lengths, batch_max) of a request, its stream closed after `stop_after` chunks."""
    if kind == "synthesize":
        result = tts.synthesize(text, **options)
        return result.codes, result.audio, [len(result.audio)], result.timings["batch_max"]
    stream = tts.stream_text(iter(text), **options) if kind == "stream_text" else tts.stream(text, **options)
    chunks = []
    for chunk in stream:
        chunks.append(chunk)
        if after_chunk:
            after_chunk(len(chunks))
        if stop_after is not None and len(chunks) >= stop_after:
            break
    stream.close()
    codes = np.concatenate([c.codes for c in chunks])
    return codes, np.concatenate([c.audio for c in chunks]), [len(c.audio) for c in chunks], stream.timings["batch_max"]


@pytest.fixture(scope="module")
def q8_model(tiny_gguf):
    return tiny_gguf("tiny", "custom_voice", "q8_0", 0)


def test_requests_together_equal_requests_alone(q8_model):
    """Four requests (greedy and seeded, stream, synthesize and text streamed in, one closed after
    3 chunks, the last joining once the first has 4 frames) on one TTS of max_batch 4 give each
    the codes, samples and chunks a TTS of max_batch 1 gives it. Which steps ran together depends
    on the threads' timing: printed, not asserted. (Q8_0: the talker's single rows share decodes.)"""
    with TTS(*q8_model, threads=2, codec_weights="f32") as lone:
        alone = [_say(lone, *r) for r in REQUESTS]
    assert all(a[3] == 1 for a in alone)
    with TTS(*q8_model, threads=2, codec_weights="f32", max_batch=len(REQUESTS)) as tts:
        assert tts.max_batch == len(REQUESTS)
        assert [_say(tts, *r)[0].tolist() for r in REQUESTS] == [a[0].tolist() for a in alone]  # one at a time
        late_may_start, results = threading.Event(), [None] * len(REQUESTS)

        def run(i, after_chunk=None):
            try:
                results[i] = _say(tts, *REQUESTS[i], after_chunk=after_chunk)
            finally:
                late_may_start.set()

        first = threading.Thread(target=run, args=(0, None))
        threads = [threading.Thread(target=run, args=(i,)) for i in range(1, len(REQUESTS) - 1)]
        last = threading.Thread(target=lambda: late_may_start.wait() and run(len(REQUESTS) - 1))
        threads = [first, *threads, last]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    print(f"most requests stepping together, per request: {[r[3] if r else None for r in results]}")
    for i, (got, want) in enumerate(zip(results, alone)):
        assert got is not None, i
        assert np.array_equal(got[0], want[0]), i
        assert np.array_equal(got[1], want[1]), i
        assert got[2] == want[2], i


def test_a_request_beyond_the_seats_waits_in_the_queue_or_is_refused(q8_model):
    """max_batch 1, queue 1: a second request waits for the seat and then gets what it gets
    alone; a third is refused while one waits; close() refuses the one waiting."""
    with TTS(*q8_model, threads=2, codec_weights="f32", queue=1) as tts:
        alone = tts.synthesize("Hello.", speaker="vivian", greedy=True, max_frames=3).codes
        holder = tts.stream("Hello there.", speaker="vivian", greedy=True, max_frames=6)
        next(holder)  # holds the seat
        waited, started = [], threading.Event()

        def second():
            started.set()
            waited.append(tts.synthesize("Hello.", speaker="vivian", greedy=True, max_frames=3).codes)

        waiter = threading.Thread(target=second)
        waiter.start()
        started.wait()
        _until(lambda: tts._seats.waiting == 1)  # the waiter is queued
        with pytest.raises(kazetts.BusyError, match="queue") as refused:
            next(tts.stream("Hi.", speaker="vivian", greedy=True, max_frames=2))
        assert "1 wait" in str(refused.value)
        holder.close()  # frees the seat: the waiter runs
        waiter.join()
        assert np.array_equal(waited[0], alone)


def _until(condition) -> None:
    """Polls `condition`, a state another thread reaches (the bound only keeps a bug from hanging the run)."""
    for _ in range(12000):
        if condition():
            return
        threading.Event().wait(0.005)
    raise AssertionError("the other thread never got there")


def test_close_refuses_the_requests_waiting_for_a_seat(q8_model):
    tts = TTS(*q8_model, threads=2, codec_weights="f32", queue=2)
    holder = tts.stream("Hello there.", speaker="vivian", greedy=True, max_frames=6)
    next(holder)
    errors, queued = [], threading.Event()

    def waiter():
        stream = tts.stream("Hello.", speaker="vivian", greedy=True, max_frames=3)
        queued.set()
        try:
            next(stream)
        except kazetts.KazettsError as e:
            errors.append(e)

    t = threading.Thread(target=waiter)
    t.start()
    queued.wait()
    _until(lambda: tts._seats.waiting == 1)  # the waiter is in the queue
    tts.close()
    t.join()
    holder.close()
    assert len(errors) == 1 and "closed while the request waited" in str(errors[0])


def test_bad_max_batch_and_queue(q8_model):
    with pytest.raises(ValueError, match="max_batch"):
        TTS(*q8_model, max_batch=0)
    with pytest.raises(ValueError, match="max_batch"):
        TTS(*q8_model, max_batch=17)
    with pytest.raises(ValueError, match="queue"):
        TTS(*q8_model, queue=-1)


def test_cloned_voices_together_equal_alone(tiny_gguf):
    """Base model: ICL from a reference recording (enrolled inside the request), x-vector only,
    and an enrolled voice (its reference codes embedded between the batches) said at once give
    what each gives alone."""
    talker, mmproj = tiny_gguf("tiny", "base", "f32")
    t = np.arange(2 * 24000) / 24000
    recording = (0.3 * np.sin(2 * np.pi * (180 + 60 * t) * t)).astype(np.float32), 24000
    with TTS(talker, mmproj, threads=2, codec_weights="f32") as lone:
        voice = lone.enroll(recording, ref_text="A short reference.")
    requests = [
        dict(ref_audio=recording, ref_text="A short reference.", greedy=True, max_frames=8),
        dict(ref_audio=recording, xvector_only=True, seed=5, max_frames=9),
        dict(voice=voice, seed=9, max_frames=7, chunk_frames=2),
    ]

    def say(tts, options):
        result = tts.synthesize("Hello from a cloned voice.", **options)
        return result.codes, result.audio

    with TTS(talker, mmproj, threads=2, codec_weights="f32") as lone:
        alone = [say(lone, r) for r in requests]
    results = [None] * len(requests)
    with TTS(talker, mmproj, threads=2, codec_weights="f32", max_batch=len(requests)) as tts:
        threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, say(tts, requests[i]))) for i in range(3)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    for i, (got, want) in enumerate(zip(results, alone)):
        assert got is not None, i
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), i
