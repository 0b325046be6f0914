"""The speaker encoder (ECAPA-TDNN) of libkazetts: 24 kHz audio -> x-vector (Base models).

    enc = SpeakerEncoder("model-mmproj.gguf", threads=2)
    xvec = enc.embed(audio_24k)      # float32 [talker hidden]: the speaker row of a Base prompt
    enc.min_samples                  # the shortest audio it takes

`embed` is the reference's `extract_speaker_embedding`: the numpy log-mel front-end
(kazetts.stages.mel), then the native encoder. `fingerprint` names the speaker encoder an
x-vector was made with, so a saved voice can be matched to its model.
"""

from __future__ import annotations

import ctypes
import pathlib

import numpy as np

from kazetts import native
from kazetts.stages import mel

_c_float_p = ctypes.POINTER(ctypes.c_float)
_P = ctypes.c_void_p
_SIGNATURES = {
    "kz_speaker_encoder_load": (
        ctypes.c_int,
        [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(_P), ctypes.c_char_p, ctypes.c_size_t],
    ),
    "kz_speaker_encoder_free": (None, [_P]),
    "kz_speaker_encoder_last_error": (ctypes.c_char_p, [_P]),
    "kz_speaker_encoder_n_mels": (ctypes.c_int, [_P]),
    "kz_speaker_encoder_dim": (ctypes.c_int, [_P]),
    "kz_speaker_encoder_min_frames": (ctypes.c_int, [_P]),
    "kz_speaker_encoder_set_threads": (ctypes.c_int, [_P, ctypes.c_int]),
    "kz_speaker_encoder_fingerprint": (
        ctypes.c_int,
        [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t],
    ),
    "kz_speaker_encoder_encode": (
        ctypes.c_int,
        [_P, _c_float_p, ctypes.c_int, ctypes.c_int, _c_float_p, ctypes.c_size_t],
    ),
}


def fingerprint(mmproj: str | pathlib.Path) -> str:
    """sha256 (hex) of the speaker encoder's weights rounded to float16, with their names and
    shapes: the same for F32 and F16 files of one checkpoint, different for any other model
    (kz_speaker_encoder_fingerprint, which the native engine checks voices with too)."""
    lib = native.bind(_SIGNATURES)
    out, err = ctypes.create_string_buffer(65), native.error_buffer()
    status = lib.kz_speaker_encoder_fingerprint(str(mmproj).encode(), out, len(out), err, len(err))
    if status == 3:  # KZ_ERR_FORMAT: not a Base model's mmproj (or a damaged one)
        raise ValueError(err.value.decode("utf-8", "replace"))
    native.check(status, err.value)
    return out.value.decode()


class SpeakerEncoder(native.NativeHandle):
    """One native speaker encoder handle (not thread-safe; two instances are independent)."""

    _free_name, _last_error_name = "kz_speaker_encoder_free", "kz_speaker_encoder_last_error"

    def __init__(self, mmproj: str | pathlib.Path, threads: int = 2):
        self._lib = native.bind(_SIGNATURES)
        self._handle = ctypes.c_void_p()
        err = native.error_buffer()
        status = self._lib.kz_speaker_encoder_load(
            str(mmproj).encode(), int(threads), ctypes.byref(self._handle), err, len(err)
        )
        native.check(status, err.value)
        self.n_mels = self._lib.kz_speaker_encoder_n_mels(self._handle)
        self.dim = self._lib.kz_speaker_encoder_dim(self._handle)
        self.min_frames = self._lib.kz_speaker_encoder_min_frames(self._handle)
        if self.n_mels != mel.N_MELS:
            raise ValueError(
                f"{mmproj}: the speaker encoder takes {self.n_mels} mel bands; kazetts computes {mel.N_MELS}"
            )

    @property
    def min_samples(self) -> int:
        """The shortest 24 kHz audio the encoder takes (its reflect paddings need that many frames)."""
        return mel.min_samples(self.min_frames)

    def set_threads(self, threads: int) -> None:
        self._check(self._lib.kz_speaker_encoder_set_threads(self._handle, int(threads)))

    def encode(self, log_mel: np.ndarray) -> np.ndarray:
        """x-vector float32 [dim] of a log-mel spectrogram [frames, n_mels]."""
        if self._handle is None:
            raise ValueError("the speaker encoder is closed")
        m = np.ascontiguousarray(log_mel, dtype=np.float32)
        if m.ndim != 2:
            raise ValueError(f"log_mel must be [frames, mel bands], got shape {m.shape}")
        out = np.zeros(self.dim, np.float32)
        self._check(
            self._lib.kz_speaker_encoder_encode(
                self._handle, native.ptr(m), m.shape[0], m.shape[1], native.ptr(out), out.size
            )
        )
        return out

    def embed(self, audio: np.ndarray) -> np.ndarray:
        """x-vector of mono 24 kHz audio (the reference's extract_speaker_embedding)."""
        return self.encode(mel.log_mel(audio))
