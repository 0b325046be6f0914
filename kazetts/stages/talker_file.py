"""What kazetts reads from a talker GGUF besides llama.cpp: voices, ids and embedding rows.

libkazetts reads it (`kz_talker_file_*` in kazetts/rules.h, native/src/stages/talker_file.cpp),
the one reader both engines use. `token_embd` holds [P(text ids) | C(codec ids)] (llama.cpp's
layout: the text projection is folded in at conversion); only the rows asked for are read and
dequantized, so the table is never materialized (llama.cpp's own helper copies all of it to F32,
~635 MB for the 0.6B).

Files written by kazetts carry `kazetts.*` metadata; files from llama.cpp's converter do not,
so the ids are then recovered from the token names it writes (`<|codec_pad|>`,
`<|codec_language_french|>`, `<|spk_vivian|>`, `<tts_pad>` ...). Opening the file checks what
llama.cpp would load and then abort or crash on, and that every id is inside its table.
"""

from __future__ import annotations

import ctypes
import json
import os
import pathlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from kazetts import native
from kazetts.gguf.header import GGUFError

_SIGNATURES = {
    "kz_talker_file_open": (
        ctypes.c_int,
        [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_size_t],
    ),
    "kz_talker_file_free": (None, [ctypes.c_void_p]),
    "kz_talker_file_last_error": (ctypes.c_char_p, [ctypes.c_void_p]),
    "kz_talker_file_info": (ctypes.c_char_p, [ctypes.c_void_p]),
    "kz_talker_file_rows": (
        ctypes.c_int,
        [
            ctypes.c_void_p,
            ctypes.c_int32,
            ctypes.POINTER(ctypes.c_int32),
            ctypes.c_int32,
            ctypes.POINTER(ctypes.c_float),
        ],
    ),
}
_TEXT_ROWS, _CODEC_ROWS = 0, 1  # kz_embedding_table
_FILE_ERRORS = (2, 3)  # KZ_ERR_IO, KZ_ERR_FORMAT


@dataclass(frozen=True)
class VoiceTable:
    """A model's special ids, speakers and languages, as libkazetts read them from the talker."""

    tts_pad: int
    tts_bos: int
    tts_eos: int
    codec_pad: int
    codec_bos: int
    codec_eos: int
    codec_think: int
    codec_nothink: int
    codec_think_bos: int
    codec_think_eos: int
    languages: dict[str, int]  # includes dialect entries such as "sichuan_dialect"
    speakers: dict[str, int]
    speaker_dialects: dict[str, str]
    spoken_languages: list[str]  # what a caller may ask for: "auto" plus every non-dialect language
    model_type: str
    supports_instruct: bool


class TalkerFile(native.NativeHandle):
    """A talker GGUF opened by libkazetts (a GGUFError naming the file when it cannot be used)."""

    _free_name = "kz_talker_file_free"
    _last_error_name = "kz_talker_file_last_error"

    def __init__(self, path: pathlib.Path | str):
        self.path = pathlib.Path(path)
        lib = native.bind(_SIGNATURES)
        handle, err = ctypes.c_void_p(), native.error_buffer()
        status = lib.kz_talker_file_open(os.fsencode(self.path), ctypes.byref(handle), err, len(err))
        if status in _FILE_ERRORS:
            raise GGUFError(err.value.decode("utf-8", "replace"))
        native.check(status, err.value)
        self._handle = handle
        info = json.loads(lib.kz_talker_file_info(handle))
        self.hidden_size, self.text_vocab_size, self.codec_vocab_size = (
            info["hidden"],
            info["text_vocab"],
            info["codec_vocab"],
        )
        self.embd_span = (info["embd_offset"], info["embd_bytes"])  # where token_embd lies in the file
        self.voices_from_kazetts_keys = info["metadata"] == "kazetts"  # else from llama.cpp's token names
        self.voices = VoiceTable(**info["voices"])

    @property
    def handle(self) -> ctypes.c_void_p:
        """The kz_talker_file handle, for the native calls that read it (kz_prompt_build)."""
        return self._handle

    def last_error(self) -> str:
        return native.library().kz_talker_file_last_error(self._handle).decode("utf-8", "replace")

    def text(self, ids: Sequence[int]) -> np.ndarray:
        """P(ids): projected text embedding rows, float32 [len(ids), hidden]."""
        return self._rows(_TEXT_ROWS, ids)

    def codec(self, ids: Sequence[int]) -> np.ndarray:
        """C(ids): codec embedding rows, float32 [len(ids), hidden]."""
        return self._rows(_CODEC_ROWS, ids)

    def _rows(self, table: int, ids: Sequence[int]) -> np.ndarray:
        ids = np.ascontiguousarray(ids, dtype=np.int32).reshape(-1)
        out = np.empty((len(ids), self.hidden_size), np.float32)
        lib = native.bind(_SIGNATURES)
        self._check(
            lib.kz_talker_file_rows(self._handle, table, native.ptr(ids, ctypes.c_int32), len(ids), native.ptr(out))
        )
        return out
