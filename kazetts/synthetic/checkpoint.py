"""Writes a synthetic Qwen3-TTS checkpoint directory in the official Hugging Face layout.

numpy only (no torch), streamed tensor by tensor so the 1.7B preset never sits in memory
whole, byte-for-byte deterministic for a given preset, model type, seed and dtype.
"""

from __future__ import annotations

import json
import os
import pathlib
import struct
from typing import Callable

import numpy as np

from . import presets, weights
from .tokenizer_files import write_tokenizer_files

DTYPES = {"float32": "F32", "bfloat16": "BF16"}

# The feature extractor config the speech tokenizer loader asks for (raw 24 kHz mono audio).
SPEECH_PREPROCESSOR = {
    "chunk_length_s": None,
    "feature_extractor_type": "EncodecFeatureExtractor",
    "feature_size": 1,
    "overlap": None,
    "padding_side": "right",
    "padding_value": 0.0,
    "return_attention_mask": True,
    "sampling_rate": 24000,
}


def to_bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    # NaN stays NaN (rounding would carry into the exponent): keep the top half, force a quiet bit.
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    rounded = np.where(nan, (bits >> np.uint32(16)) | np.uint32(0x0040), rounded)
    return rounded.astype(np.uint16)


def _encode(values: np.ndarray, dtype: str) -> bytes:
    if dtype == "BF16":
        return to_bfloat16_bits(values).astype("<u2").tobytes()
    return values.astype("<f4").tobytes()


def write_safetensors(
    path: pathlib.Path, specs: dict, seed: int, dtype: str, progress: Callable[[str], None] | None = None
) -> None:
    """Streams every tensor of `specs` ({name: (shape, Init)}) into a .safetensors file."""
    itemsize = 2 if dtype == "BF16" else 4
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    names = sorted(specs)
    for name in names:
        shape = specs[name][0]
        size = int(np.prod(shape)) * itemsize
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    tmp = path.with_name(path.name + ".partial")
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(blob)))
            f.write(blob)
            for i, name in enumerate(names):
                shape, init = specs[name]
                f.write(_encode(weights.draw(name, shape, init, seed), dtype))
                if progress and (i % 50 == 0 or i == len(names) - 1):
                    progress(f"{path.parent.name}/{path.name}: {i + 1}/{len(names)} tensors")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _write_json(path: pathlib.Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def make_checkpoint(
    preset: str,
    out_dir: pathlib.Path | str,
    model_type: str = "custom_voice",
    seed: int = 0,
    dtype: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[pathlib.Path]:
    """Writes the checkpoint (in `dtype`, default: the preset's); returns the files written.
    Raises ValueError on bad arguments."""
    config = presets.model_config(preset, model_type)  # validates preset and model type
    dtype = dtype or presets.default_dtype(preset)
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {list(DTYPES)}")
    codec = presets.codec_config(preset)
    out_dir = pathlib.Path(out_dir)
    speech_dir = out_dir / "speech_tokenizer"
    speech_dir.mkdir(parents=True, exist_ok=True)
    _write_json(out_dir / "config.json", config)
    _write_json(out_dir / "generation_config.json", presets.GENERATION_CONFIG)
    write_tokenizer_files(out_dir)
    _write_json(speech_dir / "config.json", codec)
    _write_json(speech_dir / "preprocessor_config.json", SPEECH_PREPROCESSOR)
    write_safetensors(out_dir / "model.safetensors", weights.model_specs(config), seed, DTYPES[dtype], progress)
    write_safetensors(speech_dir / "model.safetensors", weights.codec_specs(codec), seed, DTYPES[dtype], progress)
    return sorted(p for p in out_dir.rglob("*") if p.is_file())


REQUIRED_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer_config.json",
    "vocab.json",
    "merges.txt",
    "speech_tokenizer/config.json",
    "speech_tokenizer/model.safetensors",
    "speech_tokenizer/preprocessor_config.json",
)


def missing_files(checkpoint_dir: pathlib.Path | str) -> list[str]:
    """Files of the official layout that `checkpoint_dir` lacks (empty when complete)."""
    root = pathlib.Path(checkpoint_dir)
    return [name for name in REQUIRED_FILES if not (root / name).is_file()]
