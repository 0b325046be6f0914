"""Audio encodings of the speech endpoint, each a stream: push(float32 audio) -> bytes.

pcm (24 kHz s16le mono) and wav (a header with unknown length, 0xFFFFFFFF, which libsndfile,
Python's wave module and browsers read to the end) are plain bytes. flac, opus (Ogg Opus) and
mp3 go through soundfile, so they exist only where the installed libsndfile can write them
(probed at start: Termux's libsndfile is built without mp3). Ogg Opus pages are final as they
are written, so opus streams as frames are decoded; libsndfile rewrites the FLAC STREAMINFO
and the mp3 Xing header when it closes the file, so those two are sent whole at the end (a
header sent early would tell decoders a wrong length). aac: libsndfile has no encoder.
"""

from __future__ import annotations

import io
import struct

import numpy as np

SAMPLE_RATE = 24000
CONTENT_TYPES = {
    "wav": "audio/wav",
    "pcm": "audio/pcm",
    "flac": "audio/flac",
    "opus": "audio/ogg; codecs=opus",
    "mp3": "audio/mpeg",
    "aac": "audio/aac",
}
_SOUNDFILE = {"flac": ("FLAC", "PCM_16", False), "opus": ("OGG", "OPUS", True), "mp3": ("MP3", "MPEG_LAYER_III", False)}
ALL_FORMATS = list(CONTENT_TYPES)


def pcm16(audio: np.ndarray) -> bytes:
    """Float samples in [-1, 1] as little-endian 16-bit PCM."""
    return (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()


def wav_header(sample_rate: int = SAMPLE_RATE) -> bytes:
    """A mono 16-bit WAV header whose sizes say "unknown" (the stream's length is not known yet)."""
    unknown = 0xFFFFFFFF
    fmt = struct.pack("<HHIIHH", 1, 1, sample_rate, 2 * sample_rate, 2, 16)
    return (
        b"RIFF"
        + struct.pack("<I", unknown)
        + b"WAVEfmt "
        + struct.pack("<I", 16)
        + fmt
        + b"data"
        + struct.pack("<I", unknown)
    )


def available_formats() -> list[str]:
    """The formats this machine can write (soundfile ones probed by encoding a frame)."""
    formats = ["wav", "pcm"]
    for name in _SOUNDFILE:
        try:
            encoder = Encoder(name)
            encoder.push(np.zeros(1920, np.float32))
            encoder.finish()
        except Exception:  # noqa: BLE001 - any failure means libsndfile cannot write it here
            continue
        formats.append(name)
    return formats


class Encoder:
    """One response's encoder. `streams`: whether bytes come out before finish()."""

    def __init__(self, name: str, sample_rate: int = SAMPLE_RATE):
        self.name, self.sample_rate = name, sample_rate
        self._started = False
        self._file = self._sink = None
        self.streams = name in ("wav", "pcm")
        if name in _SOUNDFILE:
            import soundfile

            major, subtype, self.streams = _SOUNDFILE[name]
            self._sink = io.BytesIO()
            self._sent = 0
            self._file = soundfile.SoundFile(
                self._sink, "w", samplerate=sample_rate, channels=1, format=major, subtype=subtype
            )
        elif name not in ("wav", "pcm"):
            raise ValueError(f"no encoder for {name!r}")

    def push(self, audio: np.ndarray) -> bytes:
        if self._file is None:
            head = wav_header(self.sample_rate) if self.name == "wav" and not self._started else b""
            self._started = True
            return head + pcm16(audio)
        if len(audio):
            self._file.write(np.asarray(audio, np.float32))
        return self._drain() if self.streams else b""

    def finish(self) -> bytes:
        if self._file is None:
            return self.push(np.zeros(0, np.float32)) if not self._started else b""
        self._file.close()
        return self._drain()

    def _drain(self) -> bytes:
        data = self._sink.getbuffer()[self._sent :].tobytes()
        self._sent += len(data)
        return data
