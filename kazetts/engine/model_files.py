"""A model's two files (talker + mmproj GGUF): finding them in a directory, and the rule that
they come from one checkpoint (the native engine's, kz_model_files_check in kazetts/rules.h)."""

from __future__ import annotations

import ctypes
import os
import pathlib

from kazetts import native
from kazetts.errors import ModelFileError

_SIGNATURES = {
    "kz_model_files_check": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t])
}


def find_model_files(model_dir: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """The one *-talker-*.gguf and the one *-mmproj-*.gguf in a directory."""
    found = {}
    for kind in ("talker", "mmproj"):
        files = sorted(pathlib.Path(model_dir).glob(f"*-{kind}-*.gguf"))
        if len(files) != 1:
            raise ValueError(f"{model_dir} must hold exactly one *-{kind}-*.gguf, found {[f.name for f in files]}")
        found[kind] = files[0]
    return found["talker"], found["mmproj"]


def check_model_files(talker, mmproj) -> None:
    """ModelFileError naming both files and what differs when they say they come from two
    checkpoints (the fingerprint `kazetts convert` writes into both, the model type): every 0.6B
    model has the same shapes, so the stages' widths cannot tell a CustomVoice talker from a Base one."""
    err = native.error_buffer()
    status = native.bind(_SIGNATURES).kz_model_files_check(
        os.fsencode(str(talker)), os.fsencode(str(mmproj)), err, len(err)
    )
    if status != 0:
        raise ModelFileError(err.value.decode("utf-8", "replace"))
