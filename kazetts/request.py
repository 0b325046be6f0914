"""A request's vocabulary, shared by both engines, the CLI and the server: the ranges its numbers
must fall in, and the sampling options with the reference's defaults and how each is checked.

The package's ground floor (numpy only): `kazetts -h`, argument parsing and the server's request
checks stay free of llama_cpp and the native library. The samplers that apply these options are
kazetts.stages.sampling's."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np

MAX_THREADS = 512  # GGML_MAX_N_THREADS
MAX_SEED = 2**63 - 1  # the native engine's request takes an int64 seed: both engines then draw alike
MAX_TOP_K = 2**31 - 1  # the native request's int32; any top_k >= the vocabulary keeps every token
MIN_SPEED, MAX_SPEED = 0.25, 4.0  # `speed`: the output's time-stretch (kazetts.engine.time_stretch)
MAX_TEXT_CHARS = 100_000  # one request's text (about an hour and a half of speech): as native/src/engine/tts.cpp
MAX_REF_SILENCE = 2.0  # seconds of silence `ref_silence` may append (about 0.5 s is the usual remedy)

# The reference's generate defaults (qwen_tts Qwen3TTSModel._merge_generate_kwargs' hard_defaults,
# the same for the talker and the code predictor's subtalker_*): the one copy of these numbers.
# The native engine's kz_tts_default_request is pinned to them (tests/test_native_engine.py).
TEMPERATURE, TOP_K, TOP_P, REPETITION_PENALTY = 0.9, 50, 1.0, 1.05


def _number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _float32(value) -> float | None:
    """A number as the native request's float32 holds it (inf beyond 3.4e38, 0 below 1.4e-45,
    also for integers too large for a float); None if it is not a number."""
    if not _number(value):
        return None
    if isinstance(value, (int, np.integer)) and abs(int(value)) >= 2**128:
        return math.inf if value > 0 else -math.inf
    with np.errstate(over="ignore", under="ignore"):
        return float(np.float32(value))


def _positive(value) -> float | None:
    number = _float32(value)
    return number if number is not None and math.isfinite(number) and number > 0 else None


def _top_k(value) -> int | None:
    """An integer >= 0; beyond MAX_TOP_K (the native int32) it is MAX_TOP_K, which keeps every token as well."""
    return (
        min(int(value), MAX_TOP_K)
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0
        else None
    )


def _top_p(value) -> float | None:
    number = _float32(value)
    return number if number is not None and 0 < number <= 1 else None


def shown(value) -> str:
    """A value as an error message quotes it: its repr, but a long integer by its length (a
    number of 400 digits would fill the message)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and not -(10**20) < value < 10**20:
        try:
            return f"an integer of {len(str(abs(int(value))))} digits"
        except ValueError:  # beyond the digits Python converts (sys.set_int_max_str_digits)
            return f"an integer of more than {sys.get_int_max_str_digits()} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."  # (a text given where a number was asked)


# A request's sampling options: how each is checked (and rounded to float32, the native request's
# type) and what it may be. The native engine checks the same ranges (kz_tts_request, tts.cpp).
OPTIONS = {
    "temperature": (_positive, "a number > 0"),
    "top_k": (_top_k, "an integer >= 0 (0: off)"),
    "top_p": (_top_p, "a number in (0, 1]"),
    "repetition_penalty": (_positive, "a number > 0"),
    "subtalker_temperature": (_positive, "a number > 0"),
    "subtalker_top_k": (_top_k, "an integer >= 0 (0: off)"),
    "subtalker_top_p": (_top_p, "a number in (0, 1]"),
}
# the options that take an integer (the others any number): how the CLI and the server read them
INT_OPTIONS = frozenset(name for name, (parse, _) in OPTIONS.items() if parse is _top_k)


def check_option(name: str, value):
    """One sampling option of a request as the engines use it; ValueError naming it if out of range
    (saying what float32, the native request's type, makes of a number it cannot hold)."""
    parse, valid = OPTIONS[name]
    checked = parse(value)
    if checked is None:
        held = _float32(value) if parse is not _top_k else None
        note = (
            f" ({held:g} in float32)" if held is not None and held != value and held in (0, math.inf, -math.inf) else ""
        )
        raise ValueError(f"{name} must be {valid}, got {shown(value)}{note}")
    return checked


def check_text_length(text: str) -> None:
    """ValueError for a text longer than one request takes (every piece's prompt is built before
    any compute: 10 MB of text kept a request busy for minutes before its first frame)."""
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(
            f"the text is {len(text)} characters; one request takes at most {MAX_TEXT_CHARS}: "
            "split it into several requests"
        )


def check_speed(value) -> float:
    """A request's `speed` (the output's time-stretch); ValueError naming it if out of range (the
    API, the CLI and the server give the same answer)."""
    if not (_number(value) and MIN_SPEED <= value <= MAX_SPEED):
        raise ValueError(f"speed must be within {MIN_SPEED}..{MAX_SPEED}, got {shown(value)}")
    return float(value)


@dataclass(frozen=True)
class Sampling:
    """A request's sampling options, the reference's ``generate`` arguments (``do_sample`` is
    ``not greedy``): the talker's CB0 and the code predictor's CB1..15 (``subtalker_*``).
    Checked on creation; the values are rounded to float32 as the native engine's request
    (kz_tts_request) holds them, so both engines sample with exactly the same numbers."""

    greedy: bool = False
    temperature: float = TEMPERATURE
    top_k: int = TOP_K
    top_p: float = TOP_P
    repetition_penalty: float = REPETITION_PENALTY
    subtalker_temperature: float = TEMPERATURE
    subtalker_top_k: int = TOP_K
    subtalker_top_p: float = TOP_P

    def __post_init__(self):
        if not isinstance(self.greedy, (bool, np.bool_)):
            raise ValueError(f"greedy must be True or False, got {self.greedy!r}")
        for name in OPTIONS:
            object.__setattr__(self, name, check_option(name, getattr(self, name)))
