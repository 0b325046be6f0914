"""Talker inputs for every voice mode, exactly as the reference builds them.

The layout is libkazetts' (`kz_prompt_build` in kazetts/rules.h; stated in
native/src/stages/prompt.h): the one definition both engines run. This module hands it a
request and takes back a `Prompt`: the prefill rows, the text rows fed one per generated step,
and P(tts_pad) for the steps after them. A request the model cannot take is a ValueError with
libkazetts' one-line message, before any row is read. Rows and ids come from the talker file
(`TalkerFile`), never from this module.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from kazetts import native
from kazetts.stages.talker_file import TalkerFile

# Chat wrapper of the text: ids[0:3] = <|im_start|>assistant\n, ids[-5:] = <|im_end|>\n<|im_start|>assistant\n
ROLE_TOKENS = 3
TAIL_TOKENS = 5
_INVALID_ARGUMENT = 1  # KZ_ERR_INVALID_ARGUMENT: a request the model cannot take
_PREFILL, _TRAILING, _TTS_PAD = 0, 1, 2  # kz_prompt_part

_I32, _F32 = ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_float)


class _Request(ctypes.Structure):
    """kz_prompt_request (kazetts/rules.h)."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("text_ids", _I32),
        ("n_text_ids", ctypes.c_int32),
        ("language", ctypes.c_char_p),
        ("speaker", ctypes.c_char_p),
        ("instruct_ids", _I32),
        ("n_instruct_ids", ctypes.c_int32),
        ("xvector", _F32),
        ("xvector_len", ctypes.c_int32),
        ("text_streaming", ctypes.c_int32),
        ("ref_text_ids", _I32),
        ("n_ref_text_ids", ctypes.c_int32),
        ("ref_frames", _F32),
        ("n_ref_frames", ctypes.c_int32),
        ("ref_frame_width", ctypes.c_int32),
    ]


_SIGNATURES = {
    "kz_prompt_build": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(_Request), ctypes.POINTER(ctypes.c_void_p)]),
    "kz_prompt_rows": (
        _F32,
        [ctypes.c_void_p, ctypes.c_int32, ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int32)],
    ),
    "kz_prompt_free": (None, [ctypes.c_void_p]),
}


@dataclass
class Prompt:
    """The talker prefill and the text rows still to be fed, one per generated step."""

    prefill: np.ndarray  # [L, hidden]
    trailing_text: np.ndarray  # [n, hidden]
    tts_pad: np.ndarray  # [hidden], the text row once trailing_text runs out

    def text_row(self, step: int) -> np.ndarray:
        """Text row added to the input of generated step `step` (0 = first generated frame)."""
        return self.trailing_text[step] if step < len(self.trailing_text) else self.tts_pad


def build_prompt(
    file: TalkerFile,
    text_ids: Sequence[int],
    *,
    language: str = "auto",
    speaker: str | None = None,
    instruct_ids: Sequence[int] | None = None,
    speaker_embedding: np.ndarray | None = None,
    text_streaming: bool = True,
) -> Prompt:
    """The reference's talker inputs. `text_ids` is the chat-wrapped text (`chat_text`),
    `instruct_ids` the instruct's (`instruct_text`), `speaker_embedding` an x-vector (Base)."""
    return _build(file, text_ids, language, speaker, instruct_ids, speaker_embedding, text_streaming)


def build_icl_prompt(
    file: TalkerFile,
    text_ids: Sequence[int],
    ref_text_ids: Sequence[int],
    ref_frames: np.ndarray,
    speaker_embedding: np.ndarray | None,
    *,
    language: str = "auto",
    speaker: str | None = None,
    instruct_ids: Sequence[int] | None = None,
    text_streaming: bool = True,
) -> Prompt:
    """The reference's ICL voice-clone inputs (`generate_icl_prompt`). `text_ids` is the
    chat-wrapped text (`chat_text`), `ref_text_ids` the chat-wrapped transcript of the reference
    (`ref_chat_text`), `ref_frames` [T, hidden] the reference frames' talker inputs: the sum of the
    16 code embeddings of each frame (`CodePredictor.embed_codes`). ICL takes neither a speaker
    nor an instruct: given, they are refused."""
    frames = np.ascontiguousarray(ref_frames, np.float32)
    if frames.ndim != 2:
        raise ValueError(f"reference frames must be [frames >= 1, {file.hidden_size}], got shape {frames.shape}")
    icl = (ref_text_ids, frames)
    return _build(file, text_ids, language, speaker, instruct_ids, speaker_embedding, text_streaming, icl)


def _ids(ids: Sequence[int] | None) -> np.ndarray | None:
    return None if ids is None else np.ascontiguousarray(ids, dtype=np.int32).reshape(-1)


def _build(file, text_ids, language, speaker, instruct_ids, speaker_embedding, text_streaming, icl=None) -> Prompt:
    voices = file.voices
    if speaker is not None and not isinstance(speaker, str):
        raise ValueError(f"speaker must be a name; choose one of {sorted(voices.speakers)}")
    if not isinstance(language, str):
        raise ValueError(f"language must be a string; choose one of {voices.spoken_languages}")
    xvector = None if speaker_embedding is None else np.ascontiguousarray(speaker_embedding, np.float32)
    if xvector is not None and xvector.ndim != 1:
        hidden = file.hidden_size
        raise ValueError(
            f"speaker embedding has shape {list(xvector.shape)}; this model needs {hidden} values (shape [{hidden}])"
        )
    text, instruct = _ids(text_ids), _ids(instruct_ids)
    r = _Request(struct_size=ctypes.sizeof(_Request))
    r.text_ids, r.n_text_ids = native.ptr(text, ctypes.c_int32), len(text)
    r.language, r.speaker = language.encode(), None if speaker is None else speaker.encode()
    if instruct is not None:
        r.instruct_ids, r.n_instruct_ids = native.ptr(instruct, ctypes.c_int32), len(instruct)
    if xvector is not None:
        r.xvector, r.xvector_len = native.ptr(xvector), len(xvector)
    r.text_streaming = int(bool(text_streaming))
    if icl is not None:
        ref_ids, frames = _ids(icl[0]), icl[1]
        r.ref_text_ids, r.n_ref_text_ids = native.ptr(ref_ids, ctypes.c_int32), len(ref_ids)
        r.ref_frames, (r.n_ref_frames, r.ref_frame_width) = native.ptr(frames), frames.shape
    lib = native.bind(_SIGNATURES)
    out = ctypes.c_void_p()
    status = lib.kz_prompt_build(file.handle, ctypes.byref(r), ctypes.byref(out))
    if status == _INVALID_ARGUMENT:
        raise ValueError(file.last_error())
    file._check(status)
    try:
        prefill, trailing, tts_pad = (_rows(lib, out, part) for part in (_PREFILL, _TRAILING, _TTS_PAD))
    finally:
        lib.kz_prompt_free(out)
    return Prompt(prefill, trailing, tts_pad[0])


def _rows(lib, prompt: ctypes.c_void_p, part: int) -> np.ndarray:
    """A copy of one part's rows [n, hidden]."""
    n, hidden = ctypes.c_int32(), ctypes.c_int32()
    data = lib.kz_prompt_rows(prompt, part, ctypes.byref(n), ctypes.byref(hidden))
    if n.value == 0:
        return np.zeros((0, hidden.value), np.float32)
    return np.ctypeslib.as_array(data, shape=(n.value, hidden.value)).copy()


def chat_text(text: str) -> str:
    """The assistant turn the reference tokenizes around the text to speak."""
    return f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n"


def ref_chat_text(ref_text: str) -> str:
    """The assistant turn the reference tokenizes around the transcript of an ICL reference."""
    return f"<|im_start|>assistant\n{ref_text}<|im_end|>\n"


def instruct_text(instruct: str) -> str:
    """The user turn the reference tokenizes around an instruct."""
    return f"<|im_start|>user\n{instruct}<|im_end|>\n"
