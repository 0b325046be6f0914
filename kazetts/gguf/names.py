"""GGUF tensor and key names shared by the converter and the runtime.

The talker file (arch ``qwen3tts``) and the mmproj file (arch ``clip``) follow the layout that
llama.cpp's own converter writes (llama-cpp-python 0.3.36 vendored llama.cpp). PyPI ``gguf``
0.19 does not know the ``a.gen.*`` names, so they are plain strings here. Keys under
``kazetts.`` are ours: llama.cpp does not write them and ignores them.
"""

from __future__ import annotations

TALKER_ARCH = "qwen3tts"
MMPROJ_ARCH = "clip"

# ---- talker (qwen3tts) -------------------------------------------------------------------
TOKEN_EMBD = "token_embd.weight"  # [P(text ids) | codec rows], n_embd x (text + codec vocab)
OUTPUT = "output.weight"  # codec_head
OUTPUT_NORM = "output_norm.weight"

# HF Qwen3 layer key -> llama.cpp blk.N.<name>
TALKER_LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}

# ---- code predictor (a.gen.code.*) ---------------------------------------------------------
CODE_PREFIX = "a.gen.code"
CODE_EMBD = "a.gen.code.embd.weight"  # 15 input tables stacked: n_embd x 2048 x 15
CODE_HEAD = "a.gen.code.head.weight"  # 15 heads stacked
CODE_OUT_EMBD = "a.gen.code.out_embd.weight"  # talker codec_embedding (CB0 table)
CODE_PROJ_IN = "a.gen.code.proj_in"  # small_to_mtp_projection (1.7B), .weight / .bias
CODE_OUTPUT_NORM = "a.gen.code.output_norm.weight"
CODE_LAYER = {
    "input_layernorm.weight": "ln1.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_out.weight",
    "post_attention_layernorm.weight": "ln2.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}

# ---- codec decoder (a.gen.wav.*) -----------------------------------------------------------
WAV = "a.gen.wav"
WAV_TFM_LAYER = {
    "input_layernorm.weight": "ln1.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_out.weight",
    "self_attn_layer_scale.scale": "ls1.weight",
    "post_attention_layernorm.weight": "ln2.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "mlp_layer_scale.scale": "ls2.weight",
}
WAV_UP = {  # decoder.upsample.N.<key> -> a.gen.wav.up.blk.N.<name>
    "0.conv.weight": "conv.weight",
    "0.conv.bias": "conv.bias",
    "1.dwconv.conv.weight": "dwconv.weight",
    "1.dwconv.conv.bias": "dwconv.bias",
    "1.norm.weight": "norm.weight",
    "1.norm.bias": "norm.bias",
    "1.pwconv1.weight": "pw1.weight",
    "1.pwconv1.bias": "pw1.bias",
    "1.pwconv2.weight": "pw2.weight",
    "1.pwconv2.bias": "pw2.bias",
    "1.gamma": "gamma",
}

# ---- speaker encoder (a.*, Base models only) -----------------------------------------------
# HF prefix (after "speaker_encoder.") -> llama.cpp prefix; {bid} is the ECAPA block index.
SPK_FIXED = {
    "blocks.0.conv": "a.conv1d.0",
    "mfa.conv": "a.conv_out",
    "asp.conv": "a.asp_attn",
    "asp.tdnn.conv": "a.asp_tdnn",
    "fc": "mm.a.fc",
}
SPK_BLOCK = {
    "tdnn1.conv": "a.blk.{bid}.conv_pw1",
    "tdnn2.conv": "a.blk.{bid}.conv_pw2",
    "se_block.conv1": "a.blk.{bid}.se_conv1",
    "se_block.conv2": "a.blk.{bid}.se_conv2",
    "res2net_block.blocks.{xid}.conv": "a.blk.{bid}.res2.{xid}",
}

# ---- codec encoder (kazetts.enc.*, Base models only; llama.cpp neither writes nor reads them) ---
# The 12 Hz tokenizer's encoder (transformers' MimiModel encoder side), for reference audio.
ENC = "kazetts.enc"
ENC_SEANET = "kazetts.enc.seanet"  # + .{layer}[.block.{j}].{weight,bias}: HF encoder.encoder.layers.*
ENC_DOWN = "kazetts.enc.down.weight"  # k4/s2 replicate-padded downsample, no bias
ENC_TFM_LAYER = {  # encoder.encoder_transformer.layers.N.<key> -> kazetts.enc.tfm.blk.N.<name>
    "input_layernorm.weight": "ln1.weight",
    "input_layernorm.bias": "ln1.bias",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_out.weight",
    "self_attn_layer_scale.scale": "ls1.weight",
    "post_attention_layernorm.weight": "ln2.weight",
    "post_attention_layernorm.bias": "ln2.bias",
    "mlp.fc1.weight": "ffn_up.weight",
    "mlp.fc2.weight": "ffn_down.weight",
    "mlp_layer_scale.scale": "ls2.weight",
}
# RVQ encode side: 1x1 input projections [dim, hidden] and codebooks embed_sum / clamp(usage, 1e-5)
# (semantic [size, dim]; acoustic [n_codebooks - 1, size, dim], only the codebooks the model uses)
ENC_SEM_PROJ = "kazetts.enc.quant.semantic.in_proj.weight"
ENC_SEM_CODEBOOK = "kazetts.enc.quant.semantic.codebook.weight"
ENC_AC_PROJ = "kazetts.enc.quant.acoustic.in_proj.weight"
ENC_AC_CODEBOOK = "kazetts.enc.quant.acoustic.codebook.weight"

# ---- llama.cpp clip keys (not in PyPI gguf 0.19) ---------------------------------------------
CLIP_HAS_AUDIO = "clip.has_audio_encoder"
CLIP_HAS_GEN_AUDIO = "clip.has_gen_audio_encoder"
PROJECTOR_SPKENC = "qwen3tts_spkenc"
PROJECTOR_GEN = "qwen3tts_gen"

# ---- kazetts extra keys ---------------------------------------------------------------------
K = "kazetts"
K_VERSION = "kazetts.format_version"
K_MODEL_TYPE = "kazetts.model_type"  # base | custom_voice | voice_design
K_MODEL_SIZE = "kazetts.model_size"  # tts_model_size from config.json
K_SPEAKERS = "kazetts.speakers"  # CustomVoice speaker names
K_SPEAKER_IDS = "kazetts.speaker_ids"  # their codec ids
K_SPEAKER_DIALECTS = "kazetts.speaker_dialects"  # "" or the dialect language name
K_LANGUAGES = "kazetts.languages"  # language names (dialects included)
K_LANGUAGE_IDS = "kazetts.language_ids"
K_CODEC = "kazetts.codec."  # + pad_id, bos_id, eos_id, think_id, ...
K_TEXT = "kazetts.text."  # + im_start_id, tts_pad_id, text_vocab_size, ...
K_TALKER = "kazetts.talker."  # talker hparams llama.cpp does not store
K_CODE = "kazetts.code."  # code predictor hparams
K_WAV = "kazetts.wav."  # codec decoder hparams
K_SPK = "kazetts.spk."  # speaker encoder hparams (Base)
K_SOURCE_SHA256 = "kazetts.source_sha256."  # + config.json, speech_tokenizer/config.json: the source's configs
K_CHECKPOINT_SHA256 = "kazetts.checkpoint_sha256"  # the source's configs and weights: the same in both files of a pair
K_ENC = "kazetts.enc."  # codec encoder hparams (Base): encoder_config + below
K_ENC_CODEBOOKS = "kazetts.enc.n_codebooks"  # encoder_valid_num_quantizers (16)
K_ENC_HOP = "kazetts.enc.downsample_rate"  # encode_downsample_rate (1920 samples a frame)
K_ENC_RATE = "kazetts.enc.input_sample_rate"  # 24000

FORMAT_VERSION = 1
