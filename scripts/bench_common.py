"""Shared by the stage benchmarks: cached synthetic checkpoints and single-stage mmproj files."""

from __future__ import annotations

import os
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
CACHE = pathlib.Path(os.environ.get("KAZETTS_CACHE", pathlib.Path.home() / ".cache" / "kazetts")) / "models"
REF_PYTHON = pathlib.Path(os.environ.get("KAZETTS_REF_PYTHON", REPO / ".venv-ref" / "bin" / "python"))


def checkpoint(preset: str) -> pathlib.Path:
    """The synthetic custom_voice checkpoint of a preset (seed 0), built once."""
    from kazetts.synthetic.checkpoint import make_checkpoint

    d = CACHE / f"synthetic-{preset}-custom_voice-0"
    if not (d / ".complete").exists():
        print(f"building synthetic checkpoint {d} ...", flush=True)
        make_checkpoint(preset, d, "custom_voice", 0)
        (d / ".complete").write_text("ok")
    return d


def stage_mmproj(ck: pathlib.Path, preset: str, stage: str) -> pathlib.Path:
    """An F32 mmproj holding one stage's tensors only ("cp": code predictor, "codec": decoder)."""
    from kazetts import convert as C
    from kazetts import gguf_names as N

    path = CACHE / f"synthetic-{preset}-{stage}-only-f32.gguf"
    if path.exists():
        return path
    print(f"writing {path} ...", flush=True)
    c = C._Checkpoint(ck)
    tensors = C._code_tensors(c) if stage == "cp" else C._wav_tensors(c)

    def kv(w):
        C._general(w, c, path.stem, "mmproj", 0)
        C._mmproj_kv(w, c)
        C._kazetts_keys(w, c)

    tmp = path.with_suffix(".tmp")
    C._write_file(tmp, N.MMPROJ_ARCH, tensors, "f32", True, kv, lambda m: None)
    tmp.rename(path)
    return path
