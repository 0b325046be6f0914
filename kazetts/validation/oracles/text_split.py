"""The long-text split stated with two regexes: an oracle of libkazetts' rule (kz_text_split,
kz_text_sentence_ends, kz_text_cut_point in rules.h; kazetts.engine.text_split binds them), which
tests/test_text_split.py holds against this. Tests only: the engines split with the native rule.

Whole sentences (ending at Latin or CJK punctuation or newlines) are packed into pieces of at
most `max_chars`, so a text that fits is one piece, exactly as the reference would say it; a
sentence longer than `max_chars` is cut at its last clause boundary (comma, semicolon, colon,
CJK comma) or, failing that, at the last space, or hard at `max_chars` for unbroken scripts.
Joining the pieces gives back the text exactly.
"""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])[\"'”’)\]]*\s+|(?<=[。！？])|\n+")
_CLAUSE = re.compile(r"[,;:，；：、]\s*")


def sentence_ends(text: str) -> list[int]:
    """Positions just after each sentence end (after its trailing whitespace)."""
    return [match.end() for match in _SENTENCE_END.finditer(text)]


def split_sentences(text: str) -> list[str]:
    """Sentences with their trailing whitespace kept, so that ''.join(...) == text."""
    pieces, start = [], 0
    for end in sentence_ends(text):
        if end > start:
            pieces.append(text[start:end])
            start = end
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def cut_point(window: str, earliest: int = 0) -> int:
    """Where to cut a sentence too long for `window`: after its last clause boundary, else after
    its last space, else at the window's end; never at or before `earliest`."""
    clauses = [m.end() for m in _CLAUSE.finditer(window) if earliest < m.end() < len(window)]
    spaces = [i + 1 for i, ch in enumerate(window) if ch.isspace() and i > 0 and i + 1 > earliest]
    return (clauses or spaces or [len(window)])[-1]


def _cut(sentence: str, max_chars: int) -> list[str]:
    pieces = []
    while len(sentence) > max_chars:
        cut = cut_point(sentence[:max_chars])
        pieces.append(sentence[:cut])
        sentence = sentence[cut:]
    return pieces + ([sentence] if sentence else [])


def split_text(text: str, max_chars: int = 300) -> list[str]:
    """Pieces of at most `max_chars` characters, in order; ''.join(pieces) == text."""
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    pieces: list[str] = []
    for sentence in split_sentences(text):
        for part in _cut(sentence, max_chars):
            if pieces and len(pieces[-1]) + len(part) <= max_chars:
                pieces[-1] += part
            else:
                pieces.append(part)
    return pieces
