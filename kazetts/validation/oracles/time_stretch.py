"""Speaking rate, stated in numpy: the WSOLA time-stretch (Verhelst and Roelands, ICASSP 1993)
whose one definition is libkazetts' (kz_stretch_* in rules.h, native/src/engine/time_stretch.cpp;
kazetts.engine.time_stretch binds it). tests/test_time_stretch.py holds the native stream against
this one; tests only.

  output frame k (Hann window of N = 40 ms, output hop N/2) copies the input segment that
  starts near k * hop * speed, shifted by up to +-15 ms (one pitch period of a low voice) to
  where it best continues the previous segment (normalized cross-correlation with the input
  that followed the previous segment), then overlap-adds; the window sums to one at that hop,
  so a segment is copied, never resampled: pitch and timbre stay, only the duration changes.

It runs on a stream: a frame is placed once the input it may look at has arrived, and output
is released once every frame that overlaps it is placed, so the result does not depend on how
the input is chunked (one hop of delay plus the look-ahead, ~75 ms). `flush()` ends the stream
with exactly round(n / speed) samples in total. At speed 1.0 it is the identity: the samples
are passed through untouched.
"""

from __future__ import annotations

import numpy as np

from kazetts.request import check_speed

FRAME_SECONDS, TOLERANCE_SECONDS = 0.04, 0.015


class TimeStretch:
    """push(audio) -> stretched audio so far; flush() -> the rest (float32 mono)."""

    def __init__(self, speed: float, sample_rate: int = 24000):
        self.speed = check_speed(speed)
        self.frame = 2 * round(FRAME_SECONDS * sample_rate / 2)
        self.hop = self.frame // 2
        self.tolerance = round(TOLERANCE_SECONDS * sample_rate)
        self.window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(self.frame) / self.frame)
        self.input = np.zeros(0, np.float64)  # input from absolute position `input_start`
        self.input_start = self.received = 0
        self.output = np.zeros(self.frame, np.float64)  # overlap-add sums from `output_start`
        self.weight = np.zeros(self.frame, np.float64)
        self.output_start = 0
        self.k, self.previous = 0, 0  # next frame; input position of the last placed segment

    def push(self, audio: np.ndarray) -> np.ndarray:
        audio = np.asarray(audio, np.float32)
        if self.speed == 1.0:
            return audio
        self.input = np.concatenate([self.input, audio.astype(np.float64)])
        self.received += len(audio)
        return self._run(final=False)

    def flush(self) -> np.ndarray:
        if self.speed == 1.0:
            return np.zeros(0, np.float32)
        return self._run(final=True)

    # -- the algorithm ----------------------------------------------------------------------------
    def _nominal(self, k: int) -> int:
        return round(k * self.hop * self.speed)

    def _run(self, final: bool) -> np.ndarray:
        total = round(self.received / self.speed)
        released = []
        while True:
            nominal = self._nominal(self.k)
            needed = max(nominal + self.tolerance, self.previous + self.hop) + self.frame
            if (final and self.k * self.hop >= total) or (not final and needed > self.received):
                break
            position = nominal if self.k == 0 else self._best(nominal)
            self._place(position)
            released.append(self._release(self.k * self.hop))  # frames from k on start at k * hop
            self.k, self.previous = self.k + 1, position
            self._forget(min(self._nominal(self.k) - self.tolerance, position + self.hop))
        if final:
            released.append(self._release(total))
        return np.concatenate(released).astype(np.float32) if released else np.zeros(0, np.float32)

    def _segment(self, start: int, length: int) -> np.ndarray:
        """Input [start, start + length), zeros where nothing was received."""
        out = np.zeros(length, np.float64)
        lo, hi = max(start, self.input_start), min(start + length, self.input_start + len(self.input))
        if hi > lo:
            out[lo - start : hi - start] = self.input[lo - self.input_start : hi - self.input_start]
        return out

    def _best(self, nominal: int) -> int:
        """The segment start within the tolerance that best continues the previous segment."""
        target = self._segment(self.previous + self.hop, self.frame)
        lo = max(0, nominal - self.tolerance)
        region = self._segment(lo, nominal + self.tolerance - lo + self.frame)
        if float(target @ target) < 1e-12:
            return nominal  # silence: nothing to align
        corr = np.correlate(region, target, mode="valid")
        energy = np.convolve(region * region, np.ones(self.frame), mode="valid")
        return lo + int(np.argmax(corr / np.sqrt(energy + 1e-9)))

    def _place(self, position: int) -> None:
        window = self.window if self.k else np.where(np.arange(self.frame) < self.hop, 1.0, self.window)
        start = self.k * self.hop - self.output_start
        grow = start + self.frame - len(self.output)
        if grow > 0:
            self.output = np.concatenate([self.output, np.zeros(grow)])
            self.weight = np.concatenate([self.weight, np.zeros(grow)])
        self.output[start : start + self.frame] += window * self._segment(position, self.frame)
        self.weight[start : start + self.frame] += window

    def _release(self, until: int) -> np.ndarray:
        """Output [output_start, until), which no later frame touches."""
        n = max(0, until - self.output_start)
        out = self.output[:n] / np.maximum(self.weight[:n], 1e-6)
        self.output, self.weight = self.output[n:], self.weight[n:]
        self.output_start += n
        return out

    def _forget(self, before: int) -> None:
        drop = min(max(0, before - self.input_start), len(self.input))
        self.input = self.input[drop:]
        self.input_start += drop
