"""Cloning references: files and arrays to mono 24 kHz float32, and the inputs that are refused."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import soundfile

from kazetts.stages import audio_input, mel

MIN = mel.min_samples(5)  # the speaker encoder's reflect paddings need 5 mel frames


def tone(seconds: float, sr: int, hz: float = 440.0, amplitude: float = 0.3) -> np.ndarray:
    t = np.arange(int(round(seconds * sr))) / sr
    return (amplitude * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def peak_hz(audio: np.ndarray, sr: int) -> float:
    spectrum = np.abs(np.fft.rfft(audio * np.hanning(len(audio))))
    return float(np.fft.rfftfreq(len(audio), 1 / sr)[spectrum.argmax()])


def test_24k_mono_is_taken_as_is():
    a = tone(2.0, 24000)
    out = audio_input.reference_audio((a, 24000), MIN)
    assert out.dtype == np.float32 and np.array_equal(out, a)


def test_stereo_file_and_array_become_the_channel_mean(tmp_path):
    left, right = tone(2.0, 24000, 440), tone(2.0, 24000, 660, 0.1)
    stereo = np.stack([left, right], axis=1)
    path = tmp_path / "stereo.wav"
    soundfile.write(path, stereo, 24000, subtype="FLOAT")
    want = (left + right) / 2
    assert np.array_equal(audio_input.reference_audio(str(path), MIN), want)
    assert np.array_equal(audio_input.reference_audio((stereo, 24000), MIN), want)


@pytest.mark.parametrize("sr", [8000, 16000, 22050, 44100, 96000])
def test_other_rates_are_resampled_to_24k(sr):
    """librosa's fixed length ceil(n * 24000 / sr); a 440 Hz tone stays 440 Hz at the same level."""
    a = tone(1.5, sr)
    out = audio_input.reference_audio((a, sr), MIN)
    assert len(out) == math.ceil(len(a) * 24000 / sr)
    assert abs(peak_hz(out, 24000) - 440) < 2
    core = slice(len(out) // 10, -len(out) // 10)
    assert abs(np.sqrt(np.mean(out[core] ** 2)) - 0.3 / np.sqrt(2)) < 0.01


def test_flac_and_ogg_files_are_read(tmp_path):
    a = tone(1.0, 16000)
    for name, subtype in (("ref.flac", "PCM_16"), ("ref.ogg", "VORBIS")):
        soundfile.write(tmp_path / name, a, 16000, subtype=subtype)
        out = audio_input.reference_audio(tmp_path / name, MIN)
        assert len(out) == 24000 and abs(peak_hz(out, 24000) - 440) < 2


@pytest.mark.parametrize(
    "audio, sr, message",
    [
        (np.zeros(0, np.float32), 24000, "empty"),
        (np.zeros(48000, np.float32), 24000, "silent"),
        (np.full(48000, 1e-5, np.float32), 24000, "silent"),
        (np.where(np.arange(48000) == 7, np.nan, 0.1).astype(np.float32), 24000, "NaN or infinite"),
        (np.where(np.arange(48000) == 7, np.inf, 0.1).astype(np.float32), 24000, "NaN or infinite"),
        (tone(61.0, 8000), 8000, "at most 60 s"),
        (np.zeros((2, 48000), np.float32), 24000, "48000 channels"),
        (np.zeros((4, 4, 4), np.float32), 24000, "must be \\[samples\\]"),
        (np.full(10, 0.5, np.float32), 1, "a sample rate of 1 Hz is too low to clone a voice from"),
        (tone(2.0, 7999), 7999, "at least 8000 Hz"),
    ],
)
def test_unusable_audio_is_a_one_line_error(audio, sr, message):
    with pytest.raises(ValueError, match=message) as info:
        audio_input.reference_audio((audio, sr), MIN)
    assert "\n" not in str(info.value) and str(info.value).startswith("ref_audio")


def test_the_shortest_reference_is_what_the_encoder_takes():
    """1280 samples at 24 kHz (53 ms) give 5 mel frames, the widest reflect padding + 1; one less is refused."""
    with pytest.warns(RuntimeWarning, match="only 0.05 s"):
        assert len(audio_input.reference_audio((tone(MIN / 24000, 24000), 24000), MIN)) == MIN
    with pytest.raises(ValueError, match="needs at least 53 ms"):
        audio_input.reference_audio((tone(1279 / 24000, 24000), 24000), MIN)
    with pytest.raises(ValueError, match="needs at least 53 ms"):  # the check is after resampling
        audio_input.reference_audio((tone(0.04, 16000), 16000), MIN)


def test_a_tenth_of_a_second_is_taken_with_a_warning():
    with pytest.warns(RuntimeWarning, match="3-10 s of speech"):
        out = audio_input.reference_audio((tone(0.1, 24000), 24000), MIN)
    assert len(out) == 2400


def test_sixty_seconds_are_taken_and_clipping_warns():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(audio_input.reference_audio((tone(60.0, 8000), 8000), MIN)) == 60 * 24000
    with pytest.warns(RuntimeWarning, match="exceeds full scale"):
        audio_input.reference_audio((tone(1.0, 24000, amplitude=1.5), 24000), MIN)


@pytest.mark.parametrize(
    "source, error, message",
    [
        (np.zeros(100, np.float32), ValueError, "path or an \\(array, sample_rate\\) tuple"),
        ((np.zeros(100, np.float32), 0), ValueError, "positive integer"),
        ((np.zeros(100, np.float32), 16000.5), ValueError, "positive integer"),
        ("/nonexistent/ref.wav", FileNotFoundError, "no such audio file"),
    ],
)
def test_bad_sources_name_the_argument(source, error, message):
    with pytest.raises(error, match=message):
        audio_input.reference_audio(source, MIN)


def test_a_file_that_is_not_audio_is_refused(tmp_path):
    path = tmp_path / "notes.wav"
    path.write_text("not audio")
    with pytest.raises(ValueError, match="cannot read .* as audio"):
        audio_input.reference_audio(path, MIN)
