"""speed: WSOLA keeps the pitch, changes the duration, streams, and is the identity at 1.0."""

from __future__ import annotations

import numpy as np
import pytest

from kazetts.engine.time_stretch import TimeStretch

RATE = 24000


def tone(seconds: float, hz: float = 220.0) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (0.4 * np.sin(2 * np.pi * hz * t) * (1 + 0.3 * np.sin(2 * np.pi * 3 * t))).astype(np.float32)


def stretch(audio: np.ndarray, speed: float, chunks: list[int] | None = None) -> np.ndarray:
    ts = TimeStretch(speed, RATE)
    cuts = np.cumsum(chunks or [len(audio)])
    parts = [ts.push(part) for part in np.split(audio, cuts[:-1])]
    return np.concatenate([*parts, ts.flush()])


def peak_hz(audio: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(audio * np.hanning(len(audio))))
    return float(np.argmax(spectrum) * RATE / len(audio))


@pytest.mark.parametrize("speed", [0.25, 0.5, 0.8, 1.3, 2.0, 4.0])
def test_duration_changes_and_pitch_stays(speed):
    audio = tone(2.0)
    out = stretch(audio, speed)
    assert len(out) == round(len(audio) / speed)
    assert abs(peak_hz(out) - 220.0) < 3.0, "the pitch is kept"
    assert np.isfinite(out).all() and np.abs(out).max() < 1.0
    body = out[len(out) // 4: 3 * len(out) // 4]
    assert 0.7 < np.sqrt(np.mean(body ** 2)) / np.sqrt(np.mean(audio ** 2)) < 1.3, "no gaps or doubling"


@pytest.mark.parametrize("speed", [0.6, 1.7])
def test_streaming_gives_the_same_samples_whatever_the_chunks(speed):
    audio = tone(1.5, 180.0) + 0.05 * np.random.default_rng(0).standard_normal(36000).astype(np.float32)
    whole = stretch(audio, speed)
    for chunks in ([1920] * 18 + [1440], [1, 7, 5000, 31000 - 8, 5000], [36000]):
        assert np.array_equal(stretch(audio, speed, chunks), whole)


def test_identity_at_one():
    audio = tone(0.3)
    ts = TimeStretch(1.0, RATE)
    assert ts.push(audio) is not None and np.array_equal(ts.push(audio), audio) and len(ts.flush()) == 0


@pytest.mark.parametrize("speed", [0.0, 0.2, 4.5, 10.0])
def test_speed_out_of_range(speed):
    with pytest.raises(ValueError, match="0.25..4"):
        TimeStretch(speed)
