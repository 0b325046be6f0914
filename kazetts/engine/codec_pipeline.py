"""A request's codec pushes, serial or overlapped with the talker and code predictor.

    pipeline = CodecPipeline(codec, overlap=True, timings=timings)
    pipeline.push(frames)                     # a chunk of frames [16] codes each
    for frames, audio in pipeline.ready(): ...  # the decoded chunks, in push order
    pipeline.close()                          # drops what is not delivered; no thread left

Serial, `push` decodes at once on the caller's thread (today's order: a chunk's audio before the
next frame). Overlapped, one worker thread decodes the chunks in order while the caller makes
the next frames: the native calls (the talker, code predictor and codec through libkazetts'
ctypes) release the GIL, and the shipped ggml is
safe for two computations from two host threads (each makes its own threadpool state and
OpenMP team; the stages own separate backends). Either way the caller takes the audio back in
order and yields it itself, so the chunks, their order and the samples do not change.
"""

from __future__ import annotations

import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterator

import numpy as np

from kazetts.stages.codec import CodecDecoder


class CodecPipeline:
    def __init__(self, codec: CodecDecoder, overlap: bool, timings: dict):
        self.codec = codec
        self.timings = timings
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="kazetts-codec") if overlap else None
        self._jobs: deque[tuple[list[np.ndarray], Future]] = deque()

    def _decode(self, frames: list[np.ndarray]) -> np.ndarray:
        clock = time.perf_counter()
        audio = self.codec.stream(np.stack(frames))
        self.timings["codec"] = self.timings.get("codec", 0.0) + time.perf_counter() - clock
        return audio

    def push(self, frames: list[np.ndarray]) -> None:
        if self._worker is not None:
            self._jobs.append((frames, self._worker.submit(self._decode, frames)))
            return
        done: Future = Future()
        try:
            done.set_result(self._decode(frames))
        except Exception as e:  # raised where the overlapped path raises it: when its chunk is taken
            done.set_exception(e)
        self._jobs.append((frames, done))

    def ready(self, wait: bool = False, first: bool = False) -> Iterator[tuple[list[np.ndarray], np.ndarray]]:
        """The decoded chunks in push order: those done (`wait`: all pushed; `first`: at least
        the oldest). A codec error is raised here, as the serial path raises it."""
        while self._jobs and (wait or first or self._jobs[0][1].done()):
            frames, job = self._jobs.popleft()
            first = False
            yield frames, job.result()

    def close(self) -> None:
        """Drops the chunks not delivered, after the one being decoded ends; stops the worker."""
        self._jobs.clear()
        if self._worker is not None:
            self._worker.shutdown(wait=True, cancel_futures=True)
