"""The codec encoder (Qwen3-TTS-Tokenizer-12Hz encoder) of libkazetts: 24 kHz PCM -> RVQ codes.

    enc = CodecEncoder("model-mmproj.gguf", threads=2)
    codes = enc.encode(pcm_24k)      # float32 [n] -> int32 [ceil(n / 1920), 16], CB0 first

These are the reference codes of an ICL voice-clone prompt (what the reference's
`speech_tokenizer.encode` gives in `create_voice_clone_prompt`). The input is taken as is: mono,
already at `sample_rate` (24 kHz), no gain change. Only Base mmproj files made by
`kazetts convert` hold the encoder.
"""

from __future__ import annotations

import ctypes
import pathlib

import numpy as np

from kazetts import native

_c_float_p = ctypes.POINTER(ctypes.c_float)
_c_int32_p = ctypes.POINTER(ctypes.c_int32)
_P = ctypes.c_void_p
_SIGNATURES = {
    "kz_codec_encoder_load": (
        ctypes.c_int,
        [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(_P), ctypes.c_char_p, ctypes.c_size_t],
    ),
    "kz_codec_encoder_free": (None, [_P]),
    "kz_codec_encoder_last_error": (ctypes.c_char_p, [_P]),
    "kz_codec_encoder_n_codebooks": (ctypes.c_int, [_P]),
    "kz_codec_encoder_samples_per_frame": (ctypes.c_int, [_P]),
    "kz_codec_encoder_sample_rate": (ctypes.c_int, [_P]),
    "kz_codec_encoder_hidden": (ctypes.c_int, [_P]),
    "kz_codec_encoder_downsample": (ctypes.c_int, [_P]),
    "kz_codec_encoder_set_threads": (ctypes.c_int, [_P, ctypes.c_int]),
    "kz_codec_encoder_n_frames": (ctypes.c_int64, [_P, ctypes.c_int64]),
    "kz_codec_encoder_encode_debug": (
        ctypes.c_int,
        [_P, _c_float_p, ctypes.c_int64, _c_int32_p, ctypes.c_size_t, _c_float_p, _c_float_p, _c_float_p],
    ),
}


class CodecEncoder(native.NativeHandle):
    """One native codec encoder handle (not thread-safe; two instances are independent)."""

    _free_name, _last_error_name = "kz_codec_encoder_free", "kz_codec_encoder_last_error"

    def __init__(self, mmproj: str | pathlib.Path, threads: int = 2):
        self._lib = native.bind(_SIGNATURES)
        self._handle = ctypes.c_void_p()
        err = native.error_buffer()
        status = self._lib.kz_codec_encoder_load(
            str(mmproj).encode(), int(threads), ctypes.byref(self._handle), err, len(err)
        )
        native.check(status, err.value)
        self.n_codebooks = self._lib.kz_codec_encoder_n_codebooks(self._handle)
        self.samples_per_frame = self._lib.kz_codec_encoder_samples_per_frame(self._handle)
        self.sample_rate = self._lib.kz_codec_encoder_sample_rate(self._handle)
        self.hidden = self._lib.kz_codec_encoder_hidden(self._handle)
        self.downsample = self._lib.kz_codec_encoder_downsample(self._handle)

    def set_threads(self, threads: int) -> None:
        self._check(self._lib.kz_codec_encoder_set_threads(self._handle, int(threads)))

    def n_frames(self, n_samples: int) -> int:
        """Frames that n_samples samples give: ceil(n_samples / samples_per_frame)."""
        return -(-int(n_samples) // self.samples_per_frame)

    def encode(self, pcm, intermediates: bool = False):
        """Codes int32 [frames, 16] of mono PCM at `sample_rate`. With intermediates=True also a dict
        of seanet [hidden, 2F'], transformer [hidden, 2F'] and downsampled [hidden, F] (golden layout)."""
        if self._handle is None:
            raise ValueError("the codec encoder is closed")
        x = np.asarray(pcm)
        if x.ndim != 1 or x.size == 0:
            raise ValueError(f"pcm must be a non-empty 1-D array of samples, got shape {x.shape}")
        x = np.ascontiguousarray(x, dtype=np.float32)
        frames = self.n_frames(x.size)
        codes = np.zeros((frames, self.n_codebooks), np.int32)
        debug = None
        if intermediates:
            steps = -(-x.size // (self.samples_per_frame // self.downsample))
            debug = {
                "seanet": np.zeros((steps, self.hidden), np.float32),
                "transformer": np.zeros((steps, self.hidden), np.float32),
                "downsampled": np.zeros((frames, self.hidden), np.float32),
            }
        ptrs = [native.ptr(debug[k]) if debug else None for k in ("seanet", "transformer", "downsampled")]
        self._check(
            self._lib.kz_codec_encoder_encode_debug(
                self._handle, native.ptr(x), x.size, native.ptr(codes, ctypes.c_int32), codes.size, *ptrs
            )
        )
        if not intermediates:
            return codes
        return codes, {k: v.T.copy() for k, v in debug.items()}
