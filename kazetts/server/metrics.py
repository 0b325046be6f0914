"""Counters for GET /metrics, in Prometheus' text format (no client library needed)."""

from __future__ import annotations

import threading
from collections import Counter

FIRST_AUDIO_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
REAL_TIME_FACTOR_BUCKETS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0, 8.0)


class Histogram:
    """A Prometheus histogram: counts per upper bound, their sum and count."""

    def __init__(self, name: str, help_text: str, buckets: tuple):
        self.name, self.help, self.buckets = name, help_text, buckets
        self.counts = [0] * (len(buckets) + 1)
        self.sum, self.count = 0.0, 0

    def observe(self, value: float) -> None:
        self.counts[next((i for i, edge in enumerate(self.buckets) if value <= edge), len(self.buckets))] += 1
        self.sum += value
        self.count += 1

    def lines(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        total = 0
        for edge, n in zip((*self.buckets, "+Inf"), self.counts):
            total += n
            lines.append(f'{self.name}_bucket{{le="{edge}"}} {total}')
        return lines + [f"{self.name}_sum {self.sum:.4f}", f"{self.name}_count {self.count}"]


class Metrics:
    def __init__(self):
        self._lock = threading.Lock()
        self.requests: Counter = Counter()  # (endpoint, status)
        self.errors: Counter = Counter()  # error type/code
        self.rejected = 0
        self.cancelled = 0
        self.audio_seconds = 0.0
        self.generation_seconds = 0.0
        self.first_audio = Histogram(
            "kazetts_first_audio_seconds", "From the request to its first audio bytes.", FIRST_AUDIO_BUCKETS
        )
        self.real_time_factor = Histogram(
            "kazetts_request_real_time_factor",
            "Each finished request's generation seconds per audio second.",
            REAL_TIME_FACTOR_BUCKETS,
        )

    def request(self, endpoint: str, status: int) -> None:
        with self._lock:
            self.requests[(endpoint, status)] += 1

    def error(self, code: str) -> None:
        with self._lock:
            self.errors[code] += 1

    def first_audio_after(self, seconds: float) -> None:
        with self._lock:
            self.first_audio.observe(seconds)

    def generated(self, audio_seconds: float, wall_seconds: float) -> None:
        """A request's audio and the time it took."""
        with self._lock:
            self.audio_seconds += audio_seconds
            self.generation_seconds += wall_seconds
            if audio_seconds > 0:
                self.real_time_factor.observe(wall_seconds / audio_seconds)

    def render(self, queue_depth: int, running: int, max_batch: int, loaded: bool) -> str:
        with self._lock:
            lines = [
                "# HELP kazetts_requests_total HTTP requests by endpoint and status.",
                "# TYPE kazetts_requests_total counter",
            ]
            lines += [
                f'kazetts_requests_total{{endpoint="{e}",status="{s}"}} {n}'
                for (e, s), n in sorted(self.requests.items())
            ]
            lines += [
                "# HELP kazetts_errors_total Refused or failed requests by error code.",
                "# TYPE kazetts_errors_total counter",
            ]
            lines += [f'kazetts_errors_total{{code="{c}"}} {n}' for c, n in sorted(self.errors.items())]
            rtf = self.generation_seconds / self.audio_seconds if self.audio_seconds else 0.0
            lines += [
                "# TYPE kazetts_queue_rejections_total counter",
                f"kazetts_queue_rejections_total {self.rejected}",
                "# TYPE kazetts_cancelled_total counter",
                f"kazetts_cancelled_total {self.cancelled}",
                "# HELP kazetts_queue_depth Requests waiting for the model.",
                "# TYPE kazetts_queue_depth gauge",
                f"kazetts_queue_depth {queue_depth}",
                "# TYPE kazetts_busy gauge",
                f"kazetts_busy {int(running > 0)}",
                "# HELP kazetts_batch_size Requests running now (their frames computed together).",
                "# TYPE kazetts_batch_size gauge",
                f"kazetts_batch_size {running}",
                "# HELP kazetts_max_batch Requests that may run at once (kazetts serve --max-batch).",
                "# TYPE kazetts_max_batch gauge",
                f"kazetts_max_batch {max_batch}",
                "# TYPE kazetts_model_loaded gauge",
                f"kazetts_model_loaded {int(loaded)}",
                "# HELP kazetts_audio_seconds_total Seconds of audio generated.",
                "# TYPE kazetts_audio_seconds_total counter",
                f"kazetts_audio_seconds_total {self.audio_seconds:.3f}",
                "# TYPE kazetts_generation_seconds_total counter",
                f"kazetts_generation_seconds_total {self.generation_seconds:.3f}",
                "# HELP kazetts_real_time_factor Generation seconds per audio second, over all requests.",
                "# TYPE kazetts_real_time_factor gauge",
                f"kazetts_real_time_factor {rtf:.4f}",
                *self.first_audio.lines(),
                *self.real_time_factor.lines(),
            ]
        return "\n".join(lines) + "\n"
