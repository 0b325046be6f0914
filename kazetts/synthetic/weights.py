"""Tensor names, shapes and random initialisation of synthetic Qwen3-TTS checkpoints.

Names and shapes follow the official checkpoints exactly (a reference-environment test loads
every preset strictly), so real and synthetic weights travel through the same code. Values are
random but shaped to behave: every tensor is exercised (codebooks and Snake parameters are not
left at their zero defaults), activations stay in a realistic range, and the codec's waveform
keeps a standard deviation of a few percent of full scale without clipping.

Each tensor is drawn from its own generator seeded by (seed, name), so a tensor's values do not
depend on which other tensors a preset has.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

# Output scale of the codec's last convolution, tuned on the reference decoder so that a
# golden waveform has a std of a few percent of full scale with no clipping.
CODEC_OUTPUT_GAIN = 0.03
# Gain on the codec head's end-of-speech row. With every row at unit logit scale the eos id
# would win one step in ~2000 and no utterance would end; at this gain it wins a few percent
# of steps, so utterances end after tens of frames as real ones do.
EOS_ROW_GAIN = 1.7


@dataclass(frozen=True)
class Init:
    """How to draw one tensor: `kind` is normal/uniform/const; normal uses mean + std."""

    kind: str
    a: float = 0.0  # normal: mean; uniform: low; const: value
    b: float = 0.0  # normal: std; uniform: high
    row_gains: tuple[tuple[int, float], ...] = ()  # (row, factor) applied after drawing


def _fan_in(shape: tuple[int, ...], gain: float = 1.0) -> Init:
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return Init("normal", 0.0, gain / np.sqrt(fan_in))


NORM_WEIGHT = Init("normal", 1.0, 0.1)
BIAS = Init("normal", 0.0, 0.02)
EMBEDDING = Init("normal", 0.0, 1.0)


def _linear(specs: dict, name: str, out_dim: int, in_dim: int, bias: bool = False, gain: float = 1.0):
    specs[f"{name}.weight"] = ((out_dim, in_dim), _fan_in((out_dim, in_dim), gain))
    if bias:
        specs[f"{name}.bias"] = ((out_dim,), BIAS)


def _conv(specs: dict, name: str, out_ch: int, in_ch: int, kernel: int, bias: bool = True, gain: float = 1.0):
    specs[f"{name}.weight"] = ((out_ch, in_ch, kernel), _fan_in((out_ch, in_ch, kernel), gain))
    if bias:
        specs[f"{name}.bias"] = ((out_ch,), BIAS)


def _conv_transpose(specs: dict, name: str, in_ch: int, out_ch: int, kernel: int):
    # ConvTranspose1d stores [in, out, k]; each output sums in_ch * kernel / stride inputs.
    specs[f"{name}.weight"] = ((in_ch, out_ch, kernel), Init("normal", 0.0, 1.0 / np.sqrt(in_ch * 2)))
    specs[f"{name}.bias"] = ((out_ch,), BIAS)


def _qwen3_layers(specs: dict, prefix: str, cfg: dict, in_dim: int | None = None):
    """Qwen3 decoder layers: q/k RMSNorm on head_dim, SwiGLU MLP, no biases."""
    hidden, head_dim = cfg["hidden_size"], cfg["head_dim"]
    q_dim, kv_dim = cfg["num_attention_heads"] * head_dim, cfg["num_key_value_heads"] * head_dim
    ffn = cfg["intermediate_size"]
    for i in range(cfg["num_hidden_layers"]):
        p = f"{prefix}.layers.{i}"
        _linear(specs, f"{p}.self_attn.q_proj", q_dim, hidden)
        _linear(specs, f"{p}.self_attn.k_proj", kv_dim, hidden)
        _linear(specs, f"{p}.self_attn.v_proj", kv_dim, hidden)
        _linear(specs, f"{p}.self_attn.o_proj", hidden, q_dim, gain=0.5)
        specs[f"{p}.self_attn.q_norm.weight"] = ((head_dim,), NORM_WEIGHT)
        specs[f"{p}.self_attn.k_norm.weight"] = ((head_dim,), NORM_WEIGHT)
        _linear(specs, f"{p}.mlp.gate_proj", ffn, hidden)
        _linear(specs, f"{p}.mlp.up_proj", ffn, hidden)
        _linear(specs, f"{p}.mlp.down_proj", hidden, ffn, gain=0.5)
        specs[f"{p}.input_layernorm.weight"] = ((hidden,), NORM_WEIGHT)
        specs[f"{p}.post_attention_layernorm.weight"] = ((hidden,), NORM_WEIGHT)
    specs[f"{prefix}.norm.weight"] = ((hidden,), NORM_WEIGHT)


def talker_specs(talker: dict) -> dict:
    """`talker.*` tensors: talker LM, text projection, codec head and code predictor."""
    specs: dict = {}
    hidden, text_hidden = talker["hidden_size"], talker["text_hidden_size"]
    _qwen3_layers(specs, "talker.model", talker)
    specs["talker.model.codec_embedding.weight"] = ((talker["vocab_size"], hidden), EMBEDDING)
    specs["talker.model.text_embedding.weight"] = ((talker["text_vocab_size"], text_hidden), EMBEDDING)
    _linear(specs, "talker.text_projection.linear_fc1", text_hidden, text_hidden, bias=True)
    _linear(specs, "talker.text_projection.linear_fc2", hidden, text_hidden, bias=True)
    head = _fan_in((talker["vocab_size"], hidden))
    specs["talker.codec_head.weight"] = (
        (talker["vocab_size"], hidden),
        Init(head.kind, head.a, head.b, ((talker["codec_eos_token_id"], EOS_ROW_GAIN),)),
    )
    cp = talker["code_predictor_config"]
    _qwen3_layers(specs, "talker.code_predictor.model", cp)
    for g in range(cp["num_code_groups"] - 1):
        specs[f"talker.code_predictor.model.codec_embedding.{g}.weight"] = ((cp["vocab_size"], hidden), EMBEDDING)
        _linear(specs, f"talker.code_predictor.lm_head.{g}", cp["vocab_size"], cp["hidden_size"])
    if cp["hidden_size"] != hidden:
        _linear(specs, "talker.code_predictor.small_to_mtp_projection", cp["hidden_size"], hidden, bias=True)
    return specs


def speaker_encoder_specs(enc: dict) -> dict:
    """`speaker_encoder.*` tensors (ECAPA-TDNN), present in Base models only."""
    specs: dict = {}
    ch, kernels, scale = enc["enc_channels"], enc["enc_kernel_sizes"], enc["enc_res2net_scale"]
    _conv(specs, "speaker_encoder.blocks.0.conv", ch[0], enc["mel_dim"], kernels[0])
    for i in range(1, len(ch) - 1):
        p = f"speaker_encoder.blocks.{i}"
        _conv(specs, f"{p}.tdnn1.conv", ch[i], ch[i - 1], 1)
        for j in range(scale - 1):
            _conv(specs, f"{p}.res2net_block.blocks.{j}.conv", ch[i] // scale, ch[i] // scale, kernels[i])
        _conv(specs, f"{p}.tdnn2.conv", ch[i], ch[i], 1)
        _conv(specs, f"{p}.se_block.conv1", enc["enc_se_channels"], ch[i], 1)
        _conv(specs, f"{p}.se_block.conv2", ch[i], enc["enc_se_channels"], 1)
    _conv(specs, "speaker_encoder.mfa.conv", ch[-1], sum(ch[1:-1]), kernels[-1])
    _conv(specs, "speaker_encoder.asp.tdnn.conv", enc["enc_attention_channels"], ch[-1] * 3, 1)
    _conv(specs, "speaker_encoder.asp.conv", ch[-1], enc["enc_attention_channels"], 1)
    _conv(specs, "speaker_encoder.fc", enc["enc_dim"], ch[-1] * 2, 1)
    return specs


def model_specs(config: dict) -> dict:
    """All tensors of `model.safetensors` for a top-level config."""
    specs = talker_specs(config["talker_config"])
    if config["tts_model_type"] == "base":
        specs.update(speaker_encoder_specs(config["speaker_encoder_config"]))
    return specs


def _codebook(specs: dict, prefix: str, size: int, dim: int):
    # Codebook vector = embedding_sum / cluster_usage: both randomized, usage kept away from 0.
    specs[f"{prefix}.cluster_usage"] = ((size,), Init("uniform", 0.5, 2.0))
    specs[f"{prefix}.embedding_sum"] = ((size, dim), EMBEDDING)


def _snake(specs: dict, prefix: str, channels: int):
    # Stored in log space (SnakeBeta applies exp): alpha sets the frequency, beta the magnitude.
    specs[f"{prefix}.alpha"] = ((channels,), Init("normal", 0.0, 0.3))
    specs[f"{prefix}.beta"] = ((channels,), Init("normal", 0.0, 0.3))


def codec_decoder_specs(dec: dict) -> dict:
    """`decoder.*` tensors of the 12 Hz speech tokenizer (codes -> waveform)."""
    specs: dict = {}
    vq_dim, half = dec["codebook_dim"], dec["codebook_dim"] // 2
    for part in ("rvq_first", "rvq_rest"):
        p = f"decoder.quantizer.{part}"
        _conv(specs, f"{p}.input_proj", half, vq_dim, 1, bias=False)
        _conv(specs, f"{p}.output_proj", vq_dim, half, 1, bias=False)
        n_layers = (
            dec["num_semantic_quantizers"]
            if part == "rvq_first"
            else dec["num_quantizers"] - dec["num_semantic_quantizers"]
        )
        for i in range(n_layers):
            _codebook(specs, f"{p}.vq.layers.{i}._codebook", dec["codebook_size"], half)
    hidden, latent = dec["hidden_size"], dec["latent_dim"]
    _conv(specs, "decoder.pre_conv.conv", latent, vq_dim, 3)
    tf = "decoder.pre_transformer"
    head_dim = dec.get("head_dim", dec["hidden_size"] // dec["num_attention_heads"])  # the reference's rule
    q_dim = dec["num_attention_heads"] * head_dim
    kv_dim = dec["num_key_value_heads"] * head_dim
    for i in range(dec["num_hidden_layers"]):
        p = f"{tf}.layers.{i}"
        _linear(specs, f"{p}.self_attn.q_proj", q_dim, hidden)
        _linear(specs, f"{p}.self_attn.k_proj", kv_dim, hidden)
        _linear(specs, f"{p}.self_attn.v_proj", kv_dim, hidden)
        _linear(specs, f"{p}.self_attn.o_proj", hidden, q_dim)
        _linear(specs, f"{p}.mlp.gate_proj", dec["intermediate_size"], hidden)
        _linear(specs, f"{p}.mlp.up_proj", dec["intermediate_size"], hidden)
        _linear(specs, f"{p}.mlp.down_proj", hidden, dec["intermediate_size"])
        specs[f"{p}.input_layernorm.weight"] = ((hidden,), NORM_WEIGHT)
        specs[f"{p}.post_attention_layernorm.weight"] = ((hidden,), NORM_WEIGHT)
        specs[f"{p}.self_attn_layer_scale.scale"] = ((hidden,), Init("uniform", 0.05, 0.3))
        specs[f"{p}.mlp_layer_scale.scale"] = ((hidden,), Init("uniform", 0.05, 0.3))
    specs[f"{tf}.norm.weight"] = ((hidden,), NORM_WEIGHT)
    _linear(specs, f"{tf}.input_proj", hidden, latent, bias=True)
    _linear(specs, f"{tf}.output_proj", latent, hidden, bias=True)
    for i, _ in enumerate(dec["upsampling_ratios"]):
        p = f"decoder.upsample.{i}"
        _conv_transpose(specs, f"{p}.0.conv", latent, latent, dec["upsampling_ratios"][i])
        specs[f"{p}.1.gamma"] = ((latent,), Init("uniform", 0.1, 0.5))
        _conv(specs, f"{p}.1.dwconv.conv", latent, 1, 7)
        specs[f"{p}.1.norm.weight"] = ((latent,), NORM_WEIGHT)
        specs[f"{p}.1.norm.bias"] = ((latent,), BIAS)
        _linear(specs, f"{p}.1.pwconv1", 4 * latent, latent, bias=True)
        _linear(specs, f"{p}.1.pwconv2", latent, 4 * latent, bias=True)
    width = dec["decoder_dim"]
    _conv(specs, "decoder.decoder.0.conv", width, latent, 7)
    for i, rate in enumerate(dec["upsample_rates"]):
        p = f"decoder.decoder.{i + 1}.block"
        out = width // 2
        _snake(specs, f"{p}.0", width)
        _conv_transpose(specs, f"{p}.1.conv", width, out, 2 * rate)
        for j in range(3):
            u = f"{p}.{j + 2}"
            _snake(specs, f"{u}.act1", out)
            _conv(specs, f"{u}.conv1.conv", out, out, 7, gain=0.5)
            _snake(specs, f"{u}.act2", out)
            _conv(specs, f"{u}.conv2.conv", out, out, 1, gain=0.5)
        width = out
    n = len(dec["upsample_rates"])
    _snake(specs, f"decoder.decoder.{n + 1}", width)
    _conv(specs, f"decoder.decoder.{n + 2}.conv", 1, width, 7, gain=CODEC_OUTPUT_GAIN)
    return specs


def mimi_encoder_specs(enc: dict) -> dict:
    """`encoder.*` tensors (the Mimi audio encoder, used only to encode reference audio)."""
    specs: dict = {}
    p = "encoder.encoder.layers"
    filters, k = enc["num_filters"], enc["kernel_size"]
    _conv(specs, f"{p}.0.conv", filters, enc["audio_channels"], k)
    idx, ch = 1, filters
    for ratio in reversed(enc["upsampling_ratios"]):
        for _ in range(enc["num_residual_layers"]):
            _conv(specs, f"{p}.{idx}.block.1.conv", ch // enc["compress"], ch, enc["residual_kernel_size"])
            _conv(specs, f"{p}.{idx}.block.3.conv", ch, ch // enc["compress"], 1)
            idx += 1
        _conv(specs, f"{p}.{idx + 1}.conv", ch * 2, ch, ratio * 2)  # after an ELU
        idx, ch = idx + 2, ch * 2
    _conv(specs, f"{p}.{idx + 1}.conv", enc["hidden_size"], ch, enc["last_kernel_size"])
    hidden, ffn = enc["hidden_size"], enc["intermediate_size"]
    q_dim = enc["num_attention_heads"] * enc["head_dim"]
    for i in range(enc["num_hidden_layers"]):
        t = f"encoder.encoder_transformer.layers.{i}"
        _linear(specs, f"{t}.self_attn.q_proj", q_dim, hidden)
        _linear(specs, f"{t}.self_attn.k_proj", q_dim, hidden)
        _linear(specs, f"{t}.self_attn.v_proj", q_dim, hidden)
        _linear(specs, f"{t}.self_attn.o_proj", hidden, q_dim)
        _linear(specs, f"{t}.mlp.fc1", ffn, hidden)
        _linear(specs, f"{t}.mlp.fc2", hidden, ffn)
        for norm in ("input_layernorm", "post_attention_layernorm"):
            specs[f"{t}.{norm}.weight"] = ((hidden,), NORM_WEIGHT)
            specs[f"{t}.{norm}.bias"] = ((hidden,), BIAS)
        specs[f"{t}.self_attn_layer_scale.scale"] = ((hidden,), Init("uniform", 0.05, 0.3))
        specs[f"{t}.mlp_layer_scale.scale"] = ((hidden,), Init("uniform", 0.05, 0.3))
    _conv(specs, "encoder.downsample.conv", hidden, hidden, 2 * enc["compress"], bias=False)
    dim, n_sem = enc["codebook_dim"], enc["num_semantic_quantizers"]
    for part, n_layers in (("semantic", n_sem), ("acoustic", enc["num_quantizers"] - n_sem)):
        q = f"encoder.quantizer.{part}_residual_vector_quantizer"
        for i in range(n_layers):
            c = f"{q}.layers.{i}.codebook"
            specs[f"{c}.initialized"] = ((1,), Init("const", 1.0))
            specs[f"{c}.cluster_usage"] = ((enc["codebook_size"],), Init("uniform", 0.5, 2.0))
            specs[f"{c}.embed_sum"] = ((enc["codebook_size"], dim), EMBEDDING)
        _conv(specs, f"{q}.input_proj", dim, hidden, 1, bias=False)
        _conv(specs, f"{q}.output_proj", hidden, dim, 1, bias=False)
    return specs


def codec_specs(codec: dict) -> dict:
    """All tensors of `speech_tokenizer/model.safetensors`."""
    specs = mimi_encoder_specs(codec["encoder_config"])
    specs.update(codec_decoder_specs(codec["decoder_config"]))
    return specs


def draw(name: str, shape: tuple[int, ...], init: Init, seed: int) -> np.ndarray:
    """One tensor's values, float32, from a generator seeded by (seed, name)."""
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    rng = np.random.Generator(np.random.PCG64(int.from_bytes(digest[:16], "little")))
    if init.kind == "normal":
        values = rng.standard_normal(shape, dtype=np.float32) * np.float32(init.b) + np.float32(init.a)
    elif init.kind == "uniform":
        values = rng.uniform(init.a, init.b, size=shape).astype(np.float32)
    elif init.kind == "const":
        values = np.full(shape, init.a, dtype=np.float32)
    else:
        raise ValueError(f"unknown init kind {init.kind!r} for {name}")
    for row, gain in init.row_gains:
        values[row] *= np.float32(gain)
    return values
