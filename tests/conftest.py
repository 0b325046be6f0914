"""Shared fixtures: the repo paths, the reference environment, tiny synthetic checkpoints."""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
DUMPS = REPO / "dumps"
REF_PYTHON = pathlib.Path(os.environ.get("KAZETTS_REF_PYTHON", REPO / ".venv-ref" / "bin" / "python"))


@pytest.fixture(scope="session")
def ref_python() -> pathlib.Path:
    """The reference environment's interpreter; tests that need torch skip without it."""
    if not REF_PYTHON.exists():
        pytest.skip(f"reference environment missing ({REF_PYTHON}): run `make ref`")
    return REF_PYTHON


def run_script(python: pathlib.Path | str, script: str, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    """Run scripts/<script> with the given interpreter; output is captured as text."""
    return subprocess.run([str(python), str(REPO / "scripts" / script), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """Builds (once per session) tiny synthetic checkpoints: tiny_checkpoint(preset, type, seed)."""
    from kazetts.synthetic.checkpoint import make_checkpoint

    built: dict = {}

    def get(preset: str = "tiny", model_type: str = "custom_voice", seed: int = 0) -> pathlib.Path:
        key = (preset, model_type, seed)
        if key not in built:
            out = tmp_path_factory.mktemp(f"{preset}-{model_type}-{seed}")
            make_checkpoint(preset, out, model_type, seed)
            built[key] = out
        return built[key]

    return get


@pytest.fixture(scope="session")
def tiny_gguf(tiny_checkpoint, tmp_path_factory):
    """Converts (once per session) a tiny checkpoint: tiny_gguf(preset, type, out_type) -> (talker, mmproj)."""
    from kazetts.tools.convert import convert_checkpoint

    built: dict = {}

    def get(preset: str = "tiny", model_type: str = "custom_voice", out_type: str = "f32", seed: int = 0):
        key = (preset, model_type, out_type, seed)
        if key not in built:
            out = tmp_path_factory.mktemp(f"gguf-{preset}-{model_type}-{out_type}")
            built[key] = convert_checkpoint(tiny_checkpoint(preset, model_type, seed), out, out_type, verbose=False)
        return built[key]

    return get


@pytest.fixture(scope="session")
def tiny_tts(tiny_gguf):
    """Loads (once per session) kazetts.TTS on a converted tiny checkpoint, F32 codec: tiny_tts(preset, type, seed)."""
    from kazetts.engine.tts import TTS

    built: dict = {}

    def get(preset: str = "tiny", model_type: str = "custom_voice", seed: int = 0):
        key = (preset, model_type, seed)
        if key not in built:
            talker, mmproj = tiny_gguf(preset, model_type, "f32", seed)
            built[key] = TTS(talker, mmproj, threads=2, codec_weights="f32")
        return built[key]

    return get
