"""Native enrollment (kazetts/voice.h): the resampler is libsoxr built into libkazetts from
python-soxr's sdist, the same samples as the Python engine's python-soxr, bit for bit, on the
committed recordings and on rates made from the 24 kHz one."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import soundfile
import soxr
from conftest import DUMPS

from kazetts import native
from kazetts.stages import audio_input, mel
from kazetts.validation import goldens
from kazetts.validation.oracles import mel as mel_oracle

_SIGNATURES = {
    "kz_resample_has_soxr": (ctypes.c_int, []),
    "kz_resample_length": (ctypes.c_int64, [ctypes.c_int64, ctypes.c_int32]),
    "kz_resample": (
        ctypes.c_int,
        [
            ctypes.POINTER(ctypes.c_float),
            ctypes.c_int64,
            ctypes.c_int32,
            ctypes.POINTER(ctypes.c_float),
            ctypes.c_char_p,
            ctypes.c_size_t,
        ],
    ),
}


def native_resample(pcm: np.ndarray, sample_rate: int) -> np.ndarray:
    lib = native.bind(_SIGNATURES)
    pcm = np.ascontiguousarray(pcm, np.float32)
    out = np.empty(lib.kz_resample_length(len(pcm), sample_rate), np.float32)
    err = ctypes.create_string_buffer(512)
    status = lib.kz_resample(native.ptr(pcm), len(pcm), sample_rate, native.ptr(out), err, len(err))
    if status:
        raise ValueError(err.value.decode())
    return out


def recording(name: str) -> tuple[np.ndarray, int]:
    audio, sr = soundfile.read(goldens.recording_path(DUMPS, name), dtype="float32")
    return audio_input.to_mono(audio), sr


def test_built_with_libsoxr():
    """The Makefile's builds (make test, make asan) link libsoxr: KAZETTS_SOXR_SRC."""
    assert native.bind(_SIGNATURES).kz_resample_has_soxr() == 1


@pytest.mark.parametrize("name", sorted(goldens.RECORDINGS))
def test_resample_committed_recordings_as_python_soxr(name):
    audio, sr = recording(name)
    assert native_resample(audio, sr).tobytes() == audio_input.resample(audio, sr).tobytes()


@pytest.mark.parametrize("rate", [8000, 11025, 16000, 22050, 44100, 48000])
def test_resample_any_rate_as_python_soxr(rate):
    audio, sr = recording("en_24k")
    made = np.asarray(soxr.resample(audio, sr, rate, quality=audio_input.SOXR_QUALITY), np.float32)
    got, want = native_resample(made, rate), audio_input.resample(made, rate)
    assert len(got) == int(np.ceil(len(made) * 24000 / rate))
    assert got.tobytes() == want.tobytes()


def test_resample_short_and_bad_arguments():
    click = np.zeros(7, np.float32)
    click[3] = 0.5
    assert native_resample(click, 44100).tobytes() == audio_input.resample(click, 44100).tobytes()
    lib = native.bind(_SIGNATURES)
    assert lib.kz_resample_length(10, 0) == -1 and lib.kz_resample_length(-1, 16000) == -1
    out, err = np.empty(7, np.float32), ctypes.create_string_buffer(512)
    assert lib.kz_resample(native.ptr(click), 7, -16000, native.ptr(out), err, len(err)) == 1  # INVALID_ARGUMENT
    assert b"positive rate" in err.value


@pytest.mark.parametrize("name", sorted(goldens.RECORDINGS))
def test_log_mel_equals_its_numpy_oracle(name):
    """The C++ front-end (FFT written for it, double precision) gives the numpy oracle's floats."""
    audio, sr = recording(name)
    audio = audio_input.resample(audio, sr)
    assert mel.log_mel(audio).tobytes() == mel_oracle.log_mel(audio).tobytes()


@pytest.mark.parametrize("n", [mel.PAD + 1, mel.N_FFT, mel.min_samples(5), 48000 + 17])
def test_log_mel_edges_and_noise_equal_the_oracle(n):
    audio = np.random.default_rng(n).normal(0, 0.1, n).astype(np.float32)
    audio[: n // 3] = 0.0  # silence: the log floor
    got = mel.log_mel(audio)
    assert got.shape == (mel.n_frames(n), mel.N_MELS)
    assert got.tobytes() == mel_oracle.log_mel(audio).tobytes()


def test_log_mel_too_short():
    with pytest.raises(ValueError, match=f"needs > {mel.PAD}"):
        mel.log_mel(np.ones(mel.PAD, np.float32))
