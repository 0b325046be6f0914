"""Native enrollment (kz_tts_enroll, kazetts/tts.h): the same voice as the Python engine's
enroll, bit for bit (x-vector, reference codes, voice file bytes), from the committed recordings
at 16 kHz and from 44.1 kHz made of the 24 kHz one; the same refusals in the same words. Its
parts: the resampler is libsoxr built into libkazetts from python-soxr's sdist (the same samples
as python-soxr), and the log-mel front-end is C++ held against its numpy oracle."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import soundfile
import soxr
from conftest import DUMPS

from kazetts import native
from kazetts.engine.native_tts import NativeTTS
from kazetts.engine.tts import TTS
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


@pytest.fixture(scope="module")
def engines(tiny_gguf):
    """(Python TTS, NativeTTS) of the tiny Base model (F32, with its codec encoder)."""
    talker, mmproj = tiny_gguf("tiny", "base", "f32")
    return TTS(talker, mmproj, threads=2, codec_weights="f32"), NativeTTS(
        talker, mmproj, threads=2, codec_weights="f32"
    )


def made_at(rate: int) -> tuple[np.ndarray, int]:
    """The 16 kHz recording as is, or another rate made of the 24 kHz one by python-soxr."""
    if rate == 16000:
        return recording("en_16k")
    audio, sr = recording("en_24k")
    return np.asarray(soxr.resample(audio, sr, rate, quality=audio_input.SOXR_QUALITY), np.float32), rate


@pytest.mark.parametrize("rate", [16000, 44100])
@pytest.mark.parametrize("icl", [True, False])
def test_native_enroll_is_the_python_engines_voice(engines, rate, icl, tmp_path):
    python, nat = engines
    pcm, sr = made_at(rate)
    text = goldens.RECORDINGS["en_16k"].text if icl else None
    want = python.enroll((pcm, sr), text, ref_silence=0.5)
    got = nat.enroll(pcm, sr, text, ref_silence=0.5)
    assert got.x_vector.tobytes() == want.x_vector.tobytes()
    assert (got.ref_codes is None) == (not icl) and (want.ref_codes is None) == (not icl)
    if icl:
        assert got.ref_codes.shape[0] > 10 and np.array_equal(got.ref_codes, want.ref_codes)
    # (a voice file keeps ref_seconds as a float32: the Python engine's Voice holds the double until saved)
    assert (got.model, got.ref_text, got.ref_silence) == (want.model, want.ref_text, want.ref_silence)
    assert got.ref_seconds == np.float32(want.ref_seconds)
    assert got.save(tmp_path / "native.voice").read_bytes() == want.save(tmp_path / "python.voice").read_bytes()
    options = dict(language="english", greedy=True, max_frames=6)
    assert np.array_equal(
        nat.synthesize("Hello there.", voice=got, **options).codes,
        python.synthesize("Hello there.", voice=want, **options).codes,
    )


LOUD = np.sin(np.arange(24000) * 0.05).astype(np.float32) * 0.5


@pytest.mark.parametrize(
    "pcm, rate, ref_text, ref_silence",
    [
        (LOUD, 24000, " \n", 0.0),
        (LOUD, 24000, None, 2.5),
        (LOUD, 24000, None, -1.0),
        (LOUD[:8000], 4000, None, 0.0),
        (np.zeros(0, np.float32), 24000, None, 0.0),
        (np.where(np.arange(24000) == 7, np.nan, LOUD).astype(np.float32), 24000, None, 0.0),
        (np.zeros(24000, np.float32), 44100, None, 0.0),
        (LOUD[:300], 16000, None, 0.0),
        (np.tile(LOUD, 61), 24000, None, 0.0),
    ],
)
def test_both_engines_refuse_in_the_same_words(engines, pcm, rate, ref_text, ref_silence):
    python, nat = engines
    with pytest.raises(ValueError) as want:
        python.enroll((pcm, rate), ref_text, ref_silence=ref_silence)
    with pytest.raises(native.NativeError) as got:
        nat.enroll(pcm, rate, ref_text, ref_silence)
    words = str(want.value).split(", got ")[0]  # (Python shows the refused value with repr)
    assert words in str(got.value)


def test_both_engines_enroll_with_base_models_only(tiny_gguf):
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32")
    with pytest.raises(ValueError) as want:
        TTS(talker, mmproj, threads=2).enroll((LOUD, 24000))
    with pytest.raises(native.NativeError) as got, NativeTTS(talker, mmproj, threads=2) as nat:
        nat.enroll(LOUD, 24000)
    assert "voice cloning needs a Base model; this is a custom_voice model" in str(want.value)
    assert str(want.value) in str(got.value)
