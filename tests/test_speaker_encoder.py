"""The speaker encoder: numpy log-mel front end and native ECAPA-TDNN against the reference."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import DUMPS, run_script
from kazetts import native
from kazetts.stages import mel
from kazetts.stages.audio_input import reference_audio
from kazetts.stages.speaker_encoder import SpeakerEncoder, fingerprint
from kazetts.validation import goldens

CLONE_CASES = [c.name for c in goldens.CASES if c.ref_audio is not None]
XVEC_GATE = goldens.GATES["xvector_max_rel"]  # max abs diff / max abs of the reference's x-vector


def relative(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.fixture(scope="module")
def encoders(tiny_gguf):
    cache = {}

    def get(preset="tiny", out_type="f32", seed=0):
        key = (preset, out_type, seed)
        if key not in cache:
            cache[key] = SpeakerEncoder(tiny_gguf(preset, "base", out_type, seed)[1], threads=2)
        return cache[key]

    return get


@pytest.mark.parametrize("name", CLONE_CASES)
def test_x_vector_of_the_recording_matches_the_reference(name, encoders):
    """The committed recording -> audio front end -> log-mel -> native encoder, within 1e-5 of
    the x-vector the reference's create_voice_clone_prompt computed."""
    manifest, arrays = goldens.load_case(DUMPS / name)
    enc = encoders(manifest["checkpoint"]["preset"])
    audio = reference_audio(goldens.recording_path(DUMPS, manifest["case"]["ref_audio"]), enc.min_samples)
    got = enc.embed(audio)
    print(f"{name}: x-vector max relative diff {relative(got, arrays['xvector']):.2e}")
    assert got.shape == arrays["xvector"].shape and relative(got, arrays["xvector"]) <= XVEC_GATE


def test_mel_frame_count_and_its_inverse():
    for frames in (1, 5, 94, 938):
        n = mel.min_samples(frames)
        assert mel.n_frames(n) == frames and mel.n_frames(n - 1) == frames - 1
        assert mel.log_mel(np.full(max(n, mel.PAD + 1), 0.1, np.float32)).shape[0] == mel.n_frames(max(n, mel.PAD + 1))


def test_front_end_is_the_reference_one(ref_python, tmp_path):
    """Filterbank bit for bit as librosa's, log-mel within float noise of the reference's
    mel_spectrogram, resampling identical to librosa.resample, file loading identical."""
    result = run_script(ref_python, "check_speaker_front_end.py", tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    print(figures)
    assert figures["filterbank_identical"]
    assert all(d is not None and d <= 1e-5 for d in figures["mel_max_abs_diff"].values())
    assert all(figures["resample_identical"].values()) and all(figures["load_identical"].values())
    # The reference cannot take a stereo (array, sr): kazetts averages the channels as it does for files.
    assert figures["stereo_array_reference"].startswith("TypeError")


def test_shapes_and_the_shortest_input(encoders):
    enc = encoders()
    assert (enc.n_mels, enc.dim, enc.min_frames, enc.min_samples) == (128, 64, 5, 1280)
    rng = np.random.default_rng(0)
    enc.encode(rng.standard_normal((5, 128)).astype(np.float32))
    with pytest.raises(native.NativeError, match="at least 5 mel frames, got 4"):
        enc.encode(rng.standard_normal((4, 128)).astype(np.float32))
    with pytest.raises(native.NativeError, match="expected 128 mel bands, got 64"):
        enc.encode(rng.standard_normal((10, 64)).astype(np.float32))
    with pytest.raises(ValueError, match="frames, mel bands"):
        enc.encode(np.zeros(128, np.float32))


def test_threads_do_not_change_the_x_vector(encoders):
    enc = encoders()
    log_mel = np.random.default_rng(1).standard_normal((300, 128)).astype(np.float32)
    enc.set_threads(1)
    one = enc.encode(log_mel)
    enc.set_threads(2)
    assert relative(enc.encode(log_mel), one) <= 1e-6
    with pytest.raises(native.NativeError, match="n_threads"):
        enc.set_threads(0)


def test_f16_file_is_close_and_has_the_same_fingerprint(encoders, tiny_gguf):
    log_mel = np.random.default_rng(2).standard_normal((200, 128)).astype(np.float32)
    exact, half = encoders("tiny", "f32").encode(log_mel), encoders("tiny", "f16").encode(log_mel)
    assert relative(half, exact) <= 1e-2
    assert fingerprint(tiny_gguf("tiny", "base", "f32")[1]) == fingerprint(tiny_gguf("tiny", "base", "f16")[1])


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
def test_fingerprint_is_the_documented_digest(tiny_gguf, weights):
    """docs/voices.md's speaker_encoder_sha256, stated with hashlib over the Python GGUF reader:
    what voice files of every release name their model by."""
    import hashlib

    from kazetts.gguf.header import GGUFHeader

    mmproj = tiny_gguf("tiny", "base", weights)[1]
    header = GGUFHeader(mmproj)
    names = sorted(n for n in header.tensors if n.startswith(("a.", "mm.a.")) and not n.startswith("a.gen."))
    digest = hashlib.sha256()
    for name in names:
        digest.update(f"{name}:{list(header.tensors[name][0])};".encode())
        digest.update(header.values(name).astype(np.float16).tobytes())
    assert len(names) > 10 and fingerprint(mmproj) == digest.hexdigest()


def test_fingerprint_tells_models_apart(tiny_gguf):
    prints = {
        fingerprint(tiny_gguf(preset, "base", "f32", seed)[1])
        for preset, seed in (("tiny", 0), ("tiny", 1), ("tiny-proj", 0))
    }
    assert len(prints) == 3


def test_a_model_without_speaker_encoder_is_a_clear_error(tiny_gguf):
    mmproj = tiny_gguf("tiny", "custom_voice", "f32")[1]
    with pytest.raises(native.NativeError, match="has no speaker encoder .*only Base models"):
        SpeakerEncoder(mmproj)
    with pytest.raises(ValueError, match="no speaker encoder"):
        fingerprint(mmproj)


def test_a_llama_cpp_made_mmproj_gives_the_same_x_vector(ref_python, tiny_checkpoint, tiny_gguf, tmp_path):
    """llama.cpp's own converter writes the same a.* / mm.a.fc tensors (without kazetts' keys):
    same x-vector, same fingerprint, so voices carry over."""
    result = run_script(ref_python, "llama_cpp_convert.py", tiny_checkpoint("tiny", "base"), tmp_path, "--type", "f32")
    assert result.returncode == 0, result.stderr[-3000:]
    ours = tiny_gguf("tiny", "base", "f32")[1]
    log_mel = np.random.default_rng(3).standard_normal((120, 128)).astype(np.float32)
    theirs = SpeakerEncoder(tmp_path / "mmproj-f32.gguf").encode(log_mel)
    assert relative(theirs, SpeakerEncoder(ours).encode(log_mel)) <= 1e-6
    assert fingerprint(tmp_path / "mmproj-f32.gguf") == fingerprint(ours)
