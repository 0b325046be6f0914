"""The text-stream commit rule stated in Python strings, for the tests only: the engines call
libkazetts' kz_text_final_boundary and kz_text_piece_end (rules.h, native/src/engine/text_stream.cpp).
tests/test_text_stream.py holds the export to this statement on random texts."""

from __future__ import annotations

from kazetts.validation.oracles.text_split import cut_point, sentence_ends

_CLOSERS = "\"'”’)]"  # may still extend a sentence end (the sentence-end pattern's closers)


def _settled(text: str, end: int) -> bool:
    """A sentence end no later text can move: a character follows that no end would swallow."""
    return end < len(text) and not text[end].isspace() and text[end] not in _CLOSERS


def final_boundary(text: str, limit: int | None = None) -> int:
    """The last final boundary b (0 < b < len(text), b <= limit), or 0 if there is none."""
    end = len(text) - 1 if limit is None else min(limit, len(text) - 1)
    for b in range(end, 0, -1):
        before, after = text[b - 1], text[b]
        if not before.isspace() and (
            after in " \t0123456789" or before in "0123456789" or (before.isalpha() and not after.isalpha())
        ):
            return b
    return 0


def piece_end(text: str, piece_chars: int, committed: int, ended: bool) -> int | None:
    """Where the piece at the start of `text` ends once no later text can move it; None while it grows."""
    for end in sentence_ends(text[:piece_chars]):
        if end >= max(piece_chars // 2, committed) and (ended or _settled(text, end)):
            return end
    if len(text) > piece_chars:
        return cut_point(text[:piece_chars], committed)
    return len(text) if ended else None
