"""The codec decoder (Qwen3-TTS-Tokenizer-12Hz decoder) of libkazetts: codes -> 24 kHz PCM.

dec = CodecDecoder("model-mmproj.gguf", threads=2, weights="f32")
wav = dec.decode(codes)          # codes [T, 16] int -> [T * 1920] float32
for chunk in chunks: play(dec.stream(chunk))   # exact streaming, any chunk sizes
dec.reset()                      # new utterance
s = dec.new_stream()             # a stream of its own (state) on the same weights: s.stream(chunk), s.reset()
"""

from __future__ import annotations

import ctypes
import pathlib

import numpy as np

from kazetts import native

# kz_codec_weights: "f16-sums" is "f16" with float16 sums on ARM cores with FP16 arithmetic (kazetts/codec.h)
WEIGHTS = {"f32": 0, "f16": 1, "f16-sums": 2}
_c_float_p = ctypes.POINTER(ctypes.c_float)
_c_int32_p = ctypes.POINTER(ctypes.c_int32)
_P = ctypes.c_void_p
_SIGNATURES = {
    "kz_codec_load": (
        ctypes.c_int,
        [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(_P), ctypes.c_char_p, ctypes.c_size_t],
    ),
    "kz_codec_free": (None, [_P]),
    "kz_codec_last_error": (ctypes.c_char_p, [_P]),
    "kz_codec_n_codebooks": (ctypes.c_int, [_P]),
    "kz_codec_codebook_size": (ctypes.c_int, [_P, ctypes.c_int]),
    "kz_codec_samples_per_frame": (ctypes.c_int, [_P]),
    "kz_codec_sample_rate": (ctypes.c_int, [_P]),
    "kz_codec_dim": (ctypes.c_int, [_P, ctypes.c_int]),
    "kz_codec_set_threads": (ctypes.c_int, [_P, ctypes.c_int]),
    "kz_codec_set_max_chunk": (ctypes.c_int, [_P, ctypes.c_int]),
    "kz_codec_decode": (ctypes.c_int, [_P, _c_int32_p, ctypes.c_int, ctypes.c_int, _c_float_p, ctypes.c_size_t]),
    "kz_codec_decode_debug": (
        ctypes.c_int,
        [
            _P,
            _c_int32_p,
            ctypes.c_int,
            ctypes.c_int,
            _c_float_p,
            ctypes.c_size_t,
            _c_float_p,
            _c_float_p,
            _c_float_p,
            _c_float_p,
        ],
    ),
    "kz_codec_stream_push": (
        ctypes.c_int,
        [_P, _c_int32_p, ctypes.c_int, ctypes.c_int, _c_float_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
    ),
    "kz_codec_stream_position": (ctypes.c_int64, [_P]),
    "kz_codec_reset": (ctypes.c_int, [_P]),
    "kz_codec_stream_new": (ctypes.c_int, [_P, ctypes.POINTER(_P)]),
    "kz_codec_stream_free": (None, [_P]),
    "kz_codec_stream_decode": (
        ctypes.c_int,
        [_P, _c_int32_p, ctypes.c_int, ctypes.c_int, _c_float_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
    ),
    "kz_codec_stream_restart": (ctypes.c_int, [_P]),
    "kz_codec_stream_last_error": (ctypes.c_char_p, [_P]),
}


class CodecDecoder(native.NativeHandle):
    """One native codec handle (not thread-safe; two instances are independent)."""

    _free_name, _last_error_name = "kz_codec_free", "kz_codec_last_error"

    def __init__(self, mmproj: str | pathlib.Path, threads: int = 2, weights: str = "f32"):
        if weights not in WEIGHTS:
            raise ValueError(f"weights must be one of {list(WEIGHTS)}, got {weights!r}")
        self._lib = native.bind(_SIGNATURES)
        self._handle = ctypes.c_void_p()
        err = native.error_buffer()
        status = self._lib.kz_codec_load(
            str(mmproj).encode(), int(threads), WEIGHTS[weights], ctypes.byref(self._handle), err, len(err)
        )
        native.check(status, err.value)
        self.weights = weights
        self.n_codebooks = self._lib.kz_codec_n_codebooks(self._handle)
        self.samples_per_frame = self._lib.kz_codec_samples_per_frame(self._handle)
        self.sample_rate = self._lib.kz_codec_sample_rate(self._handle)
        self.codebook_sizes = [self._lib.kz_codec_codebook_size(self._handle, q) for q in range(self.n_codebooks)]
        self.codebook_dim = self._lib.kz_codec_dim(self._handle, 0)
        self.latent_dim = self._lib.kz_codec_dim(self._handle, 1)
        self.upsample_factor = self._lib.kz_codec_dim(self._handle, 2)

    def _codes(self, codes) -> tuple[np.ndarray, int, int]:
        if self._handle is None:
            raise ValueError("the decoder is closed")
        c = np.asarray(codes)
        if c.ndim != 2:
            raise ValueError(f"codes must be [frames, codebooks], got shape {c.shape}")
        c = np.ascontiguousarray(c, dtype=np.int32)
        return c, c.shape[0], c.shape[1]

    def set_threads(self, threads: int) -> None:
        self._check(self._lib.kz_codec_set_threads(self._handle, int(threads)))

    def set_max_chunk(self, frames: int) -> None:
        """Frames per internal graph (memory bound); results do not depend on it."""
        self._check(self._lib.kz_codec_set_max_chunk(self._handle, int(frames)))

    def decode(self, codes, intermediates: bool = False):
        """Full decode of codes [T, 16] -> float32 [T * 1920]. With intermediates=True also a dict
        of quantized [C, T], pre_conv [D, T], transformer [D, T], upsample [D, 4T] (golden layout)."""
        c, n, k = self._codes(codes)
        out = np.zeros(n * self.samples_per_frame, np.float32)
        cp = native.ptr(c, ctypes.c_int32)
        if not intermediates:
            self._check(self._lib.kz_codec_decode(self._handle, cp, n, k, native.ptr(out), out.size))
            return out
        q = np.zeros((n, self.codebook_dim), np.float32)
        pre = np.zeros((n, self.latent_dim), np.float32)
        tfm = np.zeros((n, self.latent_dim), np.float32)
        up = np.zeros((n * self.upsample_factor, self.latent_dim), np.float32)
        self._check(
            self._lib.kz_codec_decode_debug(
                self._handle,
                cp,
                n,
                k,
                native.ptr(out),
                out.size,
                native.ptr(q),
                native.ptr(pre),
                native.ptr(tfm),
                native.ptr(up),
            )
        )
        return out, {
            "quantized": q.T.copy(),
            "pre_conv": pre.T.copy(),
            "transformer": tfm.T.copy(),
            "upsample": up.T.copy(),
        }

    def stream(self, codes_chunk) -> np.ndarray:
        """Pushes the next frames [n, 16] of the stream; returns their n * 1920 samples."""
        status, audio = self._push(self._lib.kz_codec_stream_push, self._handle, codes_chunk)
        self._check(status)
        return audio

    def _push(self, push, handle, codes_chunk) -> np.ndarray:
        """`push` (a kz_codec stream function) of frames [n, 16] on `handle`: their samples."""
        c, n, k = self._codes(codes_chunk)
        out = np.zeros(n * self.samples_per_frame, np.float32)
        written = ctypes.c_size_t(0)
        status = push(handle, native.ptr(c, ctypes.c_int32), n, k, native.ptr(out), out.size, ctypes.byref(written))
        return status, out[: written.value]

    def new_stream(self) -> "CodecStream":
        """A stream of its own on this decoder's weights (one per request said at once)."""
        return CodecStream(self)

    @property
    def position(self) -> int:
        """Frames streamed since the last reset."""
        return int(self._lib.kz_codec_stream_position(self._handle))

    def reset(self) -> None:
        self._check(self._lib.kz_codec_reset(self._handle))


class CodecStream(native.NativeHandle):
    """A stream with its own state on a CodecDecoder's weights (kz_codec_stream): decodes what the
    decoder's own stream would from the same codes, bit for bit. Streams of one decoder may push
    from several threads (they compute one at a time); one stream from one thread at a time."""

    _free_name, _last_error_name = "kz_codec_stream_free", "kz_codec_stream_last_error"

    def __init__(self, decoder: CodecDecoder):
        self.decoder = decoder  # (kept alive while the stream lives)
        self._lib = decoder._lib
        self._handle = ctypes.c_void_p()
        decoder._check(self._lib.kz_codec_stream_new(decoder._handle, ctypes.byref(self._handle)))

    def stream(self, codes_chunk) -> np.ndarray:
        """Pushes the next frames [n, 16] of this stream; returns their n * 1920 samples."""
        if not self._handle:
            raise ValueError("the stream is closed")
        status, audio = self.decoder._push(self._lib.kz_codec_stream_decode, self._handle, codes_chunk)
        self._check(status)
        return audio

    def reset(self) -> None:
        self._check(self._lib.kz_codec_stream_restart(self._handle))
