"""Splitting long text into pieces one generation can say, without losing or reordering anything:
libkazetts' rule (kz_text_split, kz_text_sentence_ends, kz_text_cut_point in rules.h), the one
both engines use, in Python strings and character offsets.

Whole sentences (ending at Latin or CJK punctuation or newlines) are packed into pieces of at
most `max_chars`, so a text that fits is one piece, exactly as the reference would say it; a
sentence longer than `max_chars` is cut at its last clause boundary (comma, semicolon, colon,
CJK comma) or, failing that, at the last space, or hard at `max_chars` for unbroken scripts.
Joining the pieces gives back the text exactly. The rule stated with regexes, for the tests:
kazetts/validation/oracles/text_split.py.
"""

from __future__ import annotations

import ctypes

import numpy as np

from kazetts import native

_c_int32_p = ctypes.POINTER(ctypes.c_int32)
_SIGNATURES = {
    "kz_text_split": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_int32, _c_int32_p, ctypes.c_int32]),
    "kz_text_sentence_ends": (ctypes.c_int32, [ctypes.c_char_p, _c_int32_p, ctypes.c_int32]),
    "kz_text_cut_point": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_int32]),
    "kz_text_final_boundary": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_int32]),
    "kz_text_piece_end": (ctypes.c_int32, [ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32]),
}


def lib() -> ctypes.CDLL:
    """libkazetts with the text rules typed."""
    return native.bind(_SIGNATURES)


def _utf8(text: str) -> bytes:
    """The text as the rule reads it: UTF-8, NUL (where a C string would end) read as U+0001,
    which the rule treats alike (neither space, punctuation nor newline), at the same offset."""
    return text.encode("utf-8").replace(b"\0", b"\1")


def _offsets(call, data: bytes) -> list[int]:
    """The byte offsets a kz_text_* call with (ends, capacity) at its end writes."""
    n = call(None, 0)
    if n < 0:
        raise ValueError("libkazetts refused the text")
    ends = (ctypes.c_int32 * max(n, 1))()
    call(ends, n)
    return list(ends[:n])


def _chars(data: bytes, offsets: list[int]) -> list[int]:
    """Byte offsets of UTF-8 data -> character offsets (the code points that start before each)."""
    starts = np.concatenate([[0], np.cumsum((np.frombuffer(data, np.uint8) & 0xC0) != 0x80)])
    return [int(starts[b]) for b in offsets]


def split_text(text: str, max_chars: int = 300) -> list[str]:
    """Pieces of at most `max_chars` characters, in order; ''.join(pieces) == text."""
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    data = _utf8(text)
    ends = _offsets(lambda out, capacity: lib().kz_text_split(data, max_chars, out, capacity), data)
    whole = text.encode("utf-8")
    return [whole[a:b].decode("utf-8") for a, b in zip([0] + ends[:-1], ends)]


def sentence_ends(text: str) -> list[int]:
    """Positions just after each sentence end (after its trailing whitespace)."""
    data = _utf8(text)
    return _chars(data, _offsets(lambda out, capacity: lib().kz_text_sentence_ends(data, out, capacity), data))


def cut_point(window: str, earliest: int = 0) -> int:
    """Where to cut a sentence too long for `window`: after its last clause boundary, else after
    its last space, else at the window's end; never at or before `earliest`."""
    data = _utf8(window)
    at = lib().kz_text_cut_point(data, len(window[:earliest].encode("utf-8")))
    if at < 0:
        raise ValueError("libkazetts refused the text")
    return _chars(data, [at])[0]


def final_boundary(text: str, limit: int | None = None) -> int:
    """The last final boundary b (0 < b < len(text), b <= limit), or 0 if there is none: the text
    before it keeps its tokens whatever follows (the commit rule of text streamed in)."""
    data = _utf8(text)
    at = lib().kz_text_final_boundary(data, len(text) if limit is None else max(limit, 0))
    if at < 0:
        raise ValueError("libkazetts refused the text")
    return _chars(data, [at])[0]


def piece_end(text: str, piece_chars: int, committed: int, ended: bool) -> int | None:
    """Where the piece at the start of `text` ends once no later text can move it (`committed`
    characters already fed, `ended`: no more text comes); None while it may still grow."""
    data = _utf8(text)
    at = lib().kz_text_piece_end(data, piece_chars, len(text[:committed].encode("utf-8")), int(ended))
    if at == -1:
        return None
    if at < 0:
        raise ValueError("libkazetts refused the text")
    return _chars(data, [at])[0]
