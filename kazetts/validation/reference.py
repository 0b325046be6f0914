"""Loads the official PyTorch reference (`qwen-tts` 0.1.1), 12 Hz path only.

Runs only in the reference environment (`make ref`). `qwen_tts/__init__.py` and
`qwen_tts/core/__init__.py` import the 25 Hz tokenizer, which needs torchaudio, sox and
onnxruntime (torchaudio drags a multi-GB CUDA torch). The 12 Hz path never uses them, so we
register the two parent packages as bare namespaces and import the 12 Hz modules directly.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types


def _bare_package(name: str) -> types.ModuleType:
    """Register `name` as a package whose __init__ is not executed."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None:
        raise ImportError(f"{name} is not installed: run `make ref` to create the reference environment")
    module = types.ModuleType(name)
    module.__path__ = list(spec.submodule_search_locations)
    module.__spec__ = spec
    sys.modules[name] = module
    return module


class _NoV1Tokenizer:
    """Stands in for the 25 Hz tokenizer classes, which the 12 Hz models never load."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("the 25 Hz speech tokenizer is not available in the kazetts reference environment")


def load_reference():
    """Import the 12 Hz reference modules; returns a namespace with the classes we use."""
    _bare_package("qwen_tts")
    core = _bare_package("qwen_tts.core")
    tok_cfg = importlib.import_module("qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2")
    tok_mod = importlib.import_module("qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2")
    core.Qwen3TTSTokenizerV2Config = tok_cfg.Qwen3TTSTokenizerV2Config
    core.Qwen3TTSTokenizerV2Model = tok_mod.Qwen3TTSTokenizerV2Model
    core.Qwen3TTSTokenizerV1Config = _NoV1Tokenizer
    core.Qwen3TTSTokenizerV1Model = _NoV1Tokenizer
    cfg = importlib.import_module("qwen_tts.core.models.configuration_qwen3_tts")
    model = importlib.import_module("qwen_tts.core.models.modeling_qwen3_tts")
    return types.SimpleNamespace(
        Qwen3TTSConfig=cfg.Qwen3TTSConfig,
        Qwen3TTSForConditionalGeneration=model.Qwen3TTSForConditionalGeneration,
        Qwen3TTSTokenizerV2Config=tok_cfg.Qwen3TTSTokenizerV2Config,
        Qwen3TTSTokenizerV2Model=tok_mod.Qwen3TTSTokenizerV2Model,
        modeling=model,
        tokenizer_modeling=tok_mod,
    )


def load_strict(checkpoint_dir, attn_implementation: str = "eager"):
    """Build the reference model and its 12 Hz codec from a checkpoint directory in float32,
    loading both state dicts with strict key matching (a missing or extra tensor raises).

    Returns (model, codec); `codec` is the Qwen3TTSTokenizerV2Model (encoder + decoder)."""
    import json
    import pathlib

    from safetensors.torch import load_file

    ref = load_reference()
    root = pathlib.Path(checkpoint_dir)
    config = ref.Qwen3TTSConfig(**json.loads((root / "config.json").read_text()))
    config._attn_implementation = attn_implementation
    config.talker_config._attn_implementation = attn_implementation
    config.talker_config.code_predictor_config._attn_implementation = attn_implementation
    model = ref.Qwen3TTSForConditionalGeneration(config)
    model.load_state_dict(_float32(load_file(root / "model.safetensors")), strict=True)
    codec_config = ref.Qwen3TTSTokenizerV2Config(**json.loads((root / "speech_tokenizer/config.json").read_text()))
    codec_config._attn_implementation = attn_implementation
    codec_config.decoder_config._attn_implementation = attn_implementation
    codec = ref.Qwen3TTSTokenizerV2Model(codec_config)
    codec.load_state_dict(_float32(load_file(root / "speech_tokenizer/model.safetensors")), strict=True)
    model.generation_config.pad_token_id = config.talker_config.codec_pad_id
    return model.float().eval(), codec.float().eval()


def _float32(state: dict) -> dict:
    return {name: tensor.float() for name, tensor in state.items()}
