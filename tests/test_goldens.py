"""The committed reference goldens: complete, consistent, naming their exact weights, and
reproducible from the reference environment."""

from __future__ import annotations

import json
import platform

import numpy as np
import pytest

from conftest import DUMPS, run_script
from kazetts.validation import goldens

CASE_NAMES = [case.name for case in goldens.CASES]
FRAME_SAMPLES = 1920
ATTENTION_WINDOW = 72


@pytest.fixture(scope="module")
def dumps():
    return {name: goldens.load_case(DUMPS / name) for name in CASE_NAMES}


def test_every_case_is_dumped_and_nothing_else():
    on_disk = sorted(
        p.name for p in DUMPS.iterdir() if p.is_dir() and p.name not in (goldens.RECORDINGS_DIR, goldens.CLONE_DIR)
    )
    assert on_disk == sorted(CASE_NAMES)


def test_cloning_cases_name_the_committed_recording(dumps):
    """A cloning golden records the sha256 of the reference it cloned; every recording is used."""
    used = set()
    for name, (manifest, arrays) in dumps.items():
        case = goldens.CASES_BY_NAME[name]
        if case.ref_audio is None:
            assert "ref_audio" not in manifest
            continue
        used.add(case.ref_audio)
        path = goldens.recording_path(DUMPS, case.ref_audio)
        assert manifest["ref_audio"]["sha256"] == goldens.sha256_file(path), f"{path} changed: re-dump {name}"
        assert arrays["xvector"].shape == (arrays["prompt_embeds"].shape[1],)
    assert used == set(goldens.RECORDINGS)
    on_disk = sorted(p.name for p in (DUMPS / goldens.RECORDINGS_DIR).iterdir())
    assert on_disk == sorted(r.file for r in goldens.RECORDINGS.values())


def test_recordings_have_their_rates_and_lengths():
    """One at 24 kHz, others not; one longer than the codec encoder's 250-frame window at 25 Hz (10 s)."""
    import soundfile

    seconds = {}
    for name, rec in goldens.RECORDINGS.items():
        info = soundfile.info(str(goldens.recording_path(DUMPS, name)))
        assert info.samplerate == rec.rate and info.channels == 1
        seconds[name] = info.duration
    assert {r.rate for r in goldens.RECORDINGS.values()} >= {24000, 16000}
    assert max(seconds.values()) > 10 and all(s >= 3 for s in seconds.values())


@pytest.mark.parametrize("name", CASE_NAMES)
def test_manifest_matches_case_definition_and_files(name):
    manifest = json.loads((DUMPS / name / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["case"] == goldens.case_dict(goldens.CASES_BY_NAME[name]), "case changed: re-dump goldens"
    assert manifest["format_version"] == goldens.FORMAT_VERSION
    for array_name, meta in manifest["arrays"].items():
        path = DUMPS / name / f"{array_name}.npy"
        assert goldens.sha256_file(path) == meta["sha256"], f"{path} does not match its manifest"
        array = np.load(path)
        assert list(array.shape) == meta["shape"] and str(array.dtype) == meta["dtype"]
    for key in ("versions", "settings", "checkpoint", "machine"):
        assert manifest[key], key
    assert manifest["settings"]["greedy"] and manifest["settings"]["dtype"] == "float32"


def test_manifest_checkpoint_digest_is_what_make_checkpoint_builds(dumps, tiny_checkpoint):
    """A golden names its weights; rebuilding them (numpy only, this machine) gives the same bytes."""
    for name, (manifest, _) in dumps.items():
        ck = manifest["checkpoint"]
        path = tiny_checkpoint(ck["preset"], ck["model_type"], ck["seed"])
        assert goldens.checkpoint_digests(path) == ck["sha256"], name


@pytest.mark.parametrize("name", CASE_NAMES)
def test_stage_shapes_are_consistent(dumps, name):
    manifest, a = dumps[name]
    frames, calls = manifest["frames"], manifest["talker_calls"]
    hidden = a["prompt_embeds"].shape[1]
    assert a["codes"].shape == (frames, 16) and frames >= 2
    assert calls == frames + 1, "one talker call per frame plus the call that ends generation"
    assert a["talker_inputs"].shape == (calls - 1, hidden)
    assert a["talker_hidden"].shape == (calls, hidden)
    assert a["talker_logits"].shape == (calls, 3072)
    assert a["cp_logits"].shape == (min(frames, goldens.CP_LOGIT_FRAMES), 15, 2048)
    assert a["waveform"].shape == (frames * FRAME_SAMPLES,)
    assert a["codec_quantized"].shape[1] == a["codec_pre_conv"].shape[1] == a["codec_transformer"].shape[1] == frames
    assert a["codec_upsample"].shape[1] == 4 * frames
    assert a["codes"].min() >= 0 and a["codes"].max() < 2048
    assert a["text_ids"][:3].tolist() == [151644, 77091, 198]
    assert a["text_ids"][-5:].tolist() == [151645, 198, 151644, 77091, 198]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_code_predictor_codes_are_argmax_of_its_logits(dumps, name):
    """Greedy code predictor: each CB_g is the argmax of the recorded raw logits."""
    _, a = dumps[name]
    n = a["cp_logits"].shape[0]
    assert np.array_equal(a["cp_logits"].argmax(-1), a["codes"][:n, 1:])


@pytest.mark.parametrize("name", CASE_NAMES)
def test_waveform_is_a_useful_golden(dumps, name):
    """Field-guide trap: the codec output must be neither near-constant nor clipped."""
    wave = dumps[name][1]["waveform"]
    assert np.abs(wave).max() < 0.99, "clipping"
    assert 0.01 < wave.std() < 0.2, f"std {wave.std():.4f} is not a few percent of full scale"
    frame_std = wave.reshape(-1, FRAME_SAMPLES).std(axis=1)
    assert frame_std.min() > 1e-3, "a frame of the waveform is flat"


def test_cases_cover_the_required_modes(dumps):
    cases = {name: goldens.CASES_BY_NAME[name] for name in CASE_NAMES}
    assert any(c.non_streaming for c in cases.values()) and any(not c.non_streaming for c in cases.values())
    assert any(c.language == "auto" for c in cases.values())
    assert any(c.speaker in ("eric", "dylan") for c in cases.values())
    assert any(c.model_type == "voice_design" and c.instruct for c in cases.values())
    assert any(c.model_type == "base" and c.xvector_seed is not None for c in cases.values())
    clones = [c for c in cases.values() if c.ref_audio is not None]
    assert {c.non_streaming for c in clones if c.ref_text is None} == {False, True}
    assert any(c.preset == "tiny-proj" for c in clones)
    assert any(goldens.RECORDINGS[c.ref_audio].rate != 24000 for c in clones)
    assert any(c.preset == "tiny-proj" for c in cases.values())
    stops = {manifest["stopped_by"] for manifest, _ in dumps.values()}
    assert stops == {"eos", "max_new_tokens"}
    long_manifest = dumps["long_window"][0]
    assert long_manifest["frames"] > ATTENTION_WINDOW and long_manifest["stopped_by"] == "eos"


def test_non_streaming_prefill_holds_all_the_text(dumps):
    """Different text modes give different prefills: non-streaming puts all text in the prompt."""
    non_stream = dumps["cv_english_nonstream"]
    stream = dumps["cv_english_stream"]
    n_text = len(non_stream[1]["text_ids"]) - 8  # ids[3:-5]
    assert non_stream[1]["prompt_embeds"].shape[0] == stream[1]["prompt_embeds"].shape[0] + n_text + 1


@pytest.mark.slow
def test_dump_goldens_reproduces_committed_goldens(ref_python, tmp_path):
    """The reference, rerun from scratch, gives the committed goldens bit for bit (same CPU)."""
    result = run_script(ref_python, "dump_goldens.py", "--out", tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    clone = [f"{goldens.CLONE_DIR}/{case.name}" for case in goldens.CLONE_CASES]
    for name in CASE_NAMES + clone:
        want_manifest, want = goldens.load_case(DUMPS / name)
        got_manifest, got = goldens.load_case(tmp_path / name)
        assert got_manifest["checkpoint"] == want_manifest["checkpoint"]
        assert sorted(got) == sorted(want)
        for key in ("text_ids", "codes") + tuple(k for k in ("instruct_ids", "ref_codes", "ref_text_ids") if k in want):
            assert np.array_equal(got[key], want[key]), f"{name}/{key}"
        same_cpu = want_manifest["machine"]["cpu"] == got_manifest["machine"]["cpu"]
        for key, value in want.items():
            if same_cpu:
                assert got[key].tobytes() == value.tobytes(), f"{name}/{key} differs bit-wise on the same CPU"
            else:
                diff = np.abs(got[key].astype(np.float64) - value).max()
                print(f"{name}/{key}: other CPU ({platform.machine()}), max abs diff {diff:.3g}")
                assert diff <= 1e-4 * max(1.0, np.abs(value).max()), f"{name}/{key}"
