"""Speaking rate: a pitch-preserving time-stretch of the output (WSOLA), in a stream.

Qwen3-TTS has no rate control, so `speed` stretches the audio it makes. No maintained library
installs with pip on Termux (checked with `pip download`: audiotsm's last release is from 2017,
pytsmod needs scipy, python-stretch has no Android wheel nor sdist, audiostretchy ships a
macOS binary and needs pedalboard, rubband compiles Rubber Band from C++), so this is our own
WSOLA, libkazetts' kz_stretch_* (rules.h, native/src/engine/time_stretch.cpp: what it does and
why the output does not depend on how the input is chunked), which this module streams through;
its numpy statement, for the tests, is kazetts/validation/oracles/time_stretch.py. A request's
speed range is kazetts.request's (check_speed).
"""

from __future__ import annotations

import ctypes
import dataclasses
from typing import Iterator

import numpy as np

from kazetts import native
from kazetts.request import check_speed

_P, _i64_p = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)
_SIGNATURES = {
    "kz_stretch_new": (ctypes.c_int, [ctypes.c_int32, ctypes.c_double, ctypes.POINTER(_P)]),
    "kz_stretch_free": (None, [_P]),
    "kz_stretch_push": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_float), ctypes.c_int64, _i64_p]),
    "kz_stretch_finish": (ctypes.c_int, [_P, _i64_p]),
    "kz_stretch_read": (ctypes.c_int64, [_P, ctypes.POINTER(ctypes.c_float), ctypes.c_int64]),
}


class TimeStretch(native.NativeHandle):
    """push(audio) -> stretched audio so far; flush() -> the rest (float32 mono)."""

    _free_name = "kz_stretch_free"

    def __init__(self, speed: float, sample_rate: int = 24000):
        self.speed = check_speed(speed)
        self._lib = native.bind(_SIGNATURES)
        self._handle = _P()
        native.check(self._lib.kz_stretch_new(int(sample_rate), self.speed, ctypes.byref(self._handle)))

    def push(self, audio: np.ndarray) -> np.ndarray:
        audio = np.ascontiguousarray(audio, np.float32).reshape(-1)
        ready = ctypes.c_int64()
        native.check(self._lib.kz_stretch_push(self._handle, native.ptr(audio), audio.size, ctypes.byref(ready)))
        return self._read(ready.value)

    def flush(self) -> np.ndarray:
        ready = ctypes.c_int64()
        native.check(self._lib.kz_stretch_finish(self._handle, ctypes.byref(ready)))
        return self._read(ready.value)

    def _read(self, n: int) -> np.ndarray:
        out = np.empty(n, np.float32)
        if n:
            self._lib.kz_stretch_read(self._handle, native.ptr(out), n)
        return out


def stretch_chunks(chunks: Iterator, speed: float, sample_rate: int) -> Iterator:
    """A request's audio chunks (anything with an `audio` field) at `speed`: each chunk's audio
    stretched as it comes (chunks left empty by the look-ahead are held back), and the stream's
    rest in a last chunk like the one before it. Speed 1.0 passes the chunks through untouched."""
    if check_speed(speed) == 1.0:
        yield from chunks
        return
    with TimeStretch(speed, sample_rate) as stretch:
        last = None
        for chunk in chunks:
            last = chunk
            audio = stretch.push(chunk.audio)
            if len(audio):
                yield dataclasses.replace(chunk, audio=audio)
        tail = stretch.flush()
        if last is not None and len(tail):
            yield dataclasses.replace(last, audio=tail)
