"""Code predictor (stage 2): talker hidden state + CB0 -> CB1..CB15, native (libkazetts).

``CodePredictor`` wraps the C ABI of ``native/include/kazetts/code_predictor.h``; a slow numpy
statement of the same model and of its sampling, for the tests, is
``kazetts.validation.oracles.code_predictor.NumpyCodePredictor``.

Sampling: pass ``rng`` (a numpy Generator) and the native code draws its 15 uniforms from it
exactly as the numpy oracle's sampler would (one ``rng.random()`` per codebook), so both give the
same codes for the same generator state; or pass a ``native.Rng`` (the engines' stream) and the
native code draws from its state.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np

from kazetts import native
from kazetts.request import TEMPERATURE, TOP_K, TOP_P

WEIGHT_TYPES = {None: 5, "auto": 5, "file": 0, "f32": 1, "f16": 2, "q8_0": 3, "q4_0": 4}
KERNELS = {"auto": 0, "ggml": 1, "avx2": 2, "avx512-vnni": 3, "neon": 4, "neon-dotprod": 5, "neon-i8mm": 6}


class _Params(ctypes.Structure):
    _fields_ = [("n_threads", ctypes.c_int32), ("weight_type", ctypes.c_int32), ("kernels", ctypes.c_int32)]


class _Sampling(ctypes.Structure):
    _fields_ = [
        ("greedy", ctypes.c_int32),
        ("temperature", ctypes.c_float),
        ("top_k", ctypes.c_int32),
        ("top_p", ctypes.c_float),
        ("uniforms", ctypes.POINTER(ctypes.c_double)),
        ("rng_state", ctypes.POINTER(ctypes.c_uint64)),
    ]


_c_float_p = ctypes.POINTER(ctypes.c_float)
_c_int32_p = ctypes.POINTER(ctypes.c_int32)
_P = ctypes.c_void_p
_SIGNATURES = {
    "kz_cp_load": (
        ctypes.c_int,
        [ctypes.c_char_p, ctypes.POINTER(_Params), ctypes.POINTER(_P), ctypes.c_char_p, ctypes.c_size_t],
    ),
    "kz_cp_free": (None, [_P]),
    "kz_cp_n_embd_in": (ctypes.c_int32, [_P]),
    "kz_cp_n_embd": (ctypes.c_int32, [_P]),
    "kz_cp_n_codebooks": (ctypes.c_int32, [_P]),
    "kz_cp_vocab": (ctypes.c_int32, [_P]),
    "kz_cp_cb0_vocab": (ctypes.c_int32, [_P]),
    "kz_cp_set_threads": (ctypes.c_int, [_P, ctypes.c_int32]),
    "kz_cp_predict_frames": (
        ctypes.c_int,
        [_P, ctypes.c_int32, _c_float_p, _c_int32_p, ctypes.POINTER(_Sampling), _c_int32_p, _c_float_p, _c_float_p],
    ),
    "kz_cp_embed_codes": (ctypes.c_int, [_P, _c_int32_p, _c_float_p]),
    "kz_cp_last_error": (ctypes.c_char_p, [_P]),
    "kz_cp_kernel_name": (ctypes.c_char_p, [_P]),
}


class CodePredictor(native.NativeHandle):
    """The native code predictor loaded from an mmproj GGUF.

    ``weights``: None/"auto" keeps the file's types, except that an F32 ffn_down beside
    quantized layers takes their type (llama.cpp's converter writes ffn_down in F32 for F16's
    range); "file" keeps them all; "f32", "f16", "q8_0", "q4_0" convert the decoder and head
    weights at load time (an F16 ffn_down is always kept in F32).
    ``kernels``: "auto" lets Q8_0 matrices use kazetts' own kernel (x86-64: AVX-512 VNNI, else
    AVX2; aarch64: i8mm, else dotprod, else NEON), "ggml" keeps ggml's, the others ask for that
    kernel (cross-checks);
    ``kernel_name`` says which one runs."""

    _free_name, _last_error_name = "kz_cp_free", "kz_cp_last_error"

    def __init__(self, mmproj_path, threads: int = 2, weights: str | None = None, kernels: str = "auto"):
        if weights not in WEIGHT_TYPES:
            raise ValueError(f"unknown weight type {weights!r}: choose one of auto, file, f32, f16, q8_0, q4_0")
        if kernels not in KERNELS:
            raise ValueError(f"unknown kernels {kernels!r}: choose one of {', '.join(KERNELS)}")
        self._lib = native.bind(_SIGNATURES)
        self._handle = ctypes.c_void_p()
        err = native.error_buffer()
        params = _Params(int(threads), WEIGHT_TYPES[weights], KERNELS[kernels])
        status = self._lib.kz_cp_load(
            os.fsencode(str(mmproj_path)), ctypes.byref(params), ctypes.byref(self._handle), err, len(err)
        )
        native.check(status, err.value)
        h = self._handle
        self.n_embd_in = self._lib.kz_cp_n_embd_in(h)
        self.n_embd = self._lib.kz_cp_n_embd(h)
        self.n_codebooks = self._lib.kz_cp_n_codebooks(h)
        self.vocab = self._lib.kz_cp_vocab(h)
        self.cb0_vocab = self._lib.kz_cp_cb0_vocab(h)
        self.threads = int(threads)
        self.kernel_name = self._lib.kz_cp_kernel_name(h).decode()

    def set_threads(self, n: int) -> None:
        self._check(self._lib.kz_cp_set_threads(self._handle, int(n)))
        self.threads = int(n)

    def predict(
        self,
        hidden,
        cb0: int,
        greedy: bool = True,
        temperature: float = TEMPERATURE,
        top_k: int = TOP_K,
        top_p: float = TOP_P,
        rng: "np.random.Generator | native.Rng | None" = None,
        seed: int | None = None,
        return_logits: bool = False,
    ):
        """One frame -> (codes [15] int32, embedding_sum [n_embd_in] float32[, logits [15, vocab]]).

        Sampling (greedy=False) needs ``rng`` (a numpy Generator: 15 uniforms drawn from it; a
        ``native.Rng``: the native code draws from its state) or ``seed`` (a fresh splitmix64
        stream)."""
        sampling = dict(greedy=greedy, temperature=temperature, top_k=top_k, top_p=top_p, rng=rng, seed=seed)
        out = self.predict_frames(np.reshape(hidden, (1, -1)), [cb0], [sampling], return_logits)
        return tuple(a[0] for a in out)

    def predict_frames(self, hidden, cb0, samplings=None, return_logits: bool = False):
        """n frames in one pass over the weights (e.g. one per request of a batch): hidden
        [n, n_embd_in], cb0 [n], samplings None (all greedy) or n dicts of ``predict``'s sampling
        keywords (greedy, temperature, top_k, top_p, rng, seed) -> (codes [n, 15], embedding_sum
        [n, n_embd_in][, logits [n, 15, vocab]]): each frame's, bit for bit, as ``predict`` alone."""
        if not self._handle:
            raise ValueError("the code predictor is closed")
        hidden = np.ascontiguousarray(hidden, dtype=np.float32)
        n = len(hidden)
        if hidden.ndim != 2 or hidden.shape[1] != self.n_embd_in:
            raise ValueError(f"hidden has {hidden.shape[-1]} values a frame; this model needs {self.n_embd_in}")
        cb0 = np.ascontiguousarray(cb0, dtype=np.int32).reshape(-1)
        if cb0.size != n or (samplings is not None and len(samplings) != n):
            raise ValueError("hidden, cb0 and samplings must have one entry per frame")
        keep = []
        table = (_Sampling * n)(*(self.sampling(keep, **(samplings[j] if samplings else {})) for j in range(n)))
        codes = np.zeros((n, self.n_codebooks), np.int32)
        emb = np.zeros((n, self.n_embd_in), np.float32)
        logits = np.zeros((n, self.n_codebooks, self.vocab), np.float32) if return_logits else None
        status = self._lib.kz_cp_predict_frames(
            self._handle,
            n,
            native.ptr(hidden),
            native.ptr(cb0, ctypes.c_int32),
            table,
            native.ptr(codes, ctypes.c_int32),
            native.ptr(emb),
            native.ptr(logits),
        )
        self._check(status)
        return (codes, emb, logits) if return_logits else (codes, emb)

    def sampling(
        self, keep, greedy=True, temperature=TEMPERATURE, top_k=TOP_K, top_p=TOP_P, rng=None, seed=None
    ) -> _Sampling:
        """One frame's sampling as the C struct; ``keep`` holds what its pointers point to."""
        s = _Sampling(int(bool(greedy)), float(temperature), int(top_k), float(top_p), None, None)
        if greedy:
            return s
        if isinstance(rng, native.Rng):
            s.rng_state = rng.pointer
        elif rng is not None:
            u = np.ascontiguousarray(rng.random(self.n_codebooks), dtype=np.float64)
            keep.append(u)
            s.uniforms = native.ptr(u, ctypes.c_double)
        elif seed is not None:
            state = ctypes.c_uint64(int(seed) & (2**64 - 1))
            keep.append(state)
            s.rng_state = ctypes.pointer(state)
        else:
            raise ValueError("sampling needs rng= (numpy Generator) or seed=")
        return s

    def frame_codes(self, codes16) -> np.ndarray:
        """A frame's 16 codes as embed_codes takes them (int32, flat); ValueError for another count."""
        c = np.ascontiguousarray(codes16, dtype=np.int32).reshape(-1)
        if c.size != self.n_codebooks + 1:
            raise ValueError(f"need {self.n_codebooks + 1} codes, got {c.size}")
        return c

    def embed_codes(self, codes16) -> np.ndarray:
        """codec_embedding[CB0] + sum_g table_g[CB_{g+1}] for 16 codes."""
        c = self.frame_codes(codes16)
        out = np.zeros(self.n_embd_in, np.float32)
        self._check(self._lib.kz_cp_embed_codes(self._handle, native.ptr(c, ctypes.c_int32), native.ptr(out)))
        return out
