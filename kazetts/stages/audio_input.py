"""Reference audio for voice cloning: a file or (array, sample rate) -> mono float32 at 24 kHz.

As the reference (`Qwen3TTSModel._normalize_audio_inputs`, qwen-tts 0.1.1) prepares it: the file
is read as float32 (soundfile: WAV, FLAC, OGG/Vorbis, Opus ..., whatever libsndfile reads),
channels are averaged, and any other rate is resampled to 24 kHz by soxr at its "HQ" quality,
which is what `librosa.resample` (res_type "soxr_hq") runs, then cut or zero-padded to
ceil(n * 24000 / sr) samples as librosa's `fix_length` does. No gain normalization.

On top of the reference, audio that cannot give a speaker embedding is refused with a one-line
ValueError naming the argument: empty, non-finite, silent, or shorter than the speaker
encoder's receptive field; and too long (memory).
"""

from __future__ import annotations

import math
import os
import pathlib
import warnings

import numpy as np


MIN_SAMPLE_RATE = 8000  # telephone speech; below it there is no voice left to encode
SAMPLE_RATE = 24000  # the speaker encoder's and the codec encoder's rate (speaker_encoder_config.sample_rate)
SOXR_QUALITY = "soxr_hq"  # librosa.resample's default res_type, passed to soxr.resample as is
MAX_SECONDS = 60.0  # longer references do not clone better; memory grows with the length
SILENCE_PEAK = 1e-4  # -80 dBFS: below this a reference holds no voice
SHORT_SECONDS = 1.0  # below this the speaker embedding is a poor estimate (a warning, not an error)
MAX_CHANNELS = 16  # more "channels" than this is an array passed as [channels, samples]


def read_audio(path: str | os.PathLike, name: str = "ref_audio") -> tuple[np.ndarray, int]:
    """A sound file as float32 [samples] or [samples, channels], and its sample rate."""
    import soundfile

    p = pathlib.Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{name}: no such audio file: {p}")
    try:
        audio, sr = soundfile.read(str(p), dtype="float32", always_2d=False)
    except (RuntimeError, soundfile.LibsndfileError) as e:
        raise ValueError(f"{name}: cannot read {p} as audio ({e}); give a WAV, FLAC or OGG file") from None
    return audio, int(sr)


def to_mono(audio: np.ndarray, name: str = "ref_audio") -> np.ndarray:
    """The mean of the channels of a [samples, channels] array (a [samples] array as is)."""
    a = np.asarray(audio)
    if a.ndim == 2 and a.shape[1] > MAX_CHANNELS:
        raise ValueError(
            f"{name}: an array of shape {a.shape} has {a.shape[1]} channels; give [samples] or [samples, channels]"
        )
    if a.ndim not in (1, 2):
        raise ValueError(f"{name}: audio must be [samples] or [samples, channels], got shape {a.shape}")
    a = a.astype(np.float32, copy=False)
    return a.mean(axis=-1, dtype=np.float32) if a.ndim == 2 else a


def resample(audio: np.ndarray, sr: int, target: int = SAMPLE_RATE) -> np.ndarray:
    """`librosa.resample(audio, orig_sr=sr, target_sr=target)` (soxr HQ, fixed length), without librosa."""
    if sr == target:
        return audio
    import soxr

    out = np.asarray(soxr.resample(audio, sr, target, quality=SOXR_QUALITY), dtype=np.float32)
    n = int(math.ceil(len(audio) * (float(target) / sr)))
    return out[:n] if len(out) >= n else np.concatenate([out, np.zeros(n - len(out), np.float32)])


def append_silence(audio: np.ndarray, seconds: float) -> np.ndarray:
    """The 24 kHz reference with round(seconds * 24000) zeros after it: the usual remedy for ICL
    continuing the reference's last phoneme into its output (both encoders then end on silence).
    `seconds` as check_ref_silence returns it (enroll checks it once, before any work)."""
    n = round(seconds * SAMPLE_RATE)
    return np.concatenate([audio, np.zeros(n, np.float32)]) if n else audio


def reference_audio(source, min_samples: int, name: str = "ref_audio") -> np.ndarray:
    """A cloning reference (path, or (array, sample rate)) as mono float32 at 24 kHz, checked.

    `min_samples` (at 24 kHz) is the shortest input the speaker encoder takes."""
    if isinstance(source, (str, os.PathLike)):
        audio, sr = read_audio(source, name)
    elif isinstance(source, tuple) and len(source) == 2:
        audio, sr = source
        if isinstance(sr, bool) or not isinstance(sr, (int, np.integer)) or sr <= 0:
            raise ValueError(f"{name}: the sample rate must be a positive integer, got {sr!r}")
        sr = int(sr)
    else:
        raise ValueError(
            f"{name} must be an audio file path or an (array, sample_rate) tuple, got {type(source).__name__}"
        )
    if sr < MIN_SAMPLE_RATE:
        raise ValueError(
            f"{name}: a sample rate of {sr} Hz is too low to clone a voice from (at least "
            f"{MIN_SAMPLE_RATE} Hz; record at 16 kHz or more)"
        )
    mono = to_mono(audio, name)
    if mono.size == 0:
        raise ValueError(f"{name}: the audio is empty")
    if not np.isfinite(mono).all():
        raise ValueError(f"{name}: the audio holds NaN or infinite samples")
    seconds = mono.size / sr
    if seconds > MAX_SECONDS:
        raise ValueError(
            f"{name}: the audio is {seconds:.1f} s long; at most {MAX_SECONDS:g} s is taken "
            "(3-10 s of clean speech clone best: trim it)"
        )
    out = resample(mono, sr)
    if out.size < min_samples:
        raise ValueError(
            f"{name}: the audio is {seconds * 1000:.0f} ms long; the speaker encoder needs at "
            f"least {1000 * min_samples / SAMPLE_RATE:.0f} ms ({min_samples} samples at {SAMPLE_RATE} Hz)"
        )
    peak = float(np.abs(out).max())
    if peak < SILENCE_PEAK:
        raise ValueError(f"{name}: the audio is silent (peak {peak:.1e}, below -80 dBFS)")
    if seconds < SHORT_SECONDS:
        warnings.warn(
            f"{name} is only {seconds:.2f} s long: 3-10 s of speech give a better voice", RuntimeWarning, stacklevel=3
        )
    if peak > 1.0:  # the reference only prints this too, and does not normalize
        warnings.warn(f"{name} exceeds full scale (peak {peak:.2f}); it is used as is", RuntimeWarning, stacklevel=3)
    return out
