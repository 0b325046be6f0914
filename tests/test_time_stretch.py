"""speed: WSOLA (libkazetts' kz_stretch_*, kazetts.engine.time_stretch) keeps the pitch, changes
the duration, streams, is the identity at 1.0, and gives the samples of its numpy statement
(kazetts.validation.oracles.time_stretch)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from kazetts import native
from kazetts.engine import time_stretch
from kazetts.engine.time_stretch import TimeStretch
from kazetts.validation.oracles import time_stretch as oracle

RATE = 24000
# The native sums of the correlation search run in another order than numpy's BLAS dot: where
# the compared segments are silent but for rounding noise, two shifts can then tie to the last
# bit and the other one wins. Measured: bit-identical on tones, noise and a chirp at nine speeds;
# on tones cut by exact silence at speed 1.7, 10 samples of ~1e-14 differ by at most 1.25e-13.
ORACLE_MAX_ABS = 1e-12


def tone(seconds: float, hz: float = 220.0) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (0.4 * np.sin(2 * np.pi * hz * t) * (1 + 0.3 * np.sin(2 * np.pi * 3 * t))).astype(np.float32)


def stretch(audio: np.ndarray, speed: float, chunks: list[int] | None = None, kind=TimeStretch) -> np.ndarray:
    ts = kind(speed, RATE)
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
    body = out[len(out) // 4 : 3 * len(out) // 4]
    assert 0.7 < np.sqrt(np.mean(body**2)) / np.sqrt(np.mean(audio**2)) < 1.3, "no gaps or doubling"


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


def _signals() -> dict[str, np.ndarray]:
    t = np.arange(3 * RATE) / RATE
    noise = np.random.default_rng(0).standard_normal(len(t))
    return {
        "tone": tone(3.0),
        "noise": (0.3 * noise).astype(np.float32),
        "chirp": (0.3 * np.sin(2 * np.pi * (100 + 200 * t) * t) + 0.05 * noise).astype(np.float32),
        "gaps": np.where(t % 0.5 < 0.25, 0.3 * np.sin(2 * np.pi * 150 * t), 0).astype(np.float32),
    }


@pytest.mark.parametrize("speed", [0.25, 0.6, 0.8, 1.3, 1.7, 2.0, 4.0])
def test_native_stream_gives_the_numpy_statements_samples(speed):
    for name, audio in _signals().items():
        chunks = [1920] * (len(audio) // 1920) + [len(audio) % 1920]
        got, want = stretch(audio, speed, chunks), stretch(audio, speed, chunks, kind=oracle.TimeStretch)
        assert len(got) == len(want) == round(len(audio) / speed), name
        assert got.dtype == want.dtype == np.float32
        assert np.abs(got - want).max() <= ORACLE_MAX_ABS, (name, np.abs(got - want).max())
        if name != "gaps":
            assert np.array_equal(got, want), name


def test_native_stream_refuses_bad_calls():
    lib = native.bind(time_stretch._SIGNATURES)
    handle = ctypes.c_void_p()
    for rate, speed in ((24000, 0.0), (24000, float("nan")), (24000, float("inf")), (50, 1.0)):
        assert lib.kz_stretch_new(rate, speed, ctypes.byref(handle)) == 1 and not handle
    assert lib.kz_stretch_new(RATE, 1.5, ctypes.byref(handle)) == 0
    try:
        assert lib.kz_stretch_push(handle, None, -1, None) == 1
        assert lib.kz_stretch_finish(handle, None) == 0
        assert lib.kz_stretch_finish(handle, None) == lib.kz_stretch_push(handle, None, 0, None) == 6  # KZ_ERR_STATE
        assert lib.kz_stretch_read(handle, None, -1) == -1 and lib.kz_stretch_read(handle, None, 0) == 0
    finally:
        lib.kz_stretch_free(handle)


# -- `speed` in the API and the command line: the same WSOLA, range and words as the server ---------


@pytest.mark.parametrize("speed", [0.5, 1.5])
def test_speed_in_the_api_stretches_the_audio_and_keeps_the_codes(tiny_tts, speed):
    tts = tiny_tts()
    request = dict(speaker="vivian", greedy=True, max_frames=12)
    plain = tts.synthesize("Hello there, how are you?", **request)
    chunks = [c.audio for c in tts.stream("Hello there, how are you?", **request)]
    fast = tts.synthesize("Hello there, how are you?", speed=speed, **request)
    assert np.array_equal(fast.codes, plain.codes)
    assert np.array_equal(fast.audio, stretch(np.concatenate(chunks), speed, [len(c) for c in chunks]))
    assert len(fast.audio) == round(len(plain.audio) / speed)
    text = [c.audio for c in tts.stream_text(iter(["Hello there, ", "how are you?"]), speed=speed, **request)]
    assert np.array_equal(np.concatenate(text), fast.audio), "stream_text stretches as stream does"


@pytest.mark.parametrize("speed", [0.1, 5, float("nan"), float("inf"), "fast", True, None])
def test_speed_out_of_range_in_the_api_is_the_servers_message(tiny_tts, speed):
    tts = tiny_tts()
    for call in (
        lambda: tts.synthesize("Hello.", speaker="vivian", speed=speed),
        lambda: next(iter(tts.stream_text(iter(["Hello."]), speaker="vivian", speed=speed))),
    ):
        with pytest.raises(ValueError, match=r"speed must be within 0.25..4.0, got "):
            call()


def test_speed_on_the_command_line(tiny_gguf, tmp_path):
    import subprocess
    import sys

    import soundfile

    from conftest import REPO

    model = tiny_gguf("tiny", "custom_voice", "f32")[0].parent
    say = [
        sys.executable,
        "-m",
        "kazetts",
        "say",
        "Hello there.",
        "--model",
        str(model),
        "--speaker",
        "vivian",
        "--greedy",
        "--max-frames",
        "8",
    ]
    for speed in ("1", "2"):
        result = subprocess.run(
            [*say, "--speed", speed, "-o", str(tmp_path / f"{speed}.wav")], capture_output=True, cwd=REPO, timeout=300
        )
        assert result.returncode == 0, result.stderr.decode()
    assert len(soundfile.read(tmp_path / "2.wav")[0]) == round(len(soundfile.read(tmp_path / "1.wav")[0]) / 2)
    result = subprocess.run(
        [*say, "--speed", "9", "-o", str(tmp_path / "9.wav")], capture_output=True, cwd=REPO, timeout=300
    )
    assert result.returncode == 2 and result.stderr.decode().strip().endswith(
        "argument --speed: speed must be within 0.25..4.0, got 9.0"
    )
    assert not (tmp_path / "9.wav").exists()
