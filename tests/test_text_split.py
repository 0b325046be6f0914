"""Long text is split in order, at sentence then clause boundaries, losing nothing."""

from __future__ import annotations

import random

import pytest

from kazetts.engine.text_split import split_sentences, split_text


def test_sentences_in_many_scripts():
    text = "Bonjour ! Ça va ? Oui.\n今天天气很好。我们去公园吧！Le 14 juillet 1789… c'est loin. 🙂 Fin"
    pieces = split_sentences(text)
    assert "".join(pieces) == text
    assert pieces[:3] == ["Bonjour ! ", "Ça va ? ", "Oui.\n"]
    assert "今天天气很好。" in pieces and "我们去公园吧！" in pieces
    assert pieces[-1] == "🙂 Fin"


def test_numbers_and_abbreviated_decimals_are_not_sentence_ends():
    assert split_sentences("Il a 3.5 ans. Oui.") == ["Il a 3.5 ans. ", "Oui."]


def test_sentences_are_packed_up_to_the_limit():
    text = "One. Two. Three. Four."
    assert split_text(text) == [text]
    assert split_text(text, max_chars=10) == ["One. Two. ", "Three. ", "Four."]


def test_long_sentence_cut_at_clauses_then_spaces_then_hard():
    clause = "un deux trois, " * 40
    pieces = split_text(clause, max_chars=100)
    assert "".join(pieces) == clause and all(len(p) <= 100 for p in pieces)
    assert all(p.endswith(", ") for p in pieces[:-1])
    words = "mot " * 100
    assert all(p.endswith(" ") for p in split_text(words, max_chars=50)[:-1])
    unbroken = "字" * 250
    assert [len(p) for p in split_text(unbroken, max_chars=100)] == [100, 100, 50]


@pytest.mark.parametrize("seed", range(5))
def test_five_thousand_characters_keep_every_character_in_order(seed):
    rng = random.Random(seed)
    alphabet = list("abcdefghij éàü,;:.!?…。！？，、\n 0123456789") + ["🙂", "字"]
    text = "".join(rng.choice(alphabet) for _ in range(5000))
    pieces = split_text(text, max_chars=200)
    assert "".join(pieces) == text
    assert all(0 < len(p) <= 200 for p in pieces)


def test_whitespace_only_and_bad_limit():
    assert "".join(split_text("   \n  ")) == "   \n  "
    with pytest.raises(ValueError):
        split_text("x", max_chars=0)
