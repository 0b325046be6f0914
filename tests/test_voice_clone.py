"""Voice-clone building blocks against the reference goldens in dumps/clone/: the converter's
codec encoder tensors, the native codec encoder (reference codes identical) and the ICL prompt."""

from __future__ import annotations

import re

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from conftest import DUMPS  # noqa: E402
from kazetts.gguf import names as N  # noqa: E402
from kazetts.stages.codec_encoder import CodecEncoder  # noqa: E402
from kazetts.native import NativeError  # noqa: E402
from kazetts.stages.prompt import build_icl_prompt  # noqa: E402
from kazetts.stages.talker_file import TalkerFile  # noqa: E402
from kazetts.validation import goldens  # noqa: E402
from kazetts.validation.validate import validate_clone_encoder  # noqa: E402
from test_prompt import HFRows  # noqa: E402

CLONE = DUMPS / goldens.CLONE_DIR
NAMES = [case.name for case in goldens.CLONE_CASES]
Q = gguf.GGMLQuantizationType


@pytest.fixture(scope="module")
def dumps():
    return {name: goldens.load_case(CLONE / name) for name in NAMES}


@pytest.fixture(scope="module")
def encoders(tiny_gguf):
    cache = {}

    def get(preset):
        if preset not in cache:
            mmproj = tiny_gguf(preset, "base", "f32")[1]
            cache[preset] = CodecEncoder(mmproj, threads=2), mmproj
        return cache[preset]

    return get


# ---- goldens -------------------------------------------------------------------------------------


def test_every_clone_case_is_dumped_and_nothing_else():
    on_disk = sorted(p.name for p in CLONE.iterdir() if p.is_dir() and p.name != goldens.REF_AUDIO_DIR)
    assert on_disk == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_clone_manifest_matches_case_files_and_audio(name, dumps):
    manifest, a = dumps[name]
    case = goldens.CLONE_CASES_BY_NAME[name]
    assert manifest["case"] == goldens.case_dict(case), "case changed: re-dump goldens"
    for array_name, meta in manifest["arrays"].items():
        assert goldens.sha256_file(CLONE / name / f"{array_name}.npy") == meta["sha256"], array_name
    assert manifest["ref_audio_sha256"] == goldens.sha256_file(CLONE / goldens.REF_AUDIO_DIR / case.ref_audio)
    assert manifest["ref_sample_rate"] != 24000, "the reference's resampling is part of the golden"
    n = len(a["ref_pcm"])
    assert a["ref_codes"].shape == (manifest["ref_frames"], 16) and manifest["ref_frames"] == -(-n // 1920)
    assert a["enc_seanet"].shape[1] == a["enc_transformer"].shape[1] == -(-n // 960)
    assert a["enc_downsampled"].shape[1] == manifest["ref_frames"]
    assert a["ref_text_ids"][:3].tolist() == [151644, 77091, 198] and a["ref_text_ids"][-2:].tolist() == [151645, 198]
    assert a["waveform"].shape == (manifest["frames"] * 1920,), "generated speech only: the reference part is cut"


def test_clone_checkpoint_digests_are_what_make_checkpoint_builds(dumps, tiny_checkpoint):
    for name, (manifest, _) in dumps.items():
        ck = manifest["checkpoint"]
        assert (
            goldens.checkpoint_digests(tiny_checkpoint(ck["preset"], ck["model_type"], ck["seed"])) == ck["sha256"]
        ), name


def test_clone_cases_cover_the_required_modes(dumps):
    cases = [goldens.CLONE_CASES_BY_NAME[n] for n in NAMES]
    assert {c.non_streaming for c in cases} == {True, False}
    assert any(c.preset == "tiny-proj" for c in cases)
    # > 250 SEANet steps: beyond the sliding window a flash-attention Mimi would apply
    assert max(a["enc_seanet"].shape[1] for _, a in dumps.values()) > 250
    # streaming with more text rows than codec rows (trailing text) and with fewer (padding)
    lens = {
        n: (len(a["ref_text_ids"]) - 5 + len(a["text_ids"]) - 8 + 1, m["ref_frames"] + 1)
        for n, (m, a) in dumps.items()
        if not goldens.CLONE_CASES_BY_NAME[n].non_streaming
    }
    assert any(t > c for t, c in lens.values()) and any(t <= c for t, c in lens.values()), lens


# ---- converter -----------------------------------------------------------------------------------


@pytest.mark.parametrize("out_type", ["f32", "q8_0"])
def test_base_mmproj_holds_the_codec_encoder(tiny_gguf, out_type):
    reader = gguf.GGUFReader(str(tiny_gguf("tiny", "base", out_type)[1]))
    types = {t.name: t.tensor_type for t in reader.tensors}
    kv = {k: f.contents() for k, f in reader.fields.items()}
    enc = [n for n in types if n.startswith(N.ENC + ".")]
    # 6 SEANet convs + 4 res blocks x 2 convs, weights and biases; downsample; 1 layer x 12; 2 projections + 2 codebooks
    assert len(enc) == 2 * (6 + 8) + 1 + 12 + 4
    for name in (
        N.ENC_SEM_PROJ,
        N.ENC_SEM_CODEBOOK,
        N.ENC_AC_PROJ,
        N.ENC_AC_CODEBOOK,
        "kazetts.enc.tfm.blk.0.ln1.bias",
    ):
        assert types[name] == Q.F32, name
    want = Q.F32 if out_type == "f32" else Q.F16
    assert types["kazetts.enc.seanet.0.weight"] == want and types["kazetts.enc.tfm.blk.0.attn_q.weight"] == want
    ac = next(t for t in reader.tensors if t.name == N.ENC_AC_CODEBOOK)
    assert list(ac.shape) == [16, 2048, 15], "only the 15 acoustic codebooks encoding uses"
    assert kv[N.K_ENC_CODEBOOKS] == 16 and kv[N.K_ENC_HOP] == 1920 and kv[N.K_ENC + "upsampling_ratios"] == [8, 6, 5, 4]
    assert np.asarray(ac.data).std() > 0.1, "codebooks are randomized (not the zero default)"


def test_other_model_types_have_no_codec_encoder(tiny_gguf):
    mmproj = tiny_gguf("tiny", "custom_voice", "f32")[1]
    assert not any(t.name.startswith(N.ENC + ".") for t in gguf.GGUFReader(str(mmproj)).tensors)
    with pytest.raises(NativeError, match="no codec encoder"):
        CodecEncoder(mmproj, threads=1)


# ---- native codec encoder --------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_codec_encoder_codes_identical_to_reference(name, dumps, encoders):
    manifest, _ = dumps[name]
    encoder, mmproj = encoders(manifest["checkpoint"]["preset"])
    check = validate_clone_encoder(encoder, mmproj, CLONE / name, quantized=False)
    print(f"{name}: {check.detail}")
    assert check.passed, check.detail
    _, inter = encoder.encode(dumps[name][1]["ref_pcm"], intermediates=True)
    for key, value in inter.items():
        assert np.abs(value - dumps[name][1][f"enc_{key}"]).max() <= 1e-4, key


def test_codec_encoder_threads_and_lengths(encoders, dumps):
    encoder, _ = encoders("tiny")
    pcm = dumps["clone_icl_long_ref"][1]["ref_pcm"]
    encoder.set_threads(1)
    one = encoder.encode(pcm)
    encoder.set_threads(2)
    assert np.array_equal(one, encoder.encode(pcm))
    for n in (1, 959, 960, 1919, 1920, 1921, 48000 * 2 + 7):  # across the SEANet chunk boundary too
        codes = encoder.encode(pcm[:n])
        assert codes.shape == (-(-n // 1920), 16) and codes.min() >= 0 and codes.max() < 2048, n
    # causal: a prefix's codes are the whole signal's first frames (chunked SEANet included)
    assert np.array_equal(encoder.encode(pcm[: 1920 * 70])[:70], one[:70])


def test_codec_encoder_bad_input(encoders, tmp_path):
    encoder, _ = encoders("tiny")
    with pytest.raises(ValueError, match="non-empty 1-D"):
        encoder.encode(np.zeros(0, np.float32))
    with pytest.raises(ValueError, match="non-empty 1-D"):
        encoder.encode(np.zeros((2, 100), np.float32))
    with pytest.raises(NativeError, match="not finite"):
        encoder.encode(np.array([0.0, np.nan, 0.0], np.float32))
    with pytest.raises(NativeError, match="cannot open"):
        CodecEncoder(tmp_path / "missing.gguf")
    (tmp_path / "junk.gguf").write_bytes(b"not a gguf file")
    with pytest.raises(NativeError, match="not a GGUF"):
        CodecEncoder(tmp_path / "junk.gguf")
    with pytest.raises(NativeError, match="n_threads"):
        encoder.set_threads(0)


# ---- ICL prompt ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_icl_prompt_matches_reference(name, dumps, tiny_checkpoint, tiny_gguf):
    """Both text modes; rows from the F32 talker GGUF, reference frames from numpy over the HF
    weights, the reference's x-vector and codes."""
    manifest, a = dumps[name]
    case, ck = manifest["case"], manifest["checkpoint"]
    rows = HFRows(tiny_checkpoint(ck["preset"], ck["model_type"], ck["seed"]))
    file = TalkerFile(tiny_gguf(ck["preset"], ck["model_type"], "f32", ck["seed"])[0])
    frames = np.stack([rows.frame_input(c) for c in a["ref_codes"]])
    prompt = build_icl_prompt(
        file,
        a["text_ids"].tolist(),
        a["ref_text_ids"].tolist(),
        frames,
        a["xvector"],
        language=case["language"],
        text_streaming=not case["non_streaming"],
    )
    assert prompt.prefill.shape == a["prompt_embeds"].shape
    steps = np.stack([rows.frame_input(a["codes"][k]) + prompt.text_row(k) for k in range(manifest["frames"])])
    prefill_diff, step_diff = (
        np.abs(prompt.prefill - a["prompt_embeds"]).max(),
        np.abs(steps - a["talker_inputs"]).max(),
    )
    print(
        f"{name}: prefill {len(prompt.prefill)} rows max abs diff {prefill_diff:.2e}, trailing text "
        f"{len(prompt.trailing_text)} rows, step inputs max abs diff {step_diff:.2e}"
    )
    assert prefill_diff <= 1e-5 and step_diff <= 1e-5


def test_icl_prompt_bad_input(dumps, tiny_checkpoint, tiny_gguf):
    manifest, a = dumps["clone_icl_stream"]
    rows, file = HFRows(tiny_checkpoint("tiny", "base", 0)), TalkerFile(tiny_gguf("tiny", "base", "f32")[0])
    frames = np.stack([rows.frame_input(c) for c in a["ref_codes"]])
    args = (file, a["text_ids"].tolist(), a["ref_text_ids"].tolist())
    with pytest.raises(ValueError, match="x-vector"):
        build_icl_prompt(*args, frames, None)
    with pytest.raises(ValueError, match=re.escape("reference frames must be [frames >= 1, 64], got shape (0, 64)")):
        build_icl_prompt(*args, frames[:0], a["xvector"])
    with pytest.raises(ValueError, match=re.escape("reference frames must be [frames >= 1, 64], got shape (3, 32)")):
        build_icl_prompt(*args, frames[:3, :32], a["xvector"])
    with pytest.raises(ValueError, match="empty reference text"):
        build_icl_prompt(file, a["text_ids"].tolist(), a["ref_text_ids"][:5].tolist(), frames, a["xvector"])
    with pytest.raises(ValueError, match="speaker embedding has"):
        build_icl_prompt(*args, frames, a["xvector"][:10])
    with pytest.raises(ValueError, match="ICL voice cloning takes neither a speaker name nor an instruct"):
        build_icl_prompt(*args, frames, a["xvector"], instruct_ids=[1, 2])


# ---- engine: ICL synthesis -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engines(tiny_gguf):
    from kazetts.engine.tts import TTS

    cache = {}

    def get(preset):
        if preset not in cache:
            talker, mmproj = tiny_gguf(preset, "base", "f32")
            cache[preset] = TTS(str(talker), str(mmproj), threads=2, codec_weights="f32")
        return cache[preset]

    return get


@pytest.mark.parametrize("name", NAMES)
def test_icl_synthesis_matches_generate_voice_clone(name, dumps, engines):
    """Greedy ICL from (x-vector, reference codes, transcript): every stage and the waveform
    (reference part cut) against generate_voice_clone, both text modes."""
    from kazetts.validation.validate import validate_clone_case

    tts = engines(dumps[name][0]["checkpoint"]["preset"])
    checks = validate_clone_case(tts, CLONE / name, quantized=False)
    for check in checks:
        print(f"{name} {check.stage}: {check.detail}")
    assert all(check.passed for check in checks), [c.stage for c in checks if not c.passed]


def test_icl_request_errors(dumps, engines):
    tts = engines("tiny")
    _, a = dumps["clone_icl_stream"]
    with pytest.raises(ValueError, match="both ref_codes and ref_text"):
        tts.synthesize("Hello.", xvector=a["xvector"], ref_codes=a["ref_codes"])
    with pytest.raises(ValueError, match="both ref_codes and ref_text"):
        tts.synthesize("Hello.", xvector=a["xvector"], ref_text="Hi.")
    with pytest.raises(ValueError, match="x-vector"):
        tts.synthesize("Hello.", ref_codes=a["ref_codes"], ref_text="Hi.")
    with pytest.raises(ValueError, match="reference codes must be"):
        tts.synthesize("Hello.", xvector=a["xvector"], ref_codes=a["ref_codes"][:, :8], ref_text="Hi.")


def test_reference_cut_is_the_reference_float_arithmetic():
    from kazetts.engine.tts import reference_cut

    assert reference_cut(41, 64, 64 * 1920) == 41 * 1920
    assert reference_cut(15, 22, 22 * 1920) == 15 * 1920 - 1  # int(15 / 22 * 42240) = 28799
