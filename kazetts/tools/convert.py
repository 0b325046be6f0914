"""Convert a Qwen3-TTS 12 Hz Hugging Face checkpoint to kazetts' two GGUF files, without torch.

``<name>-talker-<type>.gguf`` (arch ``qwen3tts``) and ``<name>-mmproj-<type>.gguf`` (arch
``clip``) follow llama.cpp's own converter (llama-cpp-python 0.3.36) tensor for tensor and key for
key; on top of that the mmproj is also written for CustomVoice / VoiceDesign models (no speaker
encoder), and both files carry ``kazetts.*`` keys (codec decoder hparams, model type, speakers,
languages, codec control ids) so the runtime hard-codes nothing.

Tensors are read through numpy memmaps and written one by one (the folded embedding table in row
chunks), so peak memory stays far below the checkpoint size.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import struct
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from kazetts.gguf import names as N

OUT_TYPES = ("f32", "f16", "q8_0")
SOURCE_CONFIGS = ("config.json", "speech_tokenizer/config.json")
_CHUNK_ROWS = 8192


# ------------------------------------------------------------------------------------------
# safetensors (numpy memmap; F32 / F16 / BF16)
# ------------------------------------------------------------------------------------------


class SafeTensors:
    """Read-only view of one or more .safetensors files; tensors come back as float32 arrays."""

    _DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}

    def __init__(self, paths: list[pathlib.Path]):
        self._index: dict[str, tuple[np.memmap, str, list[int], int, int]] = {}
        self.paths = list(paths)
        for path in paths:
            with open(path, "rb") as f:
                raw = f.read(8)
                if len(raw) != 8:
                    raise ValueError(f"{path}: not a safetensors file (truncated header)")
                (n,) = struct.unpack("<Q", raw)
                if n <= 0 or n > 100 * 1024 * 1024:
                    raise ValueError(f"{path}: not a safetensors file (header size {n})")
                try:
                    header = json.loads(f.read(n))
                except (json.JSONDecodeError, UnicodeDecodeError) as e:
                    raise ValueError(f"{path}: bad safetensors header: {e}") from None
            size = path.stat().st_size
            mm = np.memmap(path, dtype=np.uint8, mode="r")
            for name, info in header.items():
                if name == "__metadata__":
                    continue
                dtype = info["dtype"]
                start, end = info["data_offsets"]
                if 8 + n + end > size:
                    raise ValueError(f"{path}: tensor {name} lies past the end of the file (truncated?)")
                self._index[name] = (mm, dtype, list(info["shape"]), 8 + n + start, 8 + n + end)

    def __contains__(self, name: str) -> bool:
        return name in self._index

    def keys(self):
        return self._index.keys()

    def shape(self, name: str) -> list[int]:
        return list(self._index[name][2])

    def get(self, name: str, rows: slice | None = None) -> np.ndarray:
        """The tensor as float32 (a copy); ``rows`` slices the first axis before converting."""
        mm, dtype, shape, a, b = self._index[name]
        if dtype not in self._DTYPES:
            raise ValueError(f"tensor {name}: unsupported safetensors dtype {dtype} (F32, F16, BF16 only)")
        arr = mm[a:b].view(self._DTYPES[dtype]).reshape(shape)
        if rows is not None:
            arr = arr[rows]
        if dtype == "BF16":
            return (arr.astype(np.uint32) << 16).view(np.float32)
        return arr.astype(np.float32)


def _open_weights(directory: pathlib.Path, what: str) -> SafeTensors:
    single = directory / "model.safetensors"
    index = directory / "model.safetensors.index.json"
    if single.is_file():
        return SafeTensors([single])
    if index.is_file():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        missing = [f for f in files if not (directory / f).is_file()]
        if missing:
            raise ValueError(f"incomplete checkpoint: {what} shards missing in {directory}: {missing}")
        return SafeTensors([directory / f for f in files])
    raise ValueError(f"incomplete checkpoint: no {what} weights (model.safetensors) in {directory}")


# ------------------------------------------------------------------------------------------
# tensor plan
# ------------------------------------------------------------------------------------------


@dataclass
class _Tensor:
    name: str
    shape: tuple[int, ...]  # numpy order (ggml order reversed)
    produce: Callable[[], Iterator[np.ndarray]]  # float32 chunks along axis 0
    qtype: object = None
    extra: dict = field(default_factory=dict)


def _whole(fn: Callable[[], np.ndarray]) -> Callable[[], Iterator[np.ndarray]]:
    def gen():
        yield np.ascontiguousarray(fn(), dtype=np.float32)

    return gen


def _forced_type(name: str):
    """llama.cpp's Qwen3TTS tensor_force_quant for the mmproj file."""
    import gguf

    Q = gguf.GGMLQuantizationType
    if name.endswith(".weight") and (
        name in ("a.gen.wav.pre_conv.weight", "a.gen.wav.dac.entry.weight", "a.gen.wav.dac.post_conv.weight")
        or (".up.blk." in name and name.endswith(".dwconv.weight"))
        or (".dac.blk." in name and (name.endswith(".conv1.weight") or name.endswith(".conv2.weight")))
    ):
        return Q.F16  # ggml conv_1d(_dw) kernels
    if name.endswith(".conv.weight") and (".up.blk." in name or ".dac.blk." in name):
        return Q.F32  # ConvTranspose1d kernels
    if name.startswith("a.gen.code.blk.") and name.endswith(".ffn_down.weight"):
        return Q.F32  # CP FFN activations exceed the F16 range
    return None


def tensor_type(name: str, shape: tuple[int, ...], out_type: str, mmproj: bool):
    """The GGML type llama.cpp's converter picks for a tensor (same rules, same fallbacks),
    except that an f32 file keeps everything in F32: llama.cpp's converter writes the codec's
    conv kernels in F16 even then, which is ~2e-4 off the reference from pre_conv on for an F32
    checkpoint. llama.cpp loads F32 kernels too (ggml_conv_1d / _dw take any kernel type)."""
    import gguf

    Q = gguf.GGMLQuantizationType
    if name.startswith(N.ENC + "."):
        return _encoder_type(name, shape, out_type)
    forced = _forced_type(name) if mmproj and out_type != "f32" else None
    if len(shape) <= 1 or name.endswith("_norm.weight"):
        return Q.F32
    if forced is not None:
        return forced
    if not name.endswith(".weight"):
        return Q.F32
    qt = {"f32": Q.F32, "f16": Q.F16, "q8_0": Q.Q8_0}[out_type]
    if qt == Q.Q8_0 and shape[-1] % gguf.GGML_QUANT_SIZES[Q.Q8_0][0] != 0:
        return Q.F16  # llama.cpp: QuantError -> "falling back to F16"
    return qt


def _encoder_type(name: str, shape: tuple[int, ...], out_type: str):
    """Codec encoder tensors (ours, not llama.cpp's): the nearest-neighbour search (projections and
    codebooks) and every vector stay F32, so codes are exact; conv / linear weights are F32 in an
    f32 file, F16 otherwise (the encoder runs once per reference recording: no Q8_0)."""
    import gguf

    Q = gguf.GGMLQuantizationType
    if len(shape) <= 1 or name.startswith(N.ENC + ".quant.") or out_type == "f32":
        return Q.F32
    return Q.F16


# ------------------------------------------------------------------------------------------
# checkpoint
# ------------------------------------------------------------------------------------------

# What the reference (qwen-tts 0.1.1) uses for an hparam a config omits: the defaults of
# Qwen3TTSTalkerConfig, Qwen3TTSTalkerCodePredictorConfig and Qwen3TTSTokenizerV2DecoderConfig.
# The files get the resolved values, so no stage falls back on a guess of its own.
TALKER_DEFAULTS = {
    "vocab_size": 3072,
    "hidden_size": 1024,
    "intermediate_size": 2048,
    "num_hidden_layers": 20,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6,
    "num_code_groups": 32,
    "text_hidden_size": 2048,
}
CODE_PREDICTOR_DEFAULTS = {
    "vocab_size": 2048,
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 5,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
}
CODEC_DEFAULTS = {
    "codebook_size": 2048,
    "hidden_size": 1024,
    "latent_dim": 1024,
    "max_position_embeddings": 8000,
    "rope_theta": 10000,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "sliding_window": 72,
    "intermediate_size": 3072,
    "layer_scale_initial_scale": 0.01,
    "rms_norm_eps": 1e-5,
    "num_hidden_layers": 8,
    "num_quantizers": 16,
    "upsample_rates": [8, 5, 4, 3],
    "upsampling_ratios": [2, 2],
    "decoder_dim": 1536,
}
SPEECH_TOKENIZER_DEFAULTS = {"output_sample_rate": 24000, "decode_upsample_rate": 1920}


def with_defaults(config: dict, defaults: dict) -> dict:
    """The config as the reference reads it: its own values, the class defaults for the rest."""
    return {**config, **{k: v for k, v in defaults.items() if k not in config}}


def codec_config(decoder_config: dict) -> dict:
    """The codec decoder's hparams as the reference uses them. Its attention takes
    `getattr(config, "head_dim", hidden_size // num_attention_heads)`: no head_dim key in the
    config means the width over the heads, not any fixed value."""
    wav = with_defaults(decoder_config, CODEC_DEFAULTS)
    wav.setdefault("head_dim", wav["hidden_size"] // wav["num_attention_heads"])
    return wav


class _Checkpoint:
    def __init__(self, directory: pathlib.Path):
        d = pathlib.Path(directory)
        if not d.is_dir():
            raise ValueError(f"checkpoint directory not found: {d}")
        cfg_path = d / "config.json"
        if not cfg_path.is_file():
            raise ValueError(f"incomplete checkpoint: {cfg_path} is missing")
        self.dir = d
        self.config = json.loads(cfg_path.read_text())
        if "talker_config" not in self.config:
            raise ValueError(f"{cfg_path}: not a Qwen3-TTS config (no talker_config)")
        self.talker = with_defaults(self.config["talker_config"], TALKER_DEFAULTS)
        self.cp = with_defaults(self.talker.get("code_predictor_config") or {}, CODE_PREDICTOR_DEFAULTS)
        st = d / "speech_tokenizer"
        if not (st / "config.json").is_file():
            raise ValueError(f"incomplete checkpoint: {st / 'config.json'} is missing (codec decoder)")
        self.st_config = with_defaults(json.loads((st / "config.json").read_text()), SPEECH_TOKENIZER_DEFAULTS)
        self.wav = codec_config(self.st_config.get("decoder_config") or {})
        if not ((d / "tokenizer.json").is_file() or ((d / "vocab.json").is_file() and (d / "merges.txt").is_file())):
            raise ValueError(f"incomplete checkpoint: no tokenizer (tokenizer.json or vocab.json + merges.txt) in {d}")
        self.model = _open_weights(d, "model")
        self.codec = _open_weights(st, "speech_tokenizer")
        gen = d / "generation_config.json"
        self.generation = json.loads(gen.read_text()) if gen.is_file() else {}
        self.model_type = self.config.get("tts_model_type", "base")
        self.has_speaker_encoder = any(k.startswith("speaker_encoder.") for k in self.model.keys())
        # the codec encoder only serves voice cloning: written for Base models only
        self.has_codec_encoder = self.model_type == "base" and "encoder_config" in self.st_config
        self._fingerprint: str | None = None

    def fingerprint(self) -> str:
        """sha256 over the checkpoint's configs and weight files (names and bytes), written into
        both GGUF files: the engines refuse a talker and an mmproj whose fingerprints differ
        (two checkpoints of one size have the same shapes). Read once per conversion."""
        if self._fingerprint is None:
            digest = hashlib.sha256()
            files = [self.dir / c for c in SOURCE_CONFIGS] + self.model.paths + self.codec.paths
            for path in files:
                digest.update(path.relative_to(self.dir).as_posix().encode() + b"\0")
                with open(path, "rb") as f:
                    while block := f.read(1 << 20):
                        digest.update(block)
            self._fingerprint = digest.hexdigest()
        return self._fingerprint

    def require(self, st: SafeTensors, names: list[str], what: str):
        missing = [n for n in names if n not in st]
        if missing:
            more = f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""
            raise ValueError(
                f"incomplete checkpoint: {len(missing)} {what} tensor(s) missing, e.g. {missing[:5]}{more}"
            )


# ------------------------------------------------------------------------------------------
# talker
# ------------------------------------------------------------------------------------------


def _silu(x):
    return x / (1.0 + np.exp(-x))


_ACT = {
    "silu": _silu,
    "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: 0.5 * x * (1.0 + np.vectorize(__import__("math").erf)(x / np.sqrt(2.0))),
}


def _talker_tensors(ck: _Checkpoint) -> list[_Tensor]:
    m, t = ck.model, ck.talker
    n_layer = t["num_hidden_layers"]
    fold = [
        "talker.model.text_embedding.weight",
        "talker.text_projection.linear_fc1.weight",
        "talker.text_projection.linear_fc1.bias",
        "talker.text_projection.linear_fc2.weight",
        "talker.text_projection.linear_fc2.bias",
    ]
    need = fold + ["talker.model.codec_embedding.weight", "talker.codec_head.weight", "talker.model.norm.weight"]
    need += [f"talker.model.layers.{i}.{k}" for i in range(n_layer) for k in N.TALKER_LAYER]
    ck.require(m, need, "talker")
    act = _ACT[t.get("hidden_act", "silu")]

    n_text, _ = m.shape(fold[0])
    n_codec, n_embd = m.shape("talker.model.codec_embedding.weight")

    def token_embd():
        w1, b1 = m.get(fold[1]), m.get(fold[2])
        w2, b2 = m.get(fold[3]), m.get(fold[4])
        for a in range(0, n_text, _CHUNK_ROWS):
            e = m.get(fold[0], slice(a, min(a + _CHUNK_ROWS, n_text)))
            yield (act(e @ w1.T + b1) @ w2.T + b2).astype(np.float32)
        for a in range(0, n_codec, _CHUNK_ROWS):
            yield m.get("talker.model.codec_embedding.weight", slice(a, min(a + _CHUNK_ROWS, n_codec)))

    def src(name):
        return _whole(lambda: m.get(name))

    out = [
        _Tensor(N.TOKEN_EMBD, (n_text + n_codec, n_embd), token_embd),
        _Tensor(N.OUTPUT, tuple(m.shape("talker.codec_head.weight")), src("talker.codec_head.weight")),
        _Tensor(N.OUTPUT_NORM, tuple(m.shape("talker.model.norm.weight")), src("talker.model.norm.weight")),
    ]
    for i in range(n_layer):
        for k, v in N.TALKER_LAYER.items():
            hf = f"talker.model.layers.{i}.{k}"
            out.append(_Tensor(f"blk.{i}.{v}", tuple(m.shape(hf)), src(hf)))
    return out


# ------------------------------------------------------------------------------------------
# mmproj: speaker encoder, code predictor, codec decoder
# ------------------------------------------------------------------------------------------


def _speaker_tensors(ck: _Checkpoint) -> list[_Tensor]:
    m = ck.model
    out = []
    for hf in sorted(k for k in m.keys() if k.startswith("speaker_encoder.")):
        rest = hf[len("speaker_encoder.") :]
        base, suffix = rest.rsplit(".", 1)
        new = N.SPK_FIXED.get(base)
        if new is None:
            parts = base.split(".")
            if parts[0] == "blocks" and parts[1].isdecimal():
                bid = int(parts[1])
                key = ".".join(parts[2:])
                if key.startswith("res2net_block.blocks.") and key.endswith(".conv"):
                    xid = int(key.split(".")[2])
                    new = N.SPK_BLOCK["res2net_block.blocks.{xid}.conv"].format(bid=bid, xid=xid)
                elif key in N.SPK_BLOCK:
                    new = N.SPK_BLOCK[key].format(bid=bid)
        if new is None:
            raise ValueError(f"unknown speaker encoder tensor {hf}")
        out.append(_Tensor(f"{new}.{suffix}", tuple(m.shape(hf)), _whole(lambda hf=hf: m.get(hf))))
    return out


def _code_tensors(ck: _Checkpoint) -> list[_Tensor]:
    m, cp = ck.model, ck.cp
    n_groups = ck.talker["num_code_groups"] - 1
    n_layer = cp["num_hidden_layers"]
    embd = [f"talker.code_predictor.model.codec_embedding.{g}.weight" for g in range(n_groups)]
    head = [f"talker.code_predictor.lm_head.{g}.weight" for g in range(n_groups)]
    need = embd + head + ["talker.code_predictor.model.norm.weight", "talker.model.codec_embedding.weight"]
    need += [f"talker.code_predictor.model.layers.{i}.{k}" for i in range(n_layer) for k in N.CODE_LAYER]
    ck.require(m, need, "code predictor")

    def stacked(names):
        def gen():
            for n in names:
                yield m.get(n)[None]

        return gen

    out = [
        _Tensor(N.CODE_EMBD, (n_groups, *m.shape(embd[0])), stacked(embd)),
        _Tensor(N.CODE_HEAD, (n_groups, *m.shape(head[0])), stacked(head)),
        _Tensor(
            N.CODE_OUT_EMBD,
            tuple(m.shape("talker.model.codec_embedding.weight")),
            _whole(lambda: m.get("talker.model.codec_embedding.weight")),
        ),
        _Tensor(
            N.CODE_OUTPUT_NORM,
            tuple(m.shape("talker.code_predictor.model.norm.weight")),
            _whole(lambda: m.get("talker.code_predictor.model.norm.weight")),
        ),
    ]
    for suffix in ("weight", "bias"):
        hf = f"talker.code_predictor.small_to_mtp_projection.{suffix}"
        if hf in m:
            out.append(_Tensor(f"{N.CODE_PROJ_IN}.{suffix}", tuple(m.shape(hf)), _whole(lambda hf=hf: m.get(hf))))
    for i in range(n_layer):
        for k, v in N.CODE_LAYER.items():
            hf = f"talker.code_predictor.model.layers.{i}.{k}"
            out.append(_Tensor(f"{N.CODE_PREFIX}.blk.{i}.{v}", tuple(m.shape(hf)), _whole(lambda hf=hf: m.get(hf))))
    return out


def _codebook(st: SafeTensors, embed_sum: str, cluster_usage: str) -> np.ndarray:
    """Codebook vectors as the reference computes them: embed_sum / clamp(cluster_usage, 1e-5), float32."""
    return st.get(embed_sum) / np.maximum(st.get(cluster_usage), np.float32(1e-5))[:, None]


def _wav_tensors(ck: _Checkpoint) -> list[_Tensor]:
    c, w = ck.codec, ck.wav
    n_rest = w["num_quantizers"] - w.get("num_semantic_quantizers", 1)
    out: list[_Tensor] = []

    def add(name, hf, fn=None, shape=None):
        if fn is None:
            ck.require(c, [hf], "codec decoder")
            fn = lambda hf=hf: c.get(hf)
            shape = tuple(c.shape(hf))
        out.append(_Tensor(name, tuple(shape), _whole(fn)))

    def squeezed(name, hf):
        ck.require(c, [hf], "codec decoder")
        shape = c.shape(hf)
        add(name, hf, lambda: c.get(hf).reshape(shape[:-1]), shape[:-1])

    def codebook(prefix, i):
        return _codebook(
            c, f"{prefix}.vq.layers.{i}._codebook.embedding_sum", f"{prefix}.vq.layers.{i}._codebook.cluster_usage"
        )

    def snake(name, hf_alpha, hf_beta):
        ck.require(c, [hf_alpha, hf_beta], "codec decoder")
        shape = c.shape(hf_alpha)
        add(f"{name}.alpha", None, lambda: np.exp(c.get(hf_alpha)), shape)
        add(f"{name}.beta", None, lambda: (1.0 / (np.exp(c.get(hf_beta)) + np.float32(1e-9))).astype(np.float32), shape)

    for tag, prefix, n in (("first", "decoder.quantizer.rvq_first", 1), ("rest", "decoder.quantizer.rvq_rest", n_rest)):
        names = [f"{prefix}.vq.layers.{i}._codebook.{k}" for i in range(n) for k in ("embedding_sum", "cluster_usage")]
        ck.require(c, names, "codec decoder")
        squeezed(f"{N.WAV}.quant.{tag}.in_proj.weight", f"{prefix}.input_proj.weight")
        squeezed(f"{N.WAV}.quant.{tag}.out_proj.weight", f"{prefix}.output_proj.weight")
        cb_shape = c.shape(f"{prefix}.vq.layers.0._codebook.embedding_sum")
        if n == 1:
            add(f"{N.WAV}.quant.{tag}.codebook.weight", None, lambda p=prefix: codebook(p, 0), cb_shape)
        else:

            def gen(p=prefix, n=n):
                for i in range(n):
                    yield codebook(p, i)[None].astype(np.float32)

            out.append(_Tensor(f"{N.WAV}.quant.{tag}.codebook.weight", (n, *cb_shape), gen))

    add(f"{N.WAV}.pre_conv.weight", "decoder.pre_conv.conv.weight")
    add(f"{N.WAV}.pre_conv.bias", "decoder.pre_conv.conv.bias")
    for io in ("in", "out"):
        add(f"{N.WAV}.tfm.{io}_proj.weight", f"decoder.pre_transformer.{io}put_proj.weight")
        add(f"{N.WAV}.tfm.{io}_proj.bias", f"decoder.pre_transformer.{io}put_proj.bias")
    add(f"{N.WAV}.tfm.output_norm.weight", "decoder.pre_transformer.norm.weight")
    for i in range(w["num_hidden_layers"]):
        for k, v in N.WAV_TFM_LAYER.items():
            add(f"{N.WAV}.tfm.blk.{i}.{v}", f"decoder.pre_transformer.layers.{i}.{k}")
    for i in range(len(w["upsampling_ratios"])):
        for k, v in N.WAV_UP.items():
            add(f"{N.WAV}.up.blk.{i}.{v}", f"decoder.upsample.{i}.{k}")
    add(f"{N.WAV}.dac.entry.weight", "decoder.decoder.0.conv.weight")
    add(f"{N.WAV}.dac.entry.bias", "decoder.decoder.0.conv.bias")
    n_blocks = len(w["upsample_rates"])
    for b in range(n_blocks):
        p = f"decoder.decoder.{b + 1}.block"
        snake(f"{N.WAV}.dac.blk.{b}.snake", f"{p}.0.alpha", f"{p}.0.beta")
        add(f"{N.WAV}.dac.blk.{b}.conv.weight", f"{p}.1.conv.weight")
        add(f"{N.WAV}.dac.blk.{b}.conv.bias", f"{p}.1.conv.bias")
        for x in range(3):
            r = f"{p}.{x + 2}"
            base = f"{N.WAV}.dac.blk.{b}.res.{x}"
            snake(f"{base}.act1", f"{r}.act1.alpha", f"{r}.act1.beta")
            add(f"{base}.conv1.weight", f"{r}.conv1.conv.weight")
            add(f"{base}.conv1.bias", f"{r}.conv1.conv.bias")
            snake(f"{base}.act2", f"{r}.act2.alpha", f"{r}.act2.beta")
            add(f"{base}.conv2.weight", f"{r}.conv2.conv.weight")
            add(f"{base}.conv2.bias", f"{r}.conv2.conv.bias")
    last = n_blocks + 1
    snake(f"{N.WAV}.dac.post_snake", f"decoder.decoder.{last}.alpha", f"decoder.decoder.{last}.beta")
    add(f"{N.WAV}.dac.post_conv.weight", f"decoder.decoder.{last + 1}.conv.weight")
    add(f"{N.WAV}.dac.post_conv.bias", f"decoder.decoder.{last + 1}.conv.bias")
    return out


def _encoder_tensors(ck: _Checkpoint) -> list[_Tensor]:
    """The 12 Hz tokenizer's encoder (`encoder.*`, transformers' MimiModel encoder side) under
    kazetts.enc.*: SEANet convs and the downsample keep torch's [out, in, k] layout; only what
    encoding reads is written (no output projections, only the codebooks that are kept)."""
    c, e = ck.codec, ck.st_config["encoder_config"]
    n_keep = int(ck.st_config.get("encoder_valid_num_quantizers", e["num_quantizers"]))
    n_sem = int(e.get("num_semantic_quantizers", 1))
    if n_sem != 1 or not 1 < n_keep <= e["num_quantizers"]:
        raise ValueError(
            f"codec encoder: unsupported quantizers (semantic {n_sem}, kept {n_keep} of {e['num_quantizers']})"
        )
    out: list[_Tensor] = []

    def add(name, hf, fn=None, shape=None):
        ck.require(c, [hf], "codec encoder")
        out.append(_Tensor(name, tuple(shape or c.shape(hf)), _whole(fn or (lambda hf=hf: c.get(hf)))))

    seanet = sorted(k for k in c.keys() if k.startswith("encoder.encoder.layers."))
    if not seanet:
        raise ValueError(
            "incomplete checkpoint: no codec encoder tensors (encoder.encoder.layers.*) in speech_tokenizer"
        )
    for hf in seanet:  # encoder.encoder.layers.{i}[.block.{j}].conv.{weight,bias}
        rest = hf[len("encoder.encoder.layers.") :].replace(".conv.", ".")
        add(f"{N.ENC_SEANET}.{rest}", hf)
    add(N.ENC_DOWN, "encoder.downsample.conv.weight")
    for i in range(e["num_hidden_layers"]):
        for k, v in N.ENC_TFM_LAYER.items():
            add(f"{N.ENC}.tfm.blk.{i}.{v}", f"encoder.encoder_transformer.layers.{i}.{k}")

    def codebook(prefix, i):
        return _codebook(c, f"{prefix}.layers.{i}.codebook.embed_sum", f"{prefix}.layers.{i}.codebook.cluster_usage")

    for part, proj, book, layers in (
        ("semantic", N.ENC_SEM_PROJ, N.ENC_SEM_CODEBOOK, [0]),
        ("acoustic", N.ENC_AC_PROJ, N.ENC_AC_CODEBOOK, list(range(n_keep - 1))),
    ):
        prefix = f"encoder.quantizer.{part}_residual_vector_quantizer"
        ck.require(
            c,
            [f"{prefix}.layers.{i}.codebook.{k}" for i in layers for k in ("embed_sum", "cluster_usage")],
            "codec encoder",
        )
        shape = c.shape(f"{prefix}.input_proj.weight")
        add(
            proj,
            f"{prefix}.input_proj.weight",
            lambda h=f"{prefix}.input_proj.weight", s=shape: c.get(h).reshape(s[:2]),
            shape[:2],
        )
        cb_shape = c.shape(f"{prefix}.layers.0.codebook.embed_sum")
        if part == "semantic":
            out.append(_Tensor(book, tuple(cb_shape), _whole(lambda p=prefix: codebook(p, 0))))
        else:

            def gen(p=prefix, layers=layers):
                for i in layers:
                    yield codebook(p, i)[None].astype(np.float32)

            out.append(_Tensor(book, (len(layers), *cb_shape), gen))
    return out


# ------------------------------------------------------------------------------------------
# metadata
# ------------------------------------------------------------------------------------------


def _token_list(ck: _Checkpoint) -> tuple[list[str], list[int]]:
    """Text vocabulary as llama.cpp's get_vocab_base builds it (AutoTokenizer-free)."""
    import gguf

    d = ck.dir
    if (d / "tokenizer.json").is_file():
        tj = json.loads((d / "tokenizer.json").read_text(encoding="utf-8"))
        vocab = dict(tj["model"]["vocab"])
        added = {a["id"]: a for a in tj.get("added_tokens", [])}
    else:
        vocab = json.loads((d / "vocab.json").read_text(encoding="utf-8"))
        added = {}
    tc_path = d / "tokenizer_config.json"
    if tc_path.is_file():
        for sid, a in json.loads(tc_path.read_text(encoding="utf-8")).get("added_tokens_decoder", {}).items():
            added[int(sid)] = {"id": int(sid), **a}
    reverse = {i: tok for tok, i in vocab.items()}
    for i, a in added.items():
        reverse[i] = a["content"]
    n_vocab = ck.talker["text_vocab_size"]
    if reverse and max(reverse) >= n_vocab:
        raise ValueError(f"tokenizer has ids >= text_vocab_size {n_vocab}")
    tokens, types = [], []
    for i in range(n_vocab):
        tok = reverse.get(i)
        if tok is None:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif i in added:
            looks = tok.startswith("<|") and tok.endswith("|>")
            types.append(gguf.TokenType.CONTROL if added[i].get("special") or looks else gguf.TokenType.USER_DEFINED)
            tokens.append(tok)
        else:
            tokens.append(tok)
            types.append(gguf.TokenType.NORMAL)
    return tokens, types


def _codec_token_names(talker: dict) -> list[str]:
    names = [f"<|codec_{i}|>" for i in range(talker["vocab_size"])]
    for key, val in talker.items():
        if not key.endswith("_id"):
            continue
        prefix = key[:-3]
        if isinstance(val, int):
            names[val] = f"<|{prefix}|>"
        elif isinstance(val, dict):
            for sub, sid in val.items():
                names[sid] = f"<|{prefix}_{sub}|>"
    return names


def _general(w, ck: _Checkpoint, name: str, kind: str, ftype: int):
    import gguf

    w.add_type(kind)
    g = ck.generation
    if "top_k" in g:
        w.add_int32("general.sampling.top_k", int(g["top_k"]))
    if "top_p" in g:
        w.add_float32("general.sampling.top_p", float(g["top_p"]))
    if "temperature" in g:
        w.add_float32("general.sampling.temp", float(g["temperature"]))
    rp = g.get("penalty_repeat", g.get("repetition_penalty"))
    if rp is not None:
        w.add_float32("general.sampling.penalty_repeat", float(rp))
    w.add_name(name)
    # llama.cpp's size label counts the tensors it reads: not our kazetts.* ones (codec encoder)
    every = w.tensors
    w.tensors = [{k: v for k, v in shard.items() if not k.startswith(N.K + ".")} for shard in every]
    total, shared, expert, count = w.get_total_parameter_count()
    w.tensors = every
    if total > 0:
        w.add_string("general.size_label", gguf.size_label(total, shared, expert, count))
    w.add_uint32("general.file_type", ftype)
    w.add_uint32("general.quantization_version", gguf.GGML_QUANT_VERSION)


def _kazetts_keys(w, ck: _Checkpoint):
    t, cfg = ck.talker, ck.config
    w.add_uint32(N.K_VERSION, N.FORMAT_VERSION)
    for config in SOURCE_CONFIGS:  # which checkpoint the file came from (validation checks goldens match)
        w.add_string(N.K_SOURCE_SHA256 + config, hashlib.sha256((ck.dir / config).read_bytes()).hexdigest())
    w.add_string(N.K_CHECKPOINT_SHA256, ck.fingerprint())
    w.add_string(N.K_MODEL_TYPE, ck.model_type)
    if cfg.get("tts_model_size"):
        w.add_string(N.K_MODEL_SIZE, str(cfg["tts_model_size"]))
    spk = t.get("spk_id") or {}
    if spk:
        dial = t.get("spk_is_dialect") or {}
        names = list(spk)
        w.add_array(N.K_SPEAKERS, names)
        w.add_key_value(N.K_SPEAKER_IDS, [int(spk[s]) for s in names], _vt().ARRAY, sub_type=_vt().INT32)
        w.add_key_value(N.K_SPEAKER_DIALECTS, [(dial.get(s) or "") for s in names], _vt().ARRAY, sub_type=_vt().STRING)
    langs = t.get("codec_language_id") or {}
    if langs:
        w.add_array(N.K_LANGUAGES, list(langs))
        w.add_key_value(N.K_LANGUAGE_IDS, [int(v) for v in langs.values()], _vt().ARRAY, sub_type=_vt().INT32)
    for key, val in t.items():
        if key.startswith("codec_") and key.endswith("_id") and isinstance(val, int):
            w.add_uint32(N.K_CODEC + key[len("codec_") :], val)  # pad_id, bos_id, eos_token_id, ...
    for key in ("im_start_token_id", "im_end_token_id", "tts_pad_token_id", "tts_bos_token_id", "tts_eos_token_id"):
        if key in cfg:
            w.add_uint32(N.K_TEXT + key, int(cfg[key]))
    w.add_uint32(N.K_TEXT + "vocab_size", int(t["text_vocab_size"]))
    w.add_uint32(N.K_TALKER + "codec_vocab_size", int(t["vocab_size"]))
    w.add_uint32(N.K_TALKER + "num_code_groups", int(t["num_code_groups"]))
    w.add_uint32(N.K_TALKER + "text_hidden_size", int(t["text_hidden_size"]))
    w.add_uint32(N.K_TALKER + "head_dim", int(t.get("head_dim", t["hidden_size"] // t["num_attention_heads"])))
    if "position_id_per_seconds" in t:
        w.add_uint32(N.K_TALKER + "position_id_per_seconds", int(t["position_id_per_seconds"]))
    cp = ck.cp
    for key in (
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "vocab_size",
    ):
        w.add_uint32(N.K_CODE + key, int(cp[key]))
    w.add_float32(N.K_CODE + "rope_theta", float(cp["rope_theta"]))
    w.add_float32(N.K_CODE + "rms_norm_eps", float(cp["rms_norm_eps"]))
    _numeric_keys(w, N.K_WAV, ck.wav)
    for key in SPEECH_TOKENIZER_DEFAULTS:
        w.add_uint32(N.K_WAV + key, int(ck.st_config[key]))
    if ck.has_speaker_encoder and "speaker_encoder_config" in cfg:
        _numeric_keys(w, N.K_SPK, cfg["speaker_encoder_config"])
    if ck.has_codec_encoder:
        _numeric_keys(w, N.K_ENC, ck.st_config["encoder_config"])
        e = ck.st_config["encoder_config"]
        w.add_uint32(N.K_ENC_CODEBOOKS, int(ck.st_config.get("encoder_valid_num_quantizers", e["num_quantizers"])))
        w.add_uint32(N.K_ENC_HOP, int(ck.st_config["encode_downsample_rate"]))
        w.add_uint32(N.K_ENC_RATE, int(ck.st_config.get("input_sample_rate", e.get("sampling_rate", 24000))))


def _vt():
    import gguf

    return gguf.GGUFValueType


def _numeric_keys(w, prefix: str, d: dict):
    for key, val in d.items():
        if isinstance(val, bool):
            w.add_bool(prefix + key, val)
        elif isinstance(val, int):
            w.add_uint32(prefix + key, val) if val >= 0 else w.add_int32(prefix + key, val)
        elif isinstance(val, float):
            w.add_float32(prefix + key, val)
        elif isinstance(val, str):
            w.add_string(prefix + key, val)
        elif isinstance(val, list) and val and all(isinstance(v, int) and not isinstance(v, bool) for v in val):
            w.add_key_value(prefix + key, [int(v) for v in val], _vt().ARRAY, sub_type=_vt().INT32)


def _talker_kv(w, ck: _Checkpoint):
    import gguf

    t = ck.talker
    w.add_block_count(t["num_hidden_layers"])
    w.add_context_length(t["max_position_embeddings"])
    w.add_embedding_length(t["hidden_size"])
    w.add_feed_forward_length(t["intermediate_size"])
    w.add_head_count(t["num_attention_heads"])
    w.add_head_count_kv(t["num_key_value_heads"])
    rope = t.get("rope_scaling") or t.get("rope_parameters") or {}
    if "mrope_section" in rope:
        sec = list(rope["mrope_section"])[:4]
        sec += [0] * (4 - len(sec))
        w.add_rope_dimension_sections(sec)
    w.add_rope_freq_base(t.get("rope_theta", rope.get("rope_theta", 10000.0)))  # Qwen3TTSTalkerConfig: 10000
    w.add_layer_norm_rms_eps(t["rms_norm_eps"])
    if "head_dim" in t:
        w.add_key_length(t["head_dim"])
        w.add_value_length(t["head_dim"])

    n_text, n_codec = t["text_vocab_size"], t["vocab_size"]
    n_vocab = n_text + n_codec
    eos = n_text + t["codec_eos_token_id"]
    # same rule as llama.cpp: the last 1024 ids (codec control/speaker rows) except codec eos
    w.add_array("tokenizer.ggml.suppress_tokens", [i for i in range(n_vocab - 1024, n_vocab) if i != eos])

    tokens, types = _token_list(ck)
    tokens += _codec_token_names(t)
    types += [gguf.TokenType.CONTROL] * n_codec
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    gguf.SpecialVocab(ck.dir, load_merges=True).add_to_gguf(w, quiet=True)
    # llama.cpp writes the codec eos then lets the tokenizer's eos (<|im_end|>) overwrite it
    if not any("tokenizer.ggml.eos_token_id" in kv for kv in w.kv_data):
        w.add_eos_token_id(eos)
    if not any("tokenizer.ggml.add_eos_token" in kv for kv in w.kv_data):
        w.add_add_eos_token(False)
    for kv in w.kv_data:
        kv.pop("tokenizer.chat_template", None)


def _mmproj_kv(w, ck: _Checkpoint):
    cp, n_embd = ck.cp, ck.talker["hidden_size"]
    if ck.has_speaker_encoder:
        w.add_bool(N.CLIP_HAS_AUDIO, True)
        w.add_string("clip.audio.projector_type", N.PROJECTOR_SPKENC)
        w.add_uint32("clip.audio.projection_dim", n_embd)
        w.add_uint32("clip.audio.num_mel_bins", 128)
        w.add_uint32("clip.audio.block_count", 3)
        w.add_uint32("clip.audio.embedding_length", 1536)
        w.add_uint32("clip.audio.attention.head_count", 1)
        w.add_uint32("clip.audio.feed_forward_length", 1536)
        w.add_float32("clip.audio.attention.layer_norm_epsilon", 1e-5)
    w.add_bool(N.CLIP_HAS_GEN_AUDIO, True)
    w.add_string("clip.gen.audio.projector_type", N.PROJECTOR_GEN)
    w.add_uint32("clip.gen.audio.projection_dim", n_embd)
    w.add_uint32("clip.gen.audio.embedding_length", cp["hidden_size"])
    w.add_uint32("clip.gen.audio.feed_forward_length", cp["intermediate_size"])
    w.add_uint32("clip.gen.audio.block_count", cp["num_hidden_layers"])
    w.add_uint32("clip.gen.audio.attention.head_count", cp["num_attention_heads"])
    w.add_uint32("clip.gen.audio.attention.head_count_kv", cp["num_key_value_heads"])
    w.add_float32("clip.gen.audio.attention.layer_norm_epsilon", cp["rms_norm_eps"])


# ------------------------------------------------------------------------------------------
# writer
# ------------------------------------------------------------------------------------------


def _encode(chunk: np.ndarray, qtype) -> np.ndarray:
    import gguf

    Q = gguf.GGMLQuantizationType
    if qtype == Q.F32:
        return np.ascontiguousarray(chunk, dtype=np.float32)
    if qtype == Q.F16:
        return np.ascontiguousarray(chunk.astype(np.float16))
    return gguf.quants.quantize(np.ascontiguousarray(chunk, dtype=np.float32), qtype)


def _nbytes(shape, qtype) -> int:
    import gguf

    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n = int(np.prod(shape))
    return n // block * size


def _write_file(
    path: pathlib.Path,
    arch: str,
    tensors: list[_Tensor],
    out_type: str,
    mmproj: bool,
    add_kv: Callable,
    log: Callable[[str], None],
) -> None:
    import gguf

    w = gguf.GGUFWriter(path=None, arch=arch)
    for t in tensors:
        t.qtype = tensor_type(t.name, t.shape, out_type, mmproj)
        w.add_tensor_info(t.name, t.shape, np.dtype(np.float32), _nbytes(t.shape, t.qtype), raw_dtype=t.qtype)
    add_kv(w)
    tmp = path.with_name(path.name + ".part")
    w.write_header_to_file(path=tmp)
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    fout = w.fout[0]
    t0 = time.time()
    for i, t in enumerate(tensors):
        # equivalent of GGUFWriter.write_tensor_data, fed chunk by chunk
        ti = w.tensors[0].pop(t.name)
        w.write_padding(fout, fout.tell())
        written = 0
        for chunk in t.produce():
            data = _encode(chunk, t.qtype)
            data.tofile(fout)
            written += data.nbytes
        if written != ti.nbytes:
            raise RuntimeError(f"{t.name}: wrote {written} bytes, expected {ti.nbytes}")
        w.write_padding(fout, written)
        log(f"  [{i + 1:4d}/{len(tensors)}] {t.name:48s} {t.qtype.name:5s} {list(reversed(t.shape))}")
    w.state = gguf.gguf_writer.WriterState.WEIGHTS
    w.close()
    os.replace(tmp, path)
    log(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, {time.time() - t0:.1f} s)")


def convert_checkpoint(
    checkpoint_dir, out_dir, out_type: str = "q8_0", *, name: str | None = None, verbose: bool = True
) -> tuple[pathlib.Path, pathlib.Path]:
    """Convert a Qwen3-TTS 12 Hz checkpoint; returns (talker_gguf, mmproj_gguf)."""
    import gguf

    if out_type not in OUT_TYPES:
        from kazetts.tools.quantize import TYPES

        hint = (
            f" ({out_type} files come from `kazetts quantize` of the f32 or f16 files, talker and mmproj)"
            if out_type in TYPES
            else ""
        )
        raise ValueError(f"unknown output type {out_type!r}: choose one of {', '.join(OUT_TYPES)}{hint}")
    ck = _Checkpoint(pathlib.Path(checkpoint_dir))
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = name or ck.dir.resolve().name
    ftype = {
        "f32": gguf.LlamaFileType.ALL_F32,
        "f16": gguf.LlamaFileType.MOSTLY_F16,
        "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    }[out_type]

    def log(msg):
        if verbose:
            print(msg, flush=True)

    try:
        talker_tensors = _talker_tensors(ck)
        mm_tensors = (_speaker_tensors(ck) if ck.has_speaker_encoder else []) + _code_tensors(ck) + _wav_tensors(ck)
        mm_tensors += _encoder_tensors(ck) if ck.has_codec_encoder else []
    except KeyError as e:
        raise ValueError(f"{ck.dir}: a config lacks {e}, which the reference has no default for") from None

    talker_path = out / f"{name}-talker-{out_type}.gguf"
    mmproj_path = out / f"{name}-mmproj-{out_type}.gguf"

    def talker_kv(w):
        _general(w, ck, name, "model", int(ftype))
        _talker_kv(w, ck)
        _kazetts_keys(w, ck)

    def mmproj_kv(w):
        _general(w, ck, name, "mmproj", int(ftype))
        _mmproj_kv(w, ck)
        _kazetts_keys(w, ck)

    log(f"converting {ck.dir} ({ck.model_type}) -> {out_type}")
    _write_file(talker_path, N.TALKER_ARCH, talker_tensors, out_type, False, talker_kv, log)
    _write_file(mmproj_path, N.MMPROJ_ARCH, mm_tensors, out_type, True, mmproj_kv, log)
    return talker_path, mmproj_path
