"""Model configurations for synthetic Qwen3-TTS checkpoints.

The `0.6b` and `1.7b` presets carry the published shapes of the official 12 Hz models; `tiny`
keeps every structural feature (16 codebooks, real Qwen text vocabulary, all codec stages, the
80 ms / 1920-sample frame, the 72-frame attention window) at toy widths so tests stay fast.
`tiny-proj` differs from `tiny` only in a talker hidden size unequal to the code predictor's,
which switches on `small_to_mtp_projection` as on the 1.7B. `tiny-f32` is stored in float32 (as
fine-tunes often are) and its codec decoder config has no head_dim, so the reference's default
rule (hidden_size // num_attention_heads) decides the codec's heads.
"""

from __future__ import annotations

import copy

from .tokenizer_files import IM_END_ID, IM_START_ID, TTS_BOS_ID, TTS_EOD_ID, TTS_PAD_ID, VOCAB_SIZE_PADDED

MODEL_TYPES = ("custom_voice", "voice_design", "base")

# Codec control ids and language/speaker ids of the official 12 Hz checkpoints.
CODEC_IDS = {
    "codec_pad_id": 2148,
    "codec_bos_id": 2149,
    "codec_eos_token_id": 2150,
    "codec_think_id": 2154,
    "codec_nothink_id": 2155,
    "codec_think_bos_id": 2156,
    "codec_think_eos_id": 2157,
}
LANGUAGE_IDS = {
    "chinese": 2055,
    "english": 2050,
    "german": 2053,
    "italian": 2070,
    "portuguese": 2071,
    "spanish": 2054,
    "japanese": 2058,
    "korean": 2064,
    "french": 2061,
    "russian": 2069,
    "beijing_dialect": 2074,
    "sichuan_dialect": 2062,
}
SPEAKER_IDS = {
    "serena": 3066,
    "vivian": 3065,
    "uncle_fu": 3010,
    "ryan": 3061,
    "aiden": 2861,
    "ono_anna": 2873,
    "sohee": 2864,
    "eric": 2875,
    "dylan": 2878,
}
SPEAKER_DIALECTS = {"eric": "sichuan_dialect", "dylan": "beijing_dialect"}

GENERATION_CONFIG = {
    "do_sample": True,
    "repetition_penalty": 1.05,
    "temperature": 0.9,
    "top_p": 1.0,
    "top_k": 50,
    "subtalker_dosample": True,
    "subtalker_temperature": 0.9,
    "subtalker_top_k": 50,
    "subtalker_top_p": 1.0,
    "max_new_tokens": 8192,
}


def _decoder_lm(hidden, ffn, layers, heads, kv_heads, head_dim, theta, max_pos):
    return {
        "hidden_size": hidden,
        "intermediate_size": ffn,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": theta,
        "max_position_embeddings": max_pos,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "use_cache": True,
        "use_sliding_window": False,
    }


def _talker(hidden, ffn, layers, head_dim, text_hidden, cp):
    quarter = head_dim // 2
    # M-RoPE sections over the rotated half-dims, in the published 24:20:20 proportion.
    sections = [quarter - 2 * (quarter * 20 // 64), quarter * 20 // 64, quarter * 20 // 64]
    talker = _decoder_lm(
        hidden, ffn, layers, 16 if hidden >= 1024 else 4, 8 if hidden >= 1024 else 2, head_dim, 1000000, 32768
    )
    talker.update(
        {
            "vocab_size": 3072,
            "num_code_groups": 16,
            "text_hidden_size": text_hidden,
            "text_vocab_size": VOCAB_SIZE_PADDED,
            "position_id_per_seconds": 13,
            "rope_scaling": {"rope_type": "default", "mrope_section": sections, "interleaved": True},
            "code_predictor_config": cp,
            **CODEC_IDS,
        }
    )
    return talker


def _code_predictor(hidden, ffn, layers, head_dim):
    cp = _decoder_lm(
        hidden, ffn, layers, 16 if hidden >= 1024 else 4, 8 if hidden >= 1024 else 2, head_dim, 1000000, 65536
    )
    cp.update({"vocab_size": 2048, "num_code_groups": 16, "max_window_layers": layers, "layer_types": None})
    return cp


def _codec(latent, codebook_dim, hidden, ffn, layers, heads, decoder_dim, encoder):
    return {
        "architectures": ["Qwen3TTSTokenizerV2Model"],
        "model_type": "qwen3_tts_tokenizer_12hz",
        "encoder_valid_num_quantizers": 16,
        "input_sample_rate": 24000,
        "output_sample_rate": 24000,
        "decode_upsample_rate": 1920,
        "encode_downsample_rate": 1920,
        "decoder_config": {
            "attention_bias": False,
            "latent_dim": latent,
            "codebook_dim": codebook_dim,
            "codebook_size": 2048,
            "decoder_dim": decoder_dim,
            "hidden_act": "silu",
            "hidden_size": hidden,
            "intermediate_size": ffn,
            "layer_scale_initial_scale": 0.01,
            "max_position_embeddings": 8000,
            "head_dim": 64 if hidden >= 512 else 16,
            "num_attention_heads": heads,
            "num_hidden_layers": layers,
            "num_key_value_heads": heads,
            "num_quantizers": 16,
            "num_semantic_quantizers": 1,
            "rms_norm_eps": 1e-5,
            "rope_theta": 10000,
            "semantic_codebook_size": 4096,
            "sliding_window": 72,
            "upsample_rates": [8, 5, 4, 3],
            "upsampling_ratios": [2, 2],
            "vector_quantization_hidden_dimension": codebook_dim,
        },
        "encoder_config": encoder,
    }


def _mimi_encoder(filters, hidden, layers, heads, head_dim, ffn, codebook_dim):
    return {
        "_frame_rate": 12.5,
        "audio_channels": 1,
        "num_filters": filters,
        "kernel_size": 7,
        "residual_kernel_size": 3,
        "last_kernel_size": 3,
        "num_residual_layers": 1,
        "dilation_growth_rate": 2,
        "compress": 2,
        "upsampling_ratios": [8, 6, 5, 4],
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "head_dim": head_dim,
        "intermediate_size": ffn,
        "hidden_act": "gelu",
        "norm_eps": 1e-5,
        "layer_scale_initial_scale": 0.01,
        "rope_theta": 10000.0,
        "max_position_embeddings": 8000,
        "sliding_window": 250,
        "num_quantizers": 32,
        "num_semantic_quantizers": 1,
        "codebook_size": 2048,
        "codebook_dim": codebook_dim,
        "vector_quantization_hidden_dimension": codebook_dim,
        "pad_mode": "constant",
        "use_causal_conv": True,
        "use_conv_shortcut": False,
        "sampling_rate": 24000,
        "trim_right_ratio": 1.0,
        "upsample_groups": hidden,
        "use_streaming": False,
    }


def _speaker_encoder(enc_dim, channels, attention, se):
    return {
        "mel_dim": 128,
        "enc_dim": enc_dim,
        "enc_channels": channels,
        "enc_kernel_sizes": [5, 3, 3, 3, 1],
        "enc_dilations": [1, 2, 3, 4, 1],
        "enc_attention_channels": attention,
        "enc_res2net_scale": 8,
        "enc_se_channels": se,
        "sample_rate": 24000,
    }


_TINY_CODEC = _codec(64, 32, 32, 64, 2, 2, 48, _mimi_encoder(4, 32, 1, 2, 16, 64, 16))


def _without_head_dim(codec: dict, heads: int) -> dict:
    """A codec config whose decoder has `heads` heads and no head_dim key (the reference then
    uses hidden_size // num_attention_heads)."""
    codec = copy.deepcopy(codec)
    decoder = codec["decoder_config"]
    del decoder["head_dim"]
    decoder["num_attention_heads"] = decoder["num_key_value_heads"] = heads
    return codec


_REAL_CODEC = _codec(1024, 512, 512, 1024, 8, 16, 1536, _mimi_encoder(64, 512, 8, 8, 64, 2048, 256))

PRESETS = {
    "tiny": {
        "size_tag": "tiny",
        "talker": _talker(64, 128, 2, 16, 16, _code_predictor(64, 128, 2, 16)),
        "speaker_encoder": _speaker_encoder(64, [32, 32, 32, 32, 96], 16, 16),
        "codec": _TINY_CODEC,
    },
    "tiny-proj": {
        "size_tag": "tiny",
        "talker": _talker(96, 128, 2, 16, 16, _code_predictor(64, 128, 2, 16)),
        "speaker_encoder": _speaker_encoder(96, [32, 32, 32, 32, 96], 16, 16),
        "codec": _TINY_CODEC,
    },
    "tiny-f32": {  # an F32 fine-tune whose codec config omits head_dim: 4 heads of 32 // 4 = 8
        "size_tag": "tiny",
        "talker": _talker(64, 128, 2, 16, 16, _code_predictor(64, 128, 2, 16)),
        "speaker_encoder": _speaker_encoder(64, [32, 32, 32, 32, 96], 16, 16),
        "codec": _without_head_dim(_TINY_CODEC, 4),
        "dtype": "float32",
    },
    "0.6b": {
        "size_tag": "0b6",
        "talker": _talker(1024, 3072, 28, 128, 2048, _code_predictor(1024, 3072, 5, 128)),
        "speaker_encoder": _speaker_encoder(1024, [512, 512, 512, 512, 1536], 128, 128),
        "codec": _REAL_CODEC,
    },
    "1.7b": {
        "size_tag": "1b7",
        "talker": _talker(2048, 6144, 28, 128, 2048, _code_predictor(1024, 3072, 5, 128)),
        "speaker_encoder": _speaker_encoder(2048, [512, 512, 512, 512, 1536], 128, 128),
        "codec": _REAL_CODEC,
    },
}


def model_config(preset: str, model_type: str) -> dict:
    """The top-level `config.json` of a checkpoint of this preset and model type."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    if model_type not in MODEL_TYPES:
        raise ValueError(f"unknown model type {model_type!r}; choose one of {list(MODEL_TYPES)}")
    spec = PRESETS[preset]
    talker = copy.deepcopy(spec["talker"])
    talker["codec_language_id"] = dict(LANGUAGE_IDS)
    custom = model_type == "custom_voice"
    talker["spk_id"] = dict(SPEAKER_IDS) if custom else {}
    talker["spk_is_dialect"] = {name: SPEAKER_DIALECTS.get(name, False) for name in SPEAKER_IDS} if custom else {}
    return {
        "architectures": ["Qwen3TTSForConditionalGeneration"],
        "model_type": "qwen3_tts",
        "tokenizer_type": "qwen3_tts_tokenizer_12hz",
        "tts_model_size": spec["size_tag"],
        "tts_model_type": model_type,
        "im_start_token_id": IM_START_ID,
        "im_end_token_id": IM_END_ID,
        "tts_pad_token_id": TTS_PAD_ID,
        "tts_bos_token_id": TTS_BOS_ID,
        "tts_eos_token_id": TTS_EOD_ID,
        "speaker_encoder_config": copy.deepcopy(spec["speaker_encoder"]),
        "talker_config": talker,
    }


def codec_config(preset: str) -> dict:
    """The `speech_tokenizer/config.json` of this preset."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    return copy.deepcopy(PRESETS[preset]["codec"])


def default_dtype(preset: str) -> str:
    """The storage type a preset's checkpoints get unless told (official checkpoints: bfloat16)."""
    return PRESETS[preset].get("dtype", "bfloat16")
