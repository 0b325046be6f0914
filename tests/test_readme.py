"""The documented real-weights commands (docs/models.md, "Real weights", moved there from the
README) work as written, on a fresh directory: run on a tiny synthetic checkpoint under the
official directory name."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys

import soundfile

from conftest import REPO

CHECKPOINT = "Qwen3-TTS-12Hz-0.6B-CustomVoice"


def doc_commands(page: str, section: str) -> list[list[str]]:
    """The shell commands of the first ```sh block after a heading of a markdown page."""
    text = (REPO / page).read_text(encoding="utf-8")
    block = re.search(rf"^## {re.escape(section)}\n.*?```sh\n(.*?)```", text, re.S | re.M).group(1)
    return [shlex.split(line, comments=True) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def test_real_weights_flow_works_as_written(tiny_checkpoint, tmp_path):
    shutil.copytree(tiny_checkpoint("tiny", "custom_voice", 0), tmp_path / CHECKPOINT)
    commands = doc_commands("docs/models.md", "Real weights")
    assert [c[:2] for c in commands] == [
        [".venv/bin/kazetts", "convert"],
        [".venv/bin/kazetts", "say"],
        [".venv/bin/kazetts", "quantize"],
        [".venv/bin/kazetts", "quantize"],
        [".venv/bin/kazetts", "say"],
    ]
    for command in commands:
        run = subprocess.run(
            [sys.executable, "-m", "kazetts", *command[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=600
        )
        assert run.returncode == 0, f"{shlex.join(command)}\n{run.stderr}"
    for wav in ("out.wav", "out-q8.wav"):
        audio, rate = soundfile.read(tmp_path / wav)
        assert rate == 24000 and len(audio) >= 2 * 1920
