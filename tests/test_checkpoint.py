"""Synthetic checkpoints: determinism, official layout, safetensors encoding, weight sanity,
CLI errors, and (in the reference environment) shapes and strict loading against qwen-tts."""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO, run_script
from kazetts.synthetic import presets, weights
from kazetts.synthetic.checkpoint import make_checkpoint, missing_files, to_bfloat16_bits, write_safetensors

# Files of an official Qwen3-TTS 12 Hz checkpoint directory as the loaders read them
# (tokenizer.json is the fast-tokenizer file the synthetic checkpoints also ship).
OFFICIAL_FILES = sorted(
    [
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer_config.json",
        "vocab.json",
        "merges.txt",
        "tokenizer.json",
        "speech_tokenizer/config.json",
        "speech_tokenizer/model.safetensors",
        "speech_tokenizer/preprocessor_config.json",
    ]
)
MODEL_FILE = "model.safetensors"
CODEC_FILE = "speech_tokenizer/model.safetensors"


# --------------------------------------------------------------------------- helpers


def file_list(root: pathlib.Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def read_header(path: pathlib.Path) -> tuple[dict, int]:
    """The safetensors JSON header and the offset where the data section starts."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    return header, 8 + length


def read_tensors(path: pathlib.Path) -> dict[str, np.ndarray]:
    """A minimal numpy safetensors reader (F32 and BF16), values as float32."""
    header, start = read_header(path)
    data = path.read_bytes()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        raw = data[start + a : start + b]
        if info["dtype"] == "BF16":
            values = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << np.uint32(16)).view(np.float32)
        elif info["dtype"] == "F32":
            values = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        else:
            raise AssertionError(f"{name}: unexpected dtype {info['dtype']}")
        out[name] = values.reshape(info["shape"])
    return out


def bits_to_f32(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


# --------------------------------------------------------------------------- determinism, layout


def test_same_seed_is_byte_identical_and_seed_changes_weights(tiny_checkpoint, tmp_path):
    first = tiny_checkpoint("tiny", "custom_voice", 0)
    again = tmp_path / "again"
    written = make_checkpoint("tiny", again, "custom_voice", 0)
    assert sorted(p.relative_to(again).as_posix() for p in written) == file_list(again)
    assert file_list(first) == file_list(again)
    for name in file_list(first):
        assert (first / name).read_bytes() == (again / name).read_bytes(), f"{name} differs between two builds"

    other = tmp_path / "seed1"
    make_checkpoint("tiny", other, "custom_voice", 1)
    assert file_list(other) == file_list(first)
    assert (other / MODEL_FILE).read_bytes() != (first / MODEL_FILE).read_bytes()
    assert (other / CODEC_FILE).read_bytes() != (first / CODEC_FILE).read_bytes()
    assert (other / "config.json").read_bytes() == (first / "config.json").read_bytes()
    assert (other / "speech_tokenizer/config.json").read_bytes() == (
        first / "speech_tokenizer/config.json"
    ).read_bytes()
    # Same names and shapes, different values in every (multi-element, random) tensor.
    a, b = read_tensors(first / MODEL_FILE), read_tensors(other / MODEL_FILE)
    assert a.keys() == b.keys()
    same = [n for n in a if a[n].size > 1 and np.array_equal(a[n], b[n])]
    assert same == [], f"tensors unchanged by the seed: {same[:5]}"


def test_tensor_values_do_not_depend_on_other_tensors(tiny_checkpoint):
    # Base adds speaker_encoder.*; every talker tensor must keep its values.
    cv = read_tensors(tiny_checkpoint("tiny", "custom_voice", 0) / MODEL_FILE)
    base = read_tensors(tiny_checkpoint("tiny", "base", 0) / MODEL_FILE)
    assert set(cv) < set(base)
    for name in cv:
        assert np.array_equal(cv[name], base[name]), name


def test_official_layout(tiny_checkpoint, tmp_path):
    ckpt = tiny_checkpoint("tiny", "custom_voice", 0)
    assert file_list(ckpt) == OFFICIAL_FILES
    assert missing_files(ckpt) == []
    copy = tmp_path / "copy"
    shutil.copytree(ckpt, copy)
    for name in ("speech_tokenizer/model.safetensors", "vocab.json", "generation_config.json"):
        (copy / name).unlink()
        assert name in missing_files(copy)
    assert sorted(missing_files(copy)) == sorted(
        ["speech_tokenizer/model.safetensors", "vocab.json", "generation_config.json"]
    )
    nothing = missing_files(tmp_path / "does-not-exist")
    assert set(OFFICIAL_FILES) - {"tokenizer.json"} <= set(nothing) <= set(OFFICIAL_FILES)


# --------------------------------------------------------------------------- safetensors encoding


def _check_header(path: pathlib.Path, specs: dict, dtype: str) -> None:
    header, start = read_header(path)
    assert start % 8 == 0, "data section not 8-byte aligned"
    assert header.pop("__metadata__") == {"format": "pt"}
    assert set(header) == set(specs)
    itemsize = {"BF16": 2, "F32": 4}[dtype]
    spans = []
    for name, info in header.items():
        assert info["dtype"] == dtype, name
        assert tuple(info["shape"]) == tuple(specs[name][0]), name
        a, b = info["data_offsets"]
        assert b - a == int(np.prod(info["shape"])) * itemsize, name
        spans.append((a, b))
    spans.sort()
    assert spans[0][0] == 0
    assert all(prev[1] == nxt[0] for prev, nxt in zip(spans, spans[1:])), "gaps or overlaps in the data section"
    assert start + spans[-1][1] == path.stat().st_size, "file size does not match the header"


def _check_written_data(ckpt, dtype: str, seed: int):
    """Headers list every spec tensor with `dtype`; data are the drawn values (bf16: RNE-rounded)."""
    config = json.loads((ckpt / "config.json").read_text())
    codec = json.loads((ckpt / "speech_tokenizer/config.json").read_text())
    for path, table in (
        (ckpt / MODEL_FILE, weights.model_specs(config)),
        (ckpt / CODEC_FILE, weights.codec_specs(codec)),
    ):
        _check_header(path, table, dtype)
        for name, values in read_tensors(path).items():
            shape, init = table[name]
            expected = weights.draw(name, shape, init, seed)
            if dtype == "BF16":
                expected = bits_to_f32(to_bfloat16_bits(expected).astype(np.uint32) << 16).reshape(shape)
            assert np.array_equal(values, expected), name


def test_safetensors_headers_bf16_by_default(tiny_checkpoint):
    _check_written_data(tiny_checkpoint("tiny", "base", 0), "BF16", 0)


def test_safetensors_float32(tmp_path):
    out = tmp_path / "f32"
    make_checkpoint("tiny", out, "custom_voice", 3, dtype="float32")
    _check_written_data(out, "F32", 3)


def test_bad_dtype_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="float16"):
        make_checkpoint("tiny", tmp_path / "x", "custom_voice", 0, dtype="float16")


@pytest.mark.parametrize(
    "bits, expected",
    [
        (0x3F800000, 0x3F80),  # 1.0
        (0xC0200000, 0xC020),  # -2.5
        (0x3F808000, 0x3F80),  # 1 + 2^-8: exactly halfway, ties to the even (lower) neighbour
        (0x3F818000, 0x3F82),  # 1 + 3*2^-8: exactly halfway, ties to the even (upper) neighbour
        (0xBF818000, 0xBF82),  # same, negative
        (0x3F808001, 0x3F81),  # just above halfway: up
        (0x3F807FFF, 0x3F80),  # just below halfway: down
        (0x7F800000, 0x7F80),  # +inf
        (0xFF800000, 0xFF80),  # -inf
        (0x7F7FFFFF, 0x7F80),  # float32 max rounds past bf16 max: +inf
        (0x00000001, 0x0000),  # smallest float32 subnormal (1.4e-45): +0
        (0x80000001, 0x8000),  # its negative: -0
        (0x00010000, 0x0001),  # smallest bf16 subnormal: exact
        (0x00018000, 0x0002),  # subnormal halfway: ties to even
        (0x00008000, 0x0000),  # subnormal halfway to the smallest: ties to even (zero)
        (0x00000000, 0x0000),  # +0
        (0x80000000, 0x8000),  # -0
    ],
)
def test_to_bfloat16_bits_round_to_nearest_even(bits, expected):
    got = to_bfloat16_bits(bits_to_f32([bits]))
    assert got.dtype == np.uint16
    assert int(got[0]) == expected, f"{bits:#010x} -> {int(got[0]):#06x}, expected {expected:#06x}"


def test_to_bfloat16_bits_matches_exact_rounding():
    """Random finite float32 bit patterns against an independent float64 nearest-even rounding."""
    rng = np.random.default_rng(1234)
    bits = rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32)
    bits = bits[(bits & 0x7F800000) != 0x7F800000]  # finite only
    x = bits.view(np.float32).astype(np.float64)
    low = (bits >> 16).astype(np.uint32)  # truncation: same sign, magnitude <= |x|
    high = low + 1
    low_v = (low << 16).view(np.float32).astype(np.float64)
    high_v = (high << 16).view(np.float32).astype(np.float64)
    # Past bf16 max the upper neighbour is the overflow threshold 2^128 (rounds to inf).
    high_v = np.where(np.isinf(high_v), np.copysign(2.0**128, x), high_v)
    d_low, d_high = np.abs(x - low_v), np.abs(high_v - x)
    expected = np.where(d_low < d_high, low, np.where(d_high < d_low, high, np.where(low % 2 == 0, low, high)))
    got = to_bfloat16_bits(bits.view(np.float32)).astype(np.uint32)
    bad = np.nonzero(got != expected)[0]
    assert bad.size == 0, [f"{bits[i]:#010x}->{got[i]:#06x} (want {expected[i]:#06x})" for i in bad[:5]]


def test_to_bfloat16_bits_keeps_nan():
    """NaNs with low payload bits must not round into the exponent (0x7F800001 -> +inf)."""
    got = to_bfloat16_bits(bits_to_f32([0x7FC00000, 0x7F800001, 0xFFFFFFFF]))
    assert np.isnan((got.astype(np.uint32) << 16).view(np.float32)).all(), [hex(v) for v in got]


# --------------------------------------------------------------------------- every tensor exercised

SNAKE = re.compile(r"^decoder\.decoder\.\d+(\.block\.\d+(\.act[12])?)?\.(alpha|beta)$")


@pytest.mark.parametrize("model_type", presets.MODEL_TYPES)
def test_every_tensor_exercised(tiny_checkpoint, model_type):
    ckpt = tiny_checkpoint("tiny", model_type, 0)
    model = read_tensors(ckpt / MODEL_FILE)
    codec = read_tensors(ckpt / CODEC_FILE)
    config = json.loads((ckpt / "config.json").read_text())
    codec_cfg = json.loads((ckpt / "speech_tokenizer/config.json").read_text())
    assert config["tts_model_type"] == model_type

    initialized = []
    for name, x in {**model, **codec}.items():
        assert np.isfinite(x).all(), f"{name} has non-finite values"
        if name.endswith(".initialized"):
            assert name.startswith("encoder.quantizer."), name
            assert x.size == 1 and x.item() == 1.0, f"{name} = {x}: the Mimi codebook must be marked initialized"
            initialized.append(name)
        elif x.size == 1:
            assert x.item() != 0, f"{name} is zero"
        else:
            assert np.ptp(x) > 0, f"{name} is constant ({x.flat[0]})"
    assert len(initialized) == codec_cfg["encoder_config"]["num_quantizers"]

    usage = [n for n in codec if n.endswith(".cluster_usage")]
    sums = [n for n in codec if n.endswith((".embedding_sum", ".embed_sum"))]
    assert (
        len(usage)
        == len(sums)
        == codec_cfg["decoder_config"]["num_quantizers"] + codec_cfg["encoder_config"]["num_quantizers"]
    )
    for name in usage:
        assert (codec[name] > 0).all(), f"{name} has non-positive usage (codebook = sum / usage)"
    for name in sums:  # (numpy's float32 normal sampler can return an exact 0.0, rarely)
        assert np.count_nonzero(codec[name]) > 0.999 * codec[name].size, f"{name} is (mostly) zero"

    snakes = [n for n in codec if SNAKE.match(n)]
    n_rates = len(codec_cfg["decoder_config"]["upsample_rates"])
    assert len(snakes) == 2 * (7 * n_rates + 1), snakes  # per block: 1 + 3 units x 2 acts; then a final one
    for name in snakes:
        assert np.count_nonzero(codec[name]) > 0.99 * codec[name].size, f"Snake parameter {name} left at zero"

    speaker = [n for n in model if n.startswith("speaker_encoder.")]
    if model_type == "base":
        assert speaker and set(speaker) == set(weights.speaker_encoder_specs(config["speaker_encoder_config"]))
    else:
        assert speaker == []
    assert not any("small_to_mtp_projection" in n for n in model)


def test_projection_only_when_hidden_sizes_differ(tiny_checkpoint):
    proj = tiny_checkpoint("tiny-proj", "custom_voice", 0)
    plain = tiny_checkpoint("tiny", "custom_voice", 0)
    proj_header, _ = read_header(proj / MODEL_FILE)
    plain_header, _ = read_header(plain / MODEL_FILE)
    talker = json.loads((proj / "config.json").read_text())["talker_config"]
    cp_hidden = talker["code_predictor_config"]["hidden_size"]
    assert talker["hidden_size"] != cp_hidden
    w = "talker.code_predictor.small_to_mtp_projection.weight"
    assert proj_header[w]["shape"] == [cp_hidden, talker["hidden_size"]]
    assert proj_header["talker.code_predictor.small_to_mtp_projection.bias"]["shape"] == [cp_hidden]
    assert w not in plain_header
    assert set(proj_header) - set(plain_header) == {w, "talker.code_predictor.small_to_mtp_projection.bias"}


def test_speakers_and_dialects(tiny_checkpoint):
    talker = json.loads((tiny_checkpoint("tiny", "custom_voice", 0) / "config.json").read_text())["talker_config"]
    assert len(talker["spk_id"]) == 9
    assert set(talker["spk_is_dialect"]) == set(talker["spk_id"])
    dialects = {name: d for name, d in talker["spk_is_dialect"].items() if d}
    assert dialects == {"eric": "sichuan_dialect", "dylan": "beijing_dialect"}
    assert all(d is False for name, d in talker["spk_is_dialect"].items() if name not in dialects)
    for dialect in dialects.values():
        assert dialect in talker["codec_language_id"]
    assert len(set(talker["spk_id"].values())) == 9
    assert all(talker["vocab_size"] > i > talker["codec_think_eos_id"] for i in talker["spk_id"].values())
    for model_type in ("voice_design", "base"):
        talker = json.loads((tiny_checkpoint("tiny", model_type, 0) / "config.json").read_text())["talker_config"]
        assert not talker.get("spk_id"), model_type
        assert not talker.get("spk_is_dialect"), model_type


# --------------------------------------------------------------------------- CLI errors


def _cli(*args: str):
    return run_script(sys.executable, "make_checkpoint.py", *args, timeout=120)


def test_cli_unknown_preset(tmp_path):
    out = tmp_path / "out"
    result = _cli("nope", str(out))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "nope" in result.stderr
    for name in presets.PRESETS:
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", result.stderr), (name, result.stderr)
    assert not out.exists(), "nothing should be written for a bad preset"


def test_cli_unknown_type(tmp_path):
    out = tmp_path / "out"
    result = _cli("tiny", str(out), "--type", "bogus")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "bogus" in result.stderr
    for name in presets.MODEL_TYPES:
        assert name in result.stderr, (name, result.stderr)
    assert not out.exists()


def test_cli_success(tmp_path):
    out = tmp_path / "ok"
    result = _cli("tiny", str(out), "--type", "voice_design", "--seed", "2", "-q")
    assert result.returncode == 0, result.stderr
    assert missing_files(out) == []
    assert json.loads((out / "config.json").read_text())["tts_model_type"] == "voice_design"


@pytest.mark.parametrize("where", ["under-a-file", "is-a-file", "proc"])
def test_cli_unwritable_output(tmp_path, where):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    out = {"under-a-file": blocker / "ckpt", "is-a-file": blocker, "proc": pathlib.Path("/proc/kazetts-test/ckpt")}[
        where
    ]
    if where == "proc" and not pathlib.Path("/proc/self").exists():
        pytest.skip("no /proc on this system")
    result = _cli("tiny", str(out), "-q")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    named = [p for p in (out, *out.parents) if str(p) != "/" and str(p) in lines[0]]
    assert named, f"the message names neither the output path nor a parent of it: {lines[0]}"


# --------------------------------------------------------------------------- reference environment


@pytest.mark.reference
def test_reference_shapes(ref_python):
    result = run_script(ref_python, "check_reference_shapes.py", "tiny", "tiny-proj", "0.6b", "1.7b", timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line and not line.startswith(" ")]
    assert len(lines) == 4 * len(presets.MODEL_TYPES), result.stdout
    for line in lines:
        preset, model_type = line.split()[:2]
        assert line.endswith("| OK"), line
        has = "small_to_mtp_projection: yes" in line
        assert has == (preset in ("tiny-proj", "1.7b")), line


@pytest.mark.reference
def test_reference_shape_check_reports_mismatches(ref_python):
    """The checker must fail on a missing, an extra and a misshapen tensor."""
    code = f"""
import runpy, sys
sys.path.insert(0, {str(REPO)!r})
from kazetts.synthetic import weights
real = weights.model_specs
def broken(config):
    specs = dict(real(config))
    del specs["talker.codec_head.weight"]
    specs["talker.extra.weight"] = ((3, 3), weights.NORM_WEIGHT)
    shape, init = specs["talker.model.norm.weight"]
    specs["talker.model.norm.weight"] = ((shape[0] + 1,), init)
    return specs
weights.model_specs = broken
module = runpy.run_path({str(REPO / "scripts" / "check_reference_shapes.py")!r})
sys.exit(module["main"](["tiny"]))
"""
    result = subprocess.run([str(ref_python), "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "missing from synthetic specs: talker.codec_head.weight" in out
    assert "not in the reference: talker.extra.weight" in out
    assert "shape of talker.model.norm.weight" in out


@pytest.mark.reference
def test_reference_strict_loading(ref_python, tiny_checkpoint, tmp_path):
    cases = [("tiny", "custom_voice"), ("tiny", "voice_design"), ("tiny", "base"), ("tiny-proj", "custom_voice")]
    dirs = [tiny_checkpoint(preset, model_type, 0) for preset, model_type in cases]
    # A checkpoint with one tensor missing must fail to load.
    broken = tmp_path / "broken"
    shutil.copytree(dirs[0], broken)
    config = json.loads((broken / "config.json").read_text())
    specs = weights.model_specs(config)
    del specs["talker.codec_head.weight"]
    write_safetensors(broken / MODEL_FILE, specs, 0, "BF16")

    result = run_script(ref_python, "check_reference_shapes.py", "--load", *map(str, dirs), str(broken), timeout=600)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    for d, (preset, model_type) in zip(dirs, cases):
        line = next((line for line in lines if line.startswith(f"loaded {d}:")), None)
        assert line is not None, f"{preset} {model_type} did not load:\n{result.stdout}\n{result.stderr}"
        config = json.loads((d / "config.json").read_text())
        codec = json.loads((d / "speech_tokenizer/config.json").read_text())
        n_model = sum(int(np.prod(s)) for s, _ in weights.model_specs(config).values())
        n_codec = sum(int(np.prod(s)) for s, _ in weights.codec_specs(codec).values())
        assert f"model {len(weights.model_specs(config))} tensors {n_model} values" in line, line
        assert f"codec {len(weights.codec_specs(codec))} tensors {n_codec} values" in line, line
    failed = [line for line in lines if line.startswith(f"FAILED {broken}:")]
    assert len(failed) == 1 and "talker.codec_head.weight" in failed[0], result.stdout
