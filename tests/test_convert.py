"""kazetts convert: parity with llama.cpp's own converter, loadability in llama.cpp, types, errors."""

from __future__ import annotations

import json
import shutil

import gguf
import numpy as np
import pytest

from conftest import rewrite_gguf, run_script
from kazetts.gguf import names as N
from kazetts.stages.talker import Talker
from kazetts.tools.convert import convert_checkpoint

Q = gguf.GGMLQuantizationType

# KV keys allowed to differ from llama.cpp's output: llama.cpp derives general.name / basename /
# version / finetune from model-card heuristics on the directory name (we write the directory name
# or --name as general.name, nothing else); plus our own kazetts.* keys.
KV_EXCEPTIONS = {"general.name", "general.basename", "general.version", "general.finetune"}
KV_EXCEPTION_PREFIXES = ("kazetts.",)


# Tensors that llama.cpp computes from the checkpoint in the checkpoint's dtype (bf16 here) while
# we compute them in float32: codebooks (embedding_sum / clamp(cluster_usage)) and the Snake
# exp(alpha), 1/(exp(beta)+1e-9). They differ by bf16 rounding only.
def _derived(name: str) -> bool:
    return name.endswith((".codebook.weight", ".alpha", ".beta"))


# token_embd holds P(text ids) folded by a float32 matmul: ours (numpy) vs torch differ by float32 rounding.
FOLDED = {N.TOKEN_EMBD}


def _kv(reader):
    return {k: (f.types, f.contents()) for k, f in reader.fields.items() if not k.startswith("GGUF.")}


def _values(t):
    return np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float64)


def _compare(ours_path, ref_path, out_type):
    ours, ref = gguf.GGUFReader(ours_path), gguf.GGUFReader(ref_path)
    ko = {k: v for k, v in _kv(ours).items() if not k.startswith(KV_EXCEPTION_PREFIXES)}
    kr = _kv(ref)
    extra, missing = sorted(set(ko) - set(kr) - KV_EXCEPTIONS), sorted(set(kr) - set(ko) - KV_EXCEPTIONS)
    assert not extra and not missing, f"KV keys: extra {extra}, missing {missing}"
    for k in sorted(set(kr) - KV_EXCEPTIONS):
        assert ko[k][0] == kr[k][0], f"KV {k}: type {ko[k][0]} != llama.cpp {kr[k][0]}"
        assert ko[k][1] == kr[k][1], f"KV {k}: value differs from llama.cpp"

    # our own tensors (the codec encoder, kazetts.enc.*) are extra: llama.cpp never reads them
    to = {t.name: t for t in ours.tensors if not t.name.startswith(KV_EXCEPTION_PREFIXES)}
    tr = {t.name: t for t in ref.tensors}
    assert sorted(to) == sorted(tr), (sorted(set(to) - set(tr)), sorted(set(tr) - set(to)))
    for name, r in tr.items():
        o = to[name]
        # the one deliberate difference: an f32 file keeps the codec conv kernels that llama.cpp
        # writes in F16 in F32 (then llama.cpp's values are ours rounded to F16)
        kept_f32 = out_type == "f32" and r.tensor_type == Q.F16
        want = Q.F32 if kept_f32 else r.tensor_type
        assert o.tensor_type == want, f"{name}: {o.tensor_type.name} != {want.name} (llama.cpp {r.tensor_type.name})"
        assert list(o.shape) == list(r.shape), f"{name}: shape {list(o.shape)} != {list(r.shape)}"
        vo, vr = _values(o), _values(r)
        if kept_f32:
            assert np.array_equal(vo.astype(np.float16).astype(np.float64), vr), f"{name}: not llama.cpp's F16 values"
            continue
        if not (_derived(name) or name in FOLDED):
            assert np.array_equal(vo, vr), f"{name}: values differ from llama.cpp"
            continue
        rtol = 2.0**-7 if _derived(name) else 1e-5
        step = 0.0
        if r.tensor_type == Q.Q8_0:  # a rounding flip moves one quantization step
            step = np.abs(vr).max() / 127 * 1.01
        elif r.tensor_type == Q.F16:
            rtol = max(rtol, 2.0**-10)
        atol = 1e-5 * np.abs(vr).max() if name in FOLDED else 1e-7
        err = np.abs(vo - vr) - (rtol * np.abs(vr) + step + atol)
        assert (err <= 0).all(), f"{name}: max excess error {err.max():.3g} over dtype rounding"


@pytest.mark.reference
@pytest.mark.parametrize("out_type", ["f32", "q8_0"])
def test_matches_llama_cpp_converter(ref_python, tiny_checkpoint, tmp_path, out_type):
    ckpt = tiny_checkpoint("tiny", "base", 0)
    r = run_script(ref_python, "llama_cpp_convert.py", ckpt, tmp_path / "ref", "--type", out_type)
    if r.returncode != 0:
        pytest.fail(f"llama.cpp converter failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}")
    talker, mmproj = convert_checkpoint(ckpt, tmp_path / "ours", out_type, name="tiny-base", verbose=False)
    _compare(talker, tmp_path / "ref" / f"talker-{out_type}.gguf", out_type)
    _compare(mmproj, tmp_path / "ref" / f"mmproj-{out_type}.gguf", out_type)


@pytest.mark.parametrize("out_type", ["f32", "f16", "q8_0"])
def test_talker_decodes_in_llama_cpp(tiny_checkpoint, tmp_path, out_type):
    """The talker GGUF loads in llama.cpp (the libllama of llama-cpp-python) and decodes an embedding batch."""
    ckpt = tiny_checkpoint("tiny", "custom_voice", 0)
    talker_path, _ = convert_checkpoint(ckpt, tmp_path, out_type, verbose=False)
    cfg = json.loads((ckpt / "config.json").read_text())["talker_config"]
    talker = Talker(talker_path, threads=1, n_ctx=64, n_batch=16)
    assert talker.file.text_vocab_size == cfg["text_vocab_size"] and talker.file.codec_vocab_size == cfg["vocab_size"]
    embeddings = np.random.default_rng(0).standard_normal((5, cfg["hidden_size"])).astype(np.float32) * 0.05
    hidden, codec = talker.step(embeddings)
    assert np.isfinite(codec).all() and codec.std() > 0
    assert np.isfinite(hidden).all() and hidden.shape == (cfg["hidden_size"],)


def _types(path):
    r = gguf.GGUFReader(path)
    return {t.name: t.tensor_type for t in r.tensors}, {k: f.contents() for k, f in r.fields.items()}


@pytest.mark.parametrize("model_type", ["base", "custom_voice", "voice_design"])
@pytest.mark.parametrize("out_type", ["f32", "f16", "q8_0"])
def test_all_model_types_and_tensor_types(tiny_checkpoint, tmp_path, model_type, out_type):
    ckpt = tiny_checkpoint("tiny", model_type, 0)
    talker, mmproj = convert_checkpoint(ckpt, tmp_path, out_type, verbose=False)
    assert talker.name == f"{ckpt.name}-talker-{out_type}.gguf"
    assert mmproj.name == f"{ckpt.name}-mmproj-{out_type}.gguf"
    tt, tkv = _types(talker)
    mt, mkv = _types(mmproj)
    main = {"f32": Q.F32, "f16": Q.F16, "q8_0": Q.Q8_0}[out_type]

    assert tkv["general.architecture"] == "qwen3tts" and mkv["general.architecture"] == "clip"
    for name in (N.TOKEN_EMBD, N.OUTPUT, "blk.0.attn_q.weight", "blk.1.ffn_down.weight"):
        assert tt[name] == main, name
    for name in (N.OUTPUT_NORM, "blk.0.attn_norm.weight", "blk.0.attn_q_norm.weight"):
        assert tt[name] == Q.F32, name
    # code predictor: matrices in the chosen type, ffn_down always F32 (activation range)
    for name in (N.CODE_EMBD, N.CODE_HEAD, N.CODE_OUT_EMBD, "a.gen.code.blk.0.attn_q.weight"):
        assert mt[name] == main, name
    assert mt["a.gen.code.blk.0.ffn_down.weight"] == Q.F32
    assert mt["a.gen.code.blk.0.ln1.weight"] == Q.F32
    # codec: conv kernels F16 (F32 in an f32 file: exact), ConvTranspose kernels F32, biases / Snake / norms F32
    conv_type = Q.F32 if out_type == "f32" else Q.F16
    for name in (
        "a.gen.wav.pre_conv.weight",
        "a.gen.wav.dac.entry.weight",
        "a.gen.wav.dac.post_conv.weight",
        "a.gen.wav.up.blk.0.dwconv.weight",
        "a.gen.wav.dac.blk.0.res.0.conv1.weight",
    ):
        assert mt[name] == conv_type, name
    if out_type == "f32":
        assert {t for t in mt.values()} == {Q.F32}, "an f32 file holds every tensor in F32"
    for name in (
        "a.gen.wav.up.blk.0.conv.weight",
        "a.gen.wav.dac.blk.0.conv.weight",
        "a.gen.wav.pre_conv.bias",
        "a.gen.wav.dac.blk.0.snake.alpha",
        "a.gen.wav.tfm.blk.0.ls1.weight",
    ):
        assert mt[name] == Q.F32, name
    # codebook rows are 16 wide on the tiny model: Q8_0 falls back to F16 as in llama.cpp
    assert mt["a.gen.wav.quant.rest.codebook.weight"] == (Q.F16 if out_type == "q8_0" else main)
    assert mt["a.gen.wav.tfm.blk.0.attn_q.weight"] == main

    has_spk = any(n.startswith("a.") and not n.startswith("a.gen.") for n in mt) or "mm.a.fc.weight" in mt
    assert has_spk == (model_type == "base")
    assert mkv.get("clip.has_audio_encoder", False) == (model_type == "base")
    assert mkv["clip.has_gen_audio_encoder"] is True

    for kv in (tkv, mkv):
        assert kv[N.K_MODEL_TYPE] == model_type
        assert kv[N.K_CODEC + "eos_token_id"] == 2150 and kv[N.K_CODEC + "pad_id"] == 2148
        langs = dict(zip(kv[N.K_LANGUAGES], kv[N.K_LANGUAGE_IDS]))
        assert langs["english"] == 2050 and langs["beijing_dialect"] == 2074
        assert kv[N.K_WAV + "sliding_window"] == 72
        assert kv[N.K_WAV + "upsample_rates"] == [8, 5, 4, 3]
        if model_type == "custom_voice":
            spk = dict(zip(kv[N.K_SPEAKERS], zip(kv[N.K_SPEAKER_IDS], kv[N.K_SPEAKER_DIALECTS])))
            assert spk["vivian"] == (3065, "") and spk["eric"] == (2875, "sichuan_dialect")
        else:
            assert N.K_SPEAKERS not in kv


def test_bad_inputs(tiny_checkpoint, tmp_path):
    with pytest.raises(ValueError, match="not found"):
        convert_checkpoint(tmp_path / "nope", tmp_path / "out", "f16")
    ckpt = tiny_checkpoint("tiny", "custom_voice", 0)
    with pytest.raises(ValueError, match=r"unknown output type .*q4_k_m files come from `kazetts quantize`"):
        convert_checkpoint(ckpt, tmp_path / "out", "q4_k_m")

    def broken(tag, edit):
        d = tmp_path / tag
        shutil.copytree(ckpt, d)
        edit(d)
        return d

    d = broken("noconfig", lambda d: (d / "config.json").unlink())
    with pytest.raises(ValueError, match="config.json is missing"):
        convert_checkpoint(d, tmp_path / "out", "f16")
    d = broken("nocodec", lambda d: shutil.rmtree(d / "speech_tokenizer"))
    with pytest.raises(ValueError, match="speech_tokenizer"):
        convert_checkpoint(d, tmp_path / "out", "f16")
    d = broken("noweights", lambda d: (d / "model.safetensors").unlink())
    with pytest.raises(ValueError, match="no model weights"):
        convert_checkpoint(d, tmp_path / "out", "f16")

    def truncate(d):
        p = d / "model.safetensors"
        p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])

    d = broken("truncated", truncate)
    with pytest.raises(ValueError, match="truncated"):
        convert_checkpoint(d, tmp_path / "out", "f16")

    def more_layers(d):
        cfg = json.loads((d / "config.json").read_text())
        cfg["talker_config"]["num_hidden_layers"] += 1
        (d / "config.json").write_text(json.dumps(cfg))

    d = broken("layers", more_layers)
    with pytest.raises(ValueError, match="talker tensor"):
        convert_checkpoint(d, tmp_path / "out", "f16")
    assert not list((tmp_path / "out").glob("*.gguf"))


def test_cli(tiny_checkpoint, tmp_path, capsys):
    from kazetts.cli.main import main

    ckpt = tiny_checkpoint("tiny", "voice_design", 0)
    assert main(["convert", str(ckpt), "-o", str(tmp_path), "--type", "f16", "--name", "vd"]) == 0
    out = capsys.readouterr().out
    assert "token_embd.weight" in out  # progress lines
    assert (tmp_path / "vd-talker-f16.gguf").is_file() and (tmp_path / "vd-mmproj-f16.gguf").is_file()
    assert main(["convert", str(ckpt), "-o", str(tmp_path), "--type", "bf16"]) == 2
    assert "unknown output type" in capsys.readouterr().err


def test_omitted_hparams_take_the_reference_defaults(tiny_checkpoint, tmp_path):
    """A config without head_dim / rope_theta: the files get what the reference uses
    (Qwen3TTSTokenizerV2Decoder attention: hidden_size // num_attention_heads; the code
    predictor config's default rope_theta 10000), and the native codec's own fallback for a
    file without the key follows the same rule."""
    from kazetts.stages.codec import CodecDecoder

    ckpt = tmp_path / "ckpt"
    shutil.copytree(tiny_checkpoint("tiny", "custom_voice", 0), ckpt)
    st_config = json.loads((ckpt / "speech_tokenizer" / "config.json").read_text())
    decoder = st_config["decoder_config"]
    del decoder["head_dim"]
    (ckpt / "speech_tokenizer" / "config.json").write_text(json.dumps(st_config))
    config = json.loads((ckpt / "config.json").read_text())
    del config["talker_config"]["code_predictor_config"]["rope_theta"]
    (ckpt / "config.json").write_text(json.dumps(config))

    _, mmproj = convert_checkpoint(ckpt, tmp_path / "out", "f32", verbose=False)
    kv = _types(mmproj)[1]
    assert kv[N.K_WAV + "head_dim"] == decoder["hidden_size"] // decoder["num_attention_heads"] == 16
    assert kv[N.K_CODE + "rope_theta"] == 10000.0
    codes = np.random.default_rng(0).integers(0, 2048, (4, 16)).astype(np.int32)
    with CodecDecoder(mmproj, threads=1, weights="f32") as codec:
        want = codec.decode(codes)
    older = tmp_path / "older-mmproj-f32.gguf"
    rewrite_gguf(mmproj, older, drop=lambda key: key == N.K_WAV + "head_dim")
    with CodecDecoder(older, threads=1, weights="f32") as codec:
        assert np.array_equal(codec.decode(codes), want)
