"""Long text is split in order, at sentence then clause boundaries, losing nothing: libkazetts' rule
(kazetts.engine.text_split, which both engines use) on its own, and against the regex statement
of it (kazetts.validation.oracles.text_split)."""

from __future__ import annotations

import random

import pytest

from kazetts.engine import text_split
from kazetts.engine.text_split import cut_point, sentence_ends, split_text
from kazetts.validation import goldens
from kazetts.validation.oracles import text_split as oracle


def _sentences(text: str) -> list[str]:
    cuts = [0] + [end for end in sentence_ends(text) if 0 < end < len(text)] + [len(text)]
    return [text[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]


def test_sentences_in_many_scripts():
    text = "Bonjour ! Ça va ? Oui.\n今天天气很好。我们去公园吧！Le 14 juillet 1789… c'est loin. 🙂 Fin"
    pieces = _sentences(text)
    assert "".join(pieces) == text
    assert pieces[:3] == ["Bonjour ! ", "Ça va ? ", "Oui.\n"]
    assert "今天天气很好。" in pieces and "我们去公园吧！" in pieces
    assert pieces[-1] == "🙂 Fin"


def test_numbers_and_abbreviated_decimals_are_not_sentence_ends():
    assert _sentences("Il a 3.5 ans. Oui.") == ["Il a 3.5 ans. ", "Oui."]


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


def test_cut_point_in_characters_never_at_or_before_earliest():
    window = "é, un mot, deux"
    assert cut_point(window) == cut_point(window, 3) == 11  # after "mot, "
    assert cut_point(window, 11) == 15  # nothing after 11 but the window's end
    assert cut_point("字字字字", 2) == 4 and cut_point("字，字字", 0) == 2


@pytest.mark.parametrize("seed", range(5))
def test_five_thousand_characters_keep_every_character_in_order(seed):
    rng = random.Random(seed)
    alphabet = list("abcdefghij éàü,;:.!?…。！？，、\n 0123456789") + ["🙂", "字"]
    text = "".join(rng.choice(alphabet) for _ in range(5000))
    pieces = split_text(text, max_chars=200)
    assert "".join(pieces) == text
    assert all(0 < len(p) <= 200 for p in pieces)


def test_whitespace_only_nul_and_bad_limit():
    assert "".join(split_text("   \n  ")) == "   \n  "
    assert split_text("a\0b. c\0", max_chars=5) == ["a\0b. ", "c\0"]  # NUL is a character like any other
    with pytest.raises(ValueError):
        split_text("x", max_chars=0)


def test_the_native_rule_refuses_bad_input():
    lib = text_split.lib()
    assert lib.kz_text_split(b"\xff\xfe", 10, None, 0) == -1
    assert lib.kz_text_split(b"ok", 0, None, 0) == -1
    assert lib.kz_text_sentence_ends(b"\xc3", None, 0) == -1
    assert lib.kz_text_cut_point(b"ok", -1) == -1 and lib.kz_text_cut_point(b"\xe5\xad", 0) == -1


# -- against the regex statement of the rule ---------------------------------------------------------


def _texts():
    texts = [case.text for case in goldens.CASES]
    texts += [
        "Bonjour ! Ça va ? Oui.\n今天天气很好。我们去公园吧！Le 14 juillet 1789… c'est loin. 🙂 Fin",
        "Il a 3.5 ans. Oui.",
        "One. Two. Three. Four.",
        "un deux trois, " * 40,
        "mot " * 100,
        "字" * 250,
        "   \n  ",
        "Fin.\u00a0Nouvelle\u3000phrase。\n\n终\u2029x",
        'Quote." Next!) (Yes?] ok。」next',
    ]
    rng = random.Random(0)
    alphabet = list("abcdefghij éàü,;:.!?…。！？，、\n 0123456789\"')]”’\t\u00a0\u3000\u2028") + ["🙂", "字"]
    texts += ["".join(rng.choice(alphabet) for _ in range(3000)) for _ in range(4)]
    return texts


@pytest.mark.parametrize("max_chars", [7, 50, 100, 300])
def test_split_is_the_regex_one(max_chars):
    for text in _texts():
        assert split_text(text, max_chars) == oracle.split_text(text, max_chars)


def test_sentence_ends_and_cut_points_are_the_regex_ones():
    rng = random.Random(1)
    for text in _texts():
        assert sentence_ends(text) == oracle.sentence_ends(text)
        for _ in range(20):  # windows of text streamed in, with what was already committed
            start = rng.randrange(len(text) + 1)
            window = text[start : start + rng.randrange(1, 300)]
            earliest = rng.randrange(len(window) + 1)
            assert cut_point(window, earliest) == oracle.cut_point(window, earliest), (window, earliest)
