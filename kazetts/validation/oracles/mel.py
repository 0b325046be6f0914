"""The oracle of the speaker encoder's log-mel front-end (native/src/stages/mel.cpp, which both
engines run): the same definition in numpy, held against the C++ by tests/test_native_enroll.py.

`mel_spectrogram` of qwen-tts 0.1.1 (modeling_qwen3_tts.py), as `extract_speaker_embedding`
calls it on 24 kHz audio:
  reflect pad (n_fft - hop) / 2 = 384 samples each side, frames of 1024 every 256 samples
  (torch.stft center=False), periodic Hann window, magnitude sqrt(re^2 + im^2 + 1e-9) (not
  power), a 128-band Slaney mel filterbank over 0-12 kHz with Slaney area norm
  (librosa.filters.mel defaults), natural log of max(x, 1e-5). No mean/variance normalization.

Frames: (n + 768 - 1024) // 256 + 1, about 93.75 a second. The spectrum is computed in float64
and rounded once to float32 (the reference works in float32 throughout).
"""

from __future__ import annotations

import functools

import numpy as np

SAMPLE_RATE = 24000
N_FFT = 1024
HOP = 256
N_MELS = 128
FMIN, FMAX = 0.0, 12000.0
PAD = (N_FFT - HOP) // 2
MAG_EPS = 1e-9
LOG_FLOOR = 1e-5
_BLOCK = 2048  # frames per FFT block: bounds the float64 scratch memory on long references

# Slaney's mel scale (librosa htk=False): linear below 1 kHz, logarithmic above.
_F_SP = 200.0 / 3
_LOG_HZ = 1000.0
_LOG_MEL = _LOG_HZ / _F_SP
_LOG_STEP = np.log(6.4) / 27.0


def hz_to_mel(hz: np.ndarray) -> np.ndarray:
    hz = np.asarray(hz, np.float64)
    mel = hz / _F_SP
    high = hz >= _LOG_HZ
    return np.where(high, _LOG_MEL + np.log(np.where(high, hz, _LOG_HZ) / _LOG_HZ) / _LOG_STEP, mel)


def mel_to_hz(mel: np.ndarray) -> np.ndarray:
    mel = np.asarray(mel, np.float64)
    return np.where(mel >= _LOG_MEL, _LOG_HZ * np.exp(_LOG_STEP * (mel - _LOG_MEL)), _F_SP * mel)


def mel_filterbank(
    sr: int = SAMPLE_RATE, n_fft: int = N_FFT, n_mels: int = N_MELS, fmin: float = FMIN, fmax: float = FMAX
) -> np.ndarray:
    """Slaney-normalized triangular filters, float32 [n_mels, 1 + n_fft // 2]: the values of
    `librosa.filters.mel(sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax)` (same rounding:
    triangles rounded to float32, then scaled in float64 and rounded again)."""
    freqs = np.fft.rfftfreq(n_fft, 1.0 / sr)
    edges = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    widths = np.diff(edges)
    rise = (freqs[None, :] - edges[:-2, None]) / widths[:-1, None]
    fall = (edges[2:, None] - freqs[None, :]) / widths[1:, None]
    triangles = np.maximum(0, np.minimum(rise, fall)).astype(np.float32)
    area = 2.0 / (edges[2:] - edges[:-2])
    return (triangles * area[:, None]).astype(np.float32)


@functools.lru_cache(maxsize=1)
def _filters() -> np.ndarray:
    return mel_filterbank().astype(np.float64)


def periodic_hann(n: int = N_FFT) -> np.ndarray:
    """torch.hann_window(n) (periodic), in float64."""
    return 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(n) / n)


def log_mel(audio: np.ndarray) -> np.ndarray:
    """float32 [frames, 128] log-mel of mono 24 kHz audio (time-major, bands fastest)."""
    y = np.asarray(audio, np.float64).reshape(-1)
    if y.size <= PAD:
        raise ValueError(f"audio of {y.size} samples is too short for the mel front-end (needs > {PAD})")
    padded = np.pad(y, PAD, mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP]
    window, filters = periodic_hann(), _filters()
    out = np.empty((len(frames), N_MELS), np.float32)
    for start in range(0, len(frames), _BLOCK):
        spec = np.fft.rfft(frames[start : start + _BLOCK] * window, axis=-1)
        magnitude = np.sqrt(spec.real**2 + spec.imag**2 + MAG_EPS)
        out[start : start + _BLOCK] = np.log(np.maximum(magnitude @ filters.T, LOG_FLOOR))
    return out
