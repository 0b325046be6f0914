"""Finding a model's two files (talker + mmproj GGUF) in a directory."""

from __future__ import annotations

import pathlib


def find_model_files(model_dir: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """The one *-talker-*.gguf and the one *-mmproj-*.gguf in a directory."""
    found = {}
    for kind in ("talker", "mmproj"):
        files = sorted(pathlib.Path(model_dir).glob(f"*-{kind}-*.gguf"))
        if len(files) != 1:
            raise ValueError(f"{model_dir} must hold exactly one *-{kind}-*.gguf, found {[f.name for f in files]}")
        found[kind] = files[0]
    return found["talker"], found["mmproj"]
