"""The speaker encoder's log-mel front-end: libkazetts' (kz_speaker_encoder_log_mel,
native/src/stages/mel.cpp), which the native engine's enrollment runs too, so both engines encode
the same mel. Its definition and numpy oracle: kazetts/validation/oracles/mel.py.

Frames: (n + 768 - 1024) // 256 + 1, about 93.75 a second.
"""

from __future__ import annotations

import ctypes

import numpy as np

from kazetts import native

SAMPLE_RATE = 24000
N_FFT = 1024
HOP = 256
N_MELS = 128
PAD = (N_FFT - HOP) // 2

_SIGNATURES = {
    "kz_speaker_encoder_mel_frames": (ctypes.c_int64, [ctypes.c_int64]),
    "kz_speaker_encoder_log_mel": (
        ctypes.c_int,
        [
            ctypes.POINTER(ctypes.c_float),
            ctypes.c_int64,
            ctypes.POINTER(ctypes.c_float),
            ctypes.c_char_p,
            ctypes.c_size_t,
        ],
    ),
}


def n_frames(n_samples: int) -> int:
    """Mel frames of n_samples of 24 kHz audio (0 when too short to frame)."""
    return max((n_samples + 2 * PAD - N_FFT) // HOP + 1, 0)


def min_samples(frames: int) -> int:
    """The fewest samples that give `frames` mel frames."""
    return N_FFT - 2 * PAD + HOP * (frames - 1)


def log_mel(audio: np.ndarray) -> np.ndarray:
    """float32 [frames, 128] log-mel of mono 24 kHz audio (time-major, bands fastest)."""
    lib = native.bind(_SIGNATURES)
    y = np.ascontiguousarray(np.asarray(audio).reshape(-1), np.float32)
    out = np.empty((max(lib.kz_speaker_encoder_mel_frames(y.size), 0), N_MELS), np.float32)
    err = ctypes.create_string_buffer(512)
    if lib.kz_speaker_encoder_log_mel(native.ptr(y), y.size, native.ptr(out), err, len(err)):
        raise ValueError(err.value.decode())
    return out
