"""Splitting long text into pieces one generation can say, without losing or reordering anything.

Pieces end at sentence boundaries (Latin and CJK punctuation, newlines); a sentence still longer
than `max_chars` is cut at its last clause boundary (comma, semicolon, colon, CJK comma) or,
failing that, at the last space, or hard at `max_chars` for unbroken scripts. Joining the pieces
with their separating whitespace gives back the text exactly.
"""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])[\"'”’)\]]*\s+|(?<=[。！？])|\n+")
_CLAUSE = re.compile(r"[,;:，；：、]\s*")


def split_sentences(text: str) -> list[str]:
    """Sentences with their trailing whitespace kept, so that ''.join(...) == text."""
    pieces, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        if match.end() > start:
            pieces.append(text[start:match.end()])
            start = match.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def _cut(sentence: str, max_chars: int) -> list[str]:
    pieces = []
    while len(sentence) > max_chars:
        window = sentence[:max_chars]
        clauses = [m.end() for m in _CLAUSE.finditer(window) if m.end() < len(window)]
        spaces = [i + 1 for i, ch in enumerate(window) if ch.isspace() and i > 0]
        cut = (clauses or spaces or [max_chars])[-1]
        pieces.append(sentence[:cut])
        sentence = sentence[cut:]
    return pieces + ([sentence] if sentence else [])


def split_text(text: str, max_chars: int = 300) -> list[str]:
    """Pieces of at most `max_chars` characters, in order; ''.join(pieces) == text.

    Short sentences are not merged: each piece is one generation, and sentence-sized pieces
    give the talker the context it was trained on while keeping the first audio early."""
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    pieces = []
    for sentence in split_sentences(text):
        pieces.extend(_cut(sentence, max_chars))
    return pieces
