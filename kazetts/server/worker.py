"""One model, up to max_batch requests at a time: the worker loads the TTS (made with that
max_batch), then max_batch threads run the jobs in arrival order from a bounded FIFO queue, one
job each (the TTS batches their frames). A job's events reach its own asyncio queue only, so a
request never sees another's audio; a cancelled job leaves the queue at once, or stops between
two audio chunks if it is running."""

from __future__ import annotations

import asyncio
import collections
import math
import threading
import time
from typing import Any, Callable, Iterator

from kazetts.server.errors import ApiError

AUDIO, DONE, ERROR = "audio", "done", "error"


class QueueFull(Exception):
    def __init__(self, retry_after: int):
        super().__init__(f"the queue is full; retry after {retry_after} s")
        self.retry_after = retry_after


class Job:
    """A request's work: `produce(tts)` runs in the worker and yields (AUDIO, bytes) and at last
    (DONE, stats); the event loop reads them from `events`."""

    def __init__(self, produce: Callable[[Any], Iterator[tuple[str, Any]]]):
        self.produce = produce
        self.loop = asyncio.get_running_loop()
        self.events: asyncio.Queue = asyncio.Queue()
        self.cancelled = threading.Event()
        self.submitted = time.perf_counter()

    def emit(self, kind: str, value: Any) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.events.put_nowait, (kind, value))


class Worker:
    def __init__(self, load: Callable[[], Any], max_queue: int, max_batch: int = 1):
        self.max_queue, self.max_batch = max_queue, max_batch
        self.tts = None
        self.load_error: Exception | None = None
        self.ready = threading.Event()
        self.running = 0  # jobs running now
        self._pending: collections.deque[Job] = collections.deque()
        self._changed = threading.Condition()
        self._stopping = False
        self._mean_seconds = 2.0  # running mean of a job's time, for Retry-After
        self._thread = threading.Thread(target=self._run, args=(load,), name="kazetts-worker", daemon=True)
        self._thread.start()

    @property
    def depth(self) -> int:
        """Requests waiting (not those running)."""
        return len(self._pending)

    @property
    def busy(self) -> bool:
        return self.running > 0

    def submit(self, job: Job) -> None:
        with self._changed:
            if len(self._pending) >= self.max_queue:
                turns = math.ceil((len(self._pending) + 1) / self.max_batch)  # the queue ahead, max_batch at a time
                raise QueueFull(max(1, math.ceil(self._mean_seconds * turns)))
            self._pending.append(job)
            self._changed.notify()

    def cancel(self, job: Job) -> None:
        job.cancelled.set()
        with self._changed:
            if job in self._pending:
                self._pending.remove(job)

    def stop(self, timeout: float = 10.0) -> None:
        with self._changed:
            self._stopping = True
            for job in self._pending:
                job.cancelled.set()
            self._pending.clear()
            self._changed.notify()
        self._thread.join(timeout)

    def _run(self, load: Callable[[], Any]) -> None:
        try:
            self.tts = load()
        except Exception as error:  # noqa: BLE001 - reported by /health and every request
            self.load_error = error
        self.ready.set()
        if self.tts is None:
            return
        others = [
            threading.Thread(target=self._serve, name=f"kazetts-worker-{i}", daemon=True)
            for i in range(1, self.max_batch)
        ]
        for thread in others:
            thread.start()
        self._serve()
        for thread in others:
            thread.join()
        close = getattr(self.tts, "close", None)
        if close is not None:
            close()

    def _serve(self) -> None:
        """One of the max_batch threads: a job at a time until stop()."""
        while True:
            with self._changed:
                while not self._pending and not self._stopping:
                    self._changed.wait()
                if self._stopping:
                    return
                job = self._pending.popleft()
                self.running += 1
            self._execute(job)

    def _execute(self, job: Job) -> None:
        start = time.perf_counter()
        events = job.produce(self.tts)
        try:
            for kind, value in events:
                if job.cancelled.is_set():
                    break
                job.emit(kind, value)
        except (ApiError, ValueError) as error:
            job.emit(ERROR, error)
        except Exception as error:  # noqa: BLE001 - a native failure answers this request only
            job.emit(
                ERROR, ApiError(500, f"synthesis failed: {type(error).__name__}: {error}", code="synthesis_failed")
            )
        finally:
            events.close()
            with self._changed:
                self.running -= 1
                self._mean_seconds = 0.8 * self._mean_seconds + 0.2 * (time.perf_counter() - start)
