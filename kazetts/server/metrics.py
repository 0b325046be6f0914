"""Counters for GET /metrics, in Prometheus' text format (no client library needed)."""

from __future__ import annotations

import threading
from collections import Counter

FIRST_AUDIO_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)


class Metrics:
    def __init__(self):
        self._lock = threading.Lock()
        self.requests: Counter = Counter()  # (endpoint, status)
        self.errors: Counter = Counter()  # error type/code
        self.rejected = 0
        self.cancelled = 0
        self.audio_seconds = 0.0
        self.generation_seconds = 0.0
        self.first_audio = [0] * (len(FIRST_AUDIO_BUCKETS) + 1)
        self.first_audio_sum = 0.0
        self.first_audio_count = 0

    def request(self, endpoint: str, status: int) -> None:
        with self._lock:
            self.requests[(endpoint, status)] += 1

    def error(self, code: str) -> None:
        with self._lock:
            self.errors[code] += 1

    def first_audio_after(self, seconds: float) -> None:
        with self._lock:
            index = next((i for i, edge in enumerate(FIRST_AUDIO_BUCKETS) if seconds <= edge), len(FIRST_AUDIO_BUCKETS))
            self.first_audio[index] += 1
            self.first_audio_sum += seconds
            self.first_audio_count += 1

    def generated(self, audio_seconds: float, wall_seconds: float) -> None:
        with self._lock:
            self.audio_seconds += audio_seconds
            self.generation_seconds += wall_seconds

    def render(self, queue_depth: int, busy: bool, loaded: bool) -> str:
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
                f"kazetts_busy {int(busy)}",
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
                "# HELP kazetts_first_audio_seconds From the request to its first audio bytes.",
                "# TYPE kazetts_first_audio_seconds histogram",
            ]
            total = 0
            for edge, n in zip((*FIRST_AUDIO_BUCKETS, "+Inf"), self.first_audio):
                total += n
                lines.append(f'kazetts_first_audio_seconds_bucket{{le="{edge}"}} {total}')
            lines += [
                f"kazetts_first_audio_seconds_sum {self.first_audio_sum:.4f}",
                f"kazetts_first_audio_seconds_count {self.first_audio_count}",
            ]
        return "\n".join(lines) + "\n"
