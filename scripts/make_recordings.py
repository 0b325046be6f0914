#!/usr/bin/env python3
"""Writes the committed cloning references dumps/recordings/* (kazetts.validation.goldens.RECORDINGS).

espeak-ng speaks each sentence (22050 Hz; deterministic for one espeak-ng version), soxr
resamples it to the recording's rate, soundfile writes 16-bit PCM. CI never runs this: the
files are committed. Needs `apt-get install espeak-ng` and the runtime environment.

    .venv/bin/python scripts/make_recordings.py [--out dumps/recordings]
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import soundfile  # noqa: E402

from kazetts.stages.audio_input import resample, to_mono  # noqa: E402
from kazetts.validation import goldens  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]


def speak(text: str, voice: str) -> tuple:
    with tempfile.TemporaryDirectory() as tmp:
        wav = pathlib.Path(tmp) / "espeak.wav"
        subprocess.run(["espeak-ng", "-v", voice, "-s", "150", "-w", str(wav), text], check=True)
        audio, sr = soundfile.read(str(wav), dtype="float32")
    return to_mono(audio), sr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=pathlib.Path, default=REPO / "dumps" / goldens.RECORDINGS_DIR)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rec in goldens.RECORDINGS.items():
        audio, sr = speak(rec.text, rec.voice)
        audio = resample(audio, sr, rec.rate)
        path = args.out / rec.file
        soundfile.write(str(path), audio, rec.rate, subtype="PCM_16")
        print(f"{name:12s} {path} {len(audio) / rec.rate:5.2f} s at {rec.rate} Hz, {path.stat().st_size // 1024} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
