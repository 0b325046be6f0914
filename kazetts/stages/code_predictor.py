"""Code predictor (stage 2): talker hidden state + CB0 -> CB1..CB15, native (libkazetts).

``CodePredictor`` wraps the C ABI of ``native/include/kazetts/code_predictor.h``; ``NumpyCodePredictor``
is a slow pure-numpy implementation of the same model read from the same GGUF, used by the tests
to cross-check the native one (never by the runtime).

Sampling follows ``kazetts.stages.sampling.CodePredictorSampler``: pass ``rng`` (a numpy Generator) and
the native code draws its 15 uniforms from it exactly as the numpy sampler would (one
``rng.random()`` per codebook), so both give the same codes for the same generator state; or
pass a ``native.Rng`` (the engines' stream) and the native code draws from its state.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np

from kazetts import native
from kazetts.request import TEMPERATURE, TOP_K, TOP_P
from kazetts.stages.sampling import CodePredictorSampler, SamplerConfig

WEIGHT_TYPES = {None: 5, "auto": 5, "file": 0, "f32": 1, "f16": 2, "q8_0": 3, "q4_0": 4}
KERNELS = {"auto": 0, "ggml": 1, "avx2": 2, "avx512-vnni": 3}


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
    "kz_cp_predict_frame": (
        ctypes.c_int,
        [_P, _c_float_p, ctypes.c_int32, ctypes.POINTER(_Sampling), _c_int32_p, _c_float_p, _c_float_p],
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
    ``kernels``: "auto" lets Q8_0 matrices use kazetts' own kernel on x86-64 (AVX-512 VNNI,
    else AVX2), "ggml" keeps ggml's, "avx2" / "avx512-vnni" ask for that kernel (cross-checks);
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
        if not self._handle:
            raise ValueError("the code predictor is closed")
        hidden = np.ascontiguousarray(hidden, dtype=np.float32).reshape(-1)
        if hidden.size != self.n_embd_in:
            raise ValueError(f"hidden has {hidden.size} values; this model needs {self.n_embd_in}")
        codes = np.zeros(self.n_codebooks, np.int32)
        emb = np.zeros(self.n_embd_in, np.float32)
        logits = np.zeros((self.n_codebooks, self.vocab), np.float32) if return_logits else None
        s = _Sampling(int(bool(greedy)), float(temperature), int(top_k), float(top_p), None, None)
        keep = []
        if not greedy:
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
        status = self._lib.kz_cp_predict_frame(
            self._handle,
            native.ptr(hidden),
            int(cb0),
            ctypes.byref(s),
            native.ptr(codes, ctypes.c_int32),
            native.ptr(emb),
            native.ptr(logits),
        )
        self._check(status)
        return (codes, emb, logits) if return_logits else (codes, emb)

    def embed_codes(self, codes16) -> np.ndarray:
        """codec_embedding[CB0] + sum_g table_g[CB_{g+1}] for 16 codes."""
        c = np.ascontiguousarray(codes16, dtype=np.int32).reshape(-1)
        if c.size != self.n_codebooks + 1:
            raise ValueError(f"need {self.n_codebooks + 1} codes, got {c.size}")
        out = np.zeros(self.n_embd_in, np.float32)
        self._check(self._lib.kz_cp_embed_codes(self._handle, native.ptr(c, ctypes.c_int32), native.ptr(out)))
        return out


# ------------------------------------------------------------------------------------------
# numpy fallback (tests only)
# ------------------------------------------------------------------------------------------


def _read_gguf(path):
    import gguf
    from gguf.quants import dequantize

    reader = gguf.GGUFReader(str(path))
    tensors = {}
    for t in reader.tensors:
        if t.name.startswith("a.gen.code."):
            shape = tuple(int(x) for x in reversed(t.shape.tolist()))
            tensors[t.name] = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(shape)
    kv = {}
    for name, field in reader.fields.items():
        if name.startswith("kazetts.code."):
            kv[name[len("kazetts.code.") :]] = field.parts[field.data[0]].tolist()[0]
    return tensors, kv


def _rms(x, w, eps):
    x = x.astype(np.float32)
    var = np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32)
    return (x / np.sqrt(var + np.float32(eps))).astype(np.float32) * w


def _rope(x, pos, theta):
    """NeoX split-half RoPE; x [T, H, D]."""
    d = x.shape[-1]
    inv = (1.0 / (np.float32(theta) ** (np.arange(0, d, 2, dtype=np.float32) / np.float32(d)))).astype(np.float32)
    ang = np.asarray(pos, np.float32)[:, None] * inv[None, :]
    cos = np.cos(np.concatenate([ang, ang], -1))[:, None, :]
    sin = np.sin(np.concatenate([ang, ang], -1))[:, None, :]
    half = d // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], -1)
    return (x * cos + rot * sin).astype(np.float32)


class NumpyCodePredictor:
    """The code predictor in float32 numpy, straight from the GGUF (dequantized); for tests."""

    def __init__(self, mmproj_path):
        t, kv = _read_gguf(mmproj_path)
        p = "a.gen.code."
        self.embd = t[p + "embd.weight"]  # [15, vocab, n_in]
        self.head = t[p + "head.weight"]  # [15, vocab, n_embd]
        self.out_embd = t[p + "out_embd.weight"]  # [cb0_vocab, n_in]
        self.norm = t[p + "output_norm.weight"]
        self.proj_w = t.get(p + "proj_in.weight")
        self.proj_b = t.get(p + "proj_in.bias")
        self.n_codebooks, self.vocab, self.n_embd_in = self.embd.shape
        self.head_dim = int(kv["head_dim"])
        self.n_head = int(kv["num_attention_heads"])
        self.n_head_kv = int(kv["num_key_value_heads"])
        self.theta = float(kv["rope_theta"])
        self.eps = float(kv["rms_norm_eps"])
        self.layers = []
        i = 0
        while f"{p}blk.{i}.attn_q.weight" in t:
            self.layers.append(
                {
                    k: t[f"{p}blk.{i}.{k}.weight"]
                    for k in (
                        "ln1",
                        "attn_q",
                        "attn_q_norm",
                        "attn_k",
                        "attn_k_norm",
                        "attn_v",
                        "attn_out",
                        "ln2",
                        "ffn_gate",
                        "ffn_up",
                        "ffn_down",
                    )
                }
            )
            i += 1

    def _proj(self, x):
        if self.proj_w is None:
            return x
        y = x @ self.proj_w.T
        return y + self.proj_b if self.proj_b is not None else y

    def _forward(self, x, pos, cache):
        """x [T, n_embd] at positions pos (appended to cache) -> last hidden after the final norm."""
        T = x.shape[0]
        hd, nh, nkv = self.head_dim, self.n_head, self.n_head_kv
        for L, (ks, vs) in zip(self.layers, cache):
            h = _rms(x, L["ln1"], self.eps)
            q = (h @ L["attn_q"].T).reshape(T, nh, hd)
            k = (h @ L["attn_k"].T).reshape(T, nkv, hd)
            v = (h @ L["attn_v"].T).reshape(T, nkv, hd)
            q = _rope(_rms(q, L["attn_q_norm"], self.eps), pos, self.theta)
            k = _rope(_rms(k, L["attn_k_norm"], self.eps), pos, self.theta)
            ks.extend(k)
            vs.extend(v)
            K = np.stack(ks)  # [S, nkv, hd]
            V = np.stack(vs)
            S = K.shape[0]
            rep = nh // nkv
            Kr = np.repeat(K, rep, axis=1).transpose(1, 0, 2)  # [nh, S, hd]
            Vr = np.repeat(V, rep, axis=1).transpose(1, 0, 2)
            att = np.einsum("thd,hsd->hts", q, Kr) / np.float32(np.sqrt(hd))
            qpos = np.asarray(pos)[:, None]
            kpos = np.arange(S)[None, :]
            att = np.where(kpos[None] > qpos[None], -np.inf, att)
            att = np.exp(att - att.max(-1, keepdims=True))
            att = (att / att.sum(-1, keepdims=True)).astype(np.float32)
            o = np.einsum("hts,hsd->thd", att, Vr).reshape(T, nh * hd)
            x = x + o @ L["attn_out"].T
            h = _rms(x, L["ln2"], self.eps)
            g = h @ L["ffn_gate"].T
            x = x + ((g / (1 + np.exp(-g))) * (h @ L["ffn_up"].T)) @ L["ffn_down"].T
        return _rms(x[-1], self.norm, self.eps)

    def predict(
        self,
        hidden,
        cb0: int,
        greedy: bool = True,
        temperature: float = TEMPERATURE,
        top_k: int = TOP_K,
        top_p: float = TOP_P,
        rng: np.random.Generator | None = None,
    ):
        """-> (codes [15], embedding_sum [n_in], logits [15, vocab])."""
        sampler = CodePredictorSampler(SamplerConfig.code_predictor(temperature, top_k, top_p, greedy))
        hidden = np.asarray(hidden, np.float32).reshape(-1)
        cache = [([], []) for _ in self.layers]
        x = self._proj(np.stack([hidden, self.out_embd[cb0]]))
        emb = self.out_embd[cb0].copy()
        codes, logits = [], []
        pos = [0, 1]
        for g in range(self.n_codebooks):
            h = self._forward(x, pos, cache)
            lg = (self.head[g] @ h).astype(np.float32)
            logits.append(lg)
            code = sampler.choose(lg, rng)
            codes.append(code)
            row = self.embd[g, code]
            emb = emb + row
            x = self._proj(row[None])
            pos = [pos[-1] + 1]
        return np.asarray(codes, np.int32), emb.astype(np.float32), np.stack(logits)
