"""The code predictor in float32 numpy, straight from the GGUF (dequantized), sampling with the
numpy statement of the rule (oracles/sampling.py): a slow second implementation the tests hold
the native one (kazetts.stages.code_predictor.CodePredictor) against; never the runtime's."""

from __future__ import annotations

import numpy as np

from kazetts.request import TEMPERATURE, TOP_K, TOP_P
from kazetts.stages.sampling import SamplerConfig
from kazetts.validation.oracles.sampling import CodePredictorSampler


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
