"""kazetts quantize / kazetts info on the tiny synthetic models."""

from __future__ import annotations

import pathlib

import gguf
import numpy as np
import pytest

from conftest import rewrite_gguf
from kazetts.validation import goldens

from kazetts.gguf import names as N
from kazetts.cli.main import main
from kazetts.tools.info import format_info, inspect_gguf, tensor_group
from kazetts.gguf.header import GGUFHeader
from kazetts.tools.quantize import quantize_file

Q = gguf.GGMLQuantizationType


def _types(path) -> dict[str, Q]:
    return {name: ty for name, (_, ty) in GGUFHeader(path).tensors.items()}


def _kazetts_kv(path) -> dict:
    return {k: v for k, v in GGUFHeader(path).kv.items() if k.startswith("kazetts.")}


@pytest.fixture(scope="module")
def talkers(tiny_gguf, tmp_path_factory):
    talker, _ = tiny_gguf("tiny", "custom_voice", "f32")
    out = tmp_path_factory.mktemp("quant-talker")
    return talker, {
        ty: (quantize_file(talker, out / f"talker-{ty}.gguf", ty), out / f"talker-{ty}.gguf")
        for ty in ("q8_0", "q4_0", "q4_k_m")
    }


@pytest.mark.parametrize("qtype,block_type", [("q8_0", Q.Q8_0), ("q4_0", Q.Q4_0), ("q4_k_m", None)])
def test_talker_quantized_runs(talkers, qtype, block_type):
    from kazetts.stages.talker import Talker
    from kazetts.stages.talker_file import TalkerFile

    src, results = talkers
    res, path = results[qtype]
    types = _types(path)
    assert res.kind == "talker" and path.is_file() and not path.with_name(path.name + ".part").exists()
    if block_type is not None:
        assert types["blk.0.attn_q.weight"] == block_type
        assert types[N.TOKEN_EMBD] == block_type
    else:
        # tiny rows (64) are not a multiple of the k-quant block (256): llama.cpp falls back
        assert all(t not in (Q.Q4_K, Q.Q6_K) for t in types.values())
        assert types["blk.0.attn_q.weight"] in (Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.IQ4_NL)
        assert any("fallback" in n for n in res.notes)
    assert types["output_norm.weight"] == Q.F32
    assert _kazetts_kv(path) == _kazetts_kv(src)
    assert GGUFHeader(path).kv["tokenizer.ggml.tokens"] == GGUFHeader(src).kv["tokenizer.ggml.tokens"]

    tf_src, tf = TalkerFile(src), TalkerFile(path)
    text, codec = [0, 1000], [tf.voices.codec_pad, 3071]
    rows, ref = (np.concatenate([f.text(text), f.codec(codec)]) for f in (tf, tf_src))
    assert rows.shape == ref.shape and np.all(np.isfinite(rows))
    assert np.abs(rows - ref).max() <= 0.2 * np.abs(ref).max()
    assert tf.voices.speakers == tf_src.voices.speakers

    talker = Talker(path, n_ctx=64, n_batch=16)
    try:
        hidden, logits = talker.step(tf.codec([tf.voices.codec_pad, tf.voices.codec_bos, 5]))
        assert hidden.shape == (tf.hidden_size,) and logits.shape == (tf.codec_vocab_size,)
        assert np.all(np.isfinite(hidden)) and np.all(np.isfinite(logits))
    finally:
        talker.close()


@pytest.mark.parametrize("model_type", ["custom_voice", "base"])
@pytest.mark.parametrize("qtype,want", [("q8_0", Q.Q8_0), ("q4_0", Q.Q4_0), ("q4_k_m", Q.Q4_0), ("q6_k", Q.Q8_0)])
def test_mmproj_quantized(tiny_gguf, tmp_path, model_type, qtype, want):
    _, src = tiny_gguf("tiny", model_type, "f32")
    out = tmp_path / f"mmproj-{qtype}.gguf"
    res = quantize_file(src, out, qtype)
    before, after = _types(src), _types(out)
    assert set(before) == set(after)
    for name, ty in after.items():
        g = tensor_group(name)
        if g == "code predictor matrices" and name.endswith(".weight"):
            assert ty == want, name
        else:
            assert ty == before[name], name  # tables, norms, codec decoder, speaker encoder
    assert after[N.CODE_HEAD] == want
    assert after[N.CODE_EMBD] == before[N.CODE_EMBD] and after[N.CODE_OUT_EMBD] == before[N.CODE_OUT_EMBD]
    assert any(tensor_group(n) == "speaker encoder" for n in after) == (model_type == "base")
    assert _kazetts_kv(out) == _kazetts_kv(src)
    assert {k: v for k, v in GGUFHeader(out).kv.items() if k.startswith("clip.")} == {
        k: v for k, v in GGUFHeader(src).kv.items() if k.startswith("clip.")
    }
    assert "code predictor tables" in res.summary()
    _assert_quantized_mmproj_runs_like_f32(src, out, qtype)


def _assert_quantized_mmproj_runs_like_f32(f32: pathlib.Path, quantized: pathlib.Path, qtype: str) -> None:
    """The quantized mmproj against its F32 source: native and numpy code predictors give the
    F32 logits within the quantized cosine gate (numpy dequantizes, so the two agree closely),
    and the codec decoder, whose tensors quantize leaves alone, gives the same samples."""
    from kazetts.stages.code_predictor import CodePredictor
    from kazetts.validation.oracles.code_predictor import NumpyCodePredictor
    from kazetts.stages.codec import CodecDecoder

    hidden = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    with CodePredictor(f32, weights="file") as ref, CodePredictor(quantized, weights="file") as cp:
        want = ref.predict(hidden, 5, return_logits=True)[2][0]  # CB1's logits: same inputs for both
        codes, _, got = cp.predict(hidden, 5, return_logits=True)
    numpy_codes, _, numpy_logits = NumpyCodePredictor(quantized).predict(hidden, 5)
    gate = goldens.GATES["quantized_cosine_min"]
    figures = (qtype, _cosine(got[0], want), _cosine(numpy_logits[0], got[0]))
    print("quantized mmproj: {} CB1 logit cosine vs F32 {:.5f}, numpy vs native {:.5f}".format(*figures))
    assert figures[1] >= gate and figures[2] >= gate, figures
    assert codes.shape == numpy_codes.shape == (15,)
    frames = np.random.default_rng(1).integers(0, 2048, (3, 16)).astype(np.int32)
    with CodecDecoder(f32, weights="f32") as a, CodecDecoder(quantized, weights="f32") as b:
        assert np.array_equal(a.decode(frames), b.decode(frames))


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_mmproj_row_size_fallback(tiny_gguf, tmp_path):
    """A code predictor matrix whose rows are not a multiple of 32 keeps a float type, and says so."""
    _, src = tiny_gguf("tiny", "custom_voice", "f32")
    rewrite_gguf(
        src,
        tmp_path / "odd.gguf",  # rows of 48 in one matrix
        data=lambda t: t.data[:, :48] if t.name == "a.gen.code.blk.0.attn_q.weight" else t.data,
    )
    res = quantize_file(tmp_path / "odd.gguf", tmp_path / "odd-q8.gguf", "q8_0")
    types = _types(tmp_path / "odd-q8.gguf")
    assert types["a.gen.code.blk.0.attn_q.weight"] == Q.F32
    assert types["a.gen.code.blk.0.attn_k.weight"] == Q.Q8_0
    assert "not a multiple" in res.summary() and "a.gen.code.blk.0.attn_q.weight" in res.summary()


def test_errors(tiny_gguf, tmp_path, capsys):
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32")
    with pytest.raises(ValueError, match="unknown type"):
        quantize_file(talker, tmp_path / "x.gguf", "q9_9")
    with pytest.raises(ValueError, match="same file"):
        quantize_file(talker, talker, "q8_0")
    with pytest.raises(ValueError, match="not found"):
        quantize_file(tmp_path / "missing.gguf", tmp_path / "x.gguf", "q8_0")
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(ValueError, match="is not a directory"):
        quantize_file(talker, tmp_path / "file" / "x.gguf", "q8_0")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf at all" * 10)
    with pytest.raises(ValueError, match="not a"):
        quantize_file(junk, tmp_path / "x.gguf", "q8_0")
    with pytest.raises(ValueError, match="not a"):
        inspect_gguf(junk)
    other = tmp_path / "llama.gguf"
    w = gguf.GGUFWriter(other, arch="llama")
    w.add_tensor("x", np.zeros((2, 32), np.float32))
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    with pytest.raises(ValueError, match="'llama' GGUF"):
        quantize_file(other, tmp_path / "x.gguf", "q8_0")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    import os

    if os.access(ro, os.W_OK):  # running as root: permissions are not enforced
        ro.chmod(0o700)
    else:
        with pytest.raises(ValueError, match="not writable"):
            quantize_file(talker, ro / "x.gguf", "q8_0")
    # already quantized input needs --allow-requantize
    q8 = tmp_path / "m-q8.gguf"
    quantize_file(mmproj, q8, "q8_0")
    with pytest.raises(ValueError, match="already quantized"):
        quantize_file(q8, tmp_path / "m-q4.gguf", "q4_0")
    quantize_file(q8, tmp_path / "m-q4.gguf", "q4_0", allow_requantize=True)
    assert _types(tmp_path / "m-q4.gguf")[N.CODE_HEAD] == Q.Q4_0
    # the CLI reports errors in one line with status 2
    assert main(["quantize", str(talker), str(talker), "--type", "q8_0"]) == 2
    assert "same file" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.part"))


def test_cli_quantize_and_info(tiny_gguf, tmp_path, capsys):
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32")
    assert main(["quantize", str(mmproj), str(tmp_path / "m.gguf"), "--type", "q4_0"]) == 0
    out = capsys.readouterr().out
    assert "code predictor matrices" in out and "Q4_0" in out and "validated" in out
    assert main(["info", str(tmp_path / "m.gguf")]) == 0
    out = capsys.readouterr().out
    assert "mmproj" in out and "Q4_0" in out and "vivian" in out


def test_info_talker_custom_voice(tiny_gguf):
    talker, _ = tiny_gguf("tiny", "custom_voice", "f32")
    info = inspect_gguf(talker)
    assert info.kind == "talker" and info.model_type == "custom_voice" and info.size_tag == "tiny"
    assert info.sizes["hidden"] == 64 and info.sizes["layers"] == 2
    assert info.speakers["dylan"][1] == "beijing_dialect" and info.speakers["vivian"][1] == ""
    assert info.languages["english"] == 2050
    assert info.groups["token_embd"] == {"F32": 1} and "talker blocks" in info.groups
    text = format_info(info)
    for word in ("custom_voice", "vivian", "beijing_dialect", "english", "token_embd", "talker blocks", "F32"):
        assert word in text


def test_info_mmproj_base(tiny_gguf):
    talker, mmproj = tiny_gguf("tiny", "base", "q8_0")
    info = inspect_gguf(mmproj)
    assert info.kind == "mmproj" and info.model_type == "base"
    assert {"speaker encoder", "codec decoder", "code predictor matrices", "code predictor tables"} <= set(info.groups)
    assert "Q8_0" in info.groups["code predictor matrices"]
    assert not info.speakers and info.languages
    text = format_info(info)
    assert "speaker encoder" in text and "speakers: none" in text
    t = inspect_gguf(talker)
    assert t.model_type == "base" and not t.speakers and t.languages


def test_info_without_kazetts_keys(tiny_gguf, tmp_path):
    """A file from llama.cpp's converter has no kazetts.* keys: voices come from the token names."""
    talker, _ = tiny_gguf("tiny", "custom_voice", "q8_0")
    out = tmp_path / "plain-talker.gguf"
    rewrite_gguf(talker, out, drop=lambda key: key.startswith("kazetts."))
    info = inspect_gguf(out)
    assert "token names" in info.metadata_source
    assert info.model_type == "custom_voice" and "vivian" in info.speakers and "english" in info.languages
    assert info.groups["talker blocks"] == {"Q8_0": 14}


def test_info_says_which_tensors_keep_which_type(tiny_gguf):
    """An f32 file holds every codec tensor in F32 (exact); otherwise the tensors outside a
    group's main type are named (llama.cpp's layout keeps the codec conv kernels in F16)."""
    _, f32 = tiny_gguf("tiny", "custom_voice", "f32")
    assert set(inspect_gguf(f32).groups["codec decoder"]) == {"F32"}
    _, q8 = tiny_gguf("tiny", "custom_voice", "q8_0")
    lines = format_info(inspect_gguf(q8)).splitlines()
    f16 = next(line.strip() for line in lines if line.strip().startswith("F16: a.gen.wav."))
    assert "a.gen.wav.pre_conv.weight" in f16 and "a.gen.wav.dac.blk.N.res.N.conv1.weight x12" in f16


@pytest.mark.parametrize(
    "content, message",
    [
        (b"not a model at all", "not a GGUF file"),
        (b"GGUF\x03\x00\x00\x00", "not a readable GGUF file (truncated at byte 8)"),
    ],
)
def test_info_on_a_bad_file_says_what_is_wrong_once(tmp_path, capsys, content, message):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(content)
    assert main(["info", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"kazetts info: error: {bad}: {message}"
