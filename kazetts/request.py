"""A request's vocabulary, shared by both engines, the CLI and the server: `Request` (one field per
option, the native kz_tts_request's names), the ranges its numbers must fall in, the reference's
defaults, how each field is checked, and the old names still taken.

The package's ground floor (numpy only): `kazetts -h`, argument parsing and the server's request
checks stay free of llama_cpp and the native library. The samplers that apply these options are
kazetts.stages.sampling's."""

from __future__ import annotations

import difflib
import functools
import math
import sys
import warnings
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

MAX_THREADS = 512  # GGML_MAX_N_THREADS
MAX_BATCH = 16  # requests at once on one model (kz_tts_params.max_batch's bound, KZ_TTS_MAX_BATCH)
MAX_SEED = 2**63 - 1  # the native engine's request takes an int64 seed: both engines then draw alike
MAX_TOP_K = 2**31 - 1  # the native request's int32; any top_k >= the vocabulary keeps every token
MIN_SPEED, MAX_SPEED = 0.25, 4.0  # `speed`: the output's time-stretch (kazetts.engine.time_stretch)
MAX_TEXT_CHARS = 100_000  # one request's text (about an hour and a half of speech): as native/src/engine/tts.cpp
MAX_REF_SILENCE = 2.0  # seconds of silence `ref_silence` may append (about 0.5 s is the usual remedy)

# The reference's generate defaults (qwen_tts Qwen3TTSModel._merge_generate_kwargs' hard_defaults,
# the same for the talker and the code predictor's subtalker_*): the one copy of these numbers.
# The native engine's kz_tts_default_request is pinned to them (tests/test_native_engine.py).
TEMPERATURE, TOP_K, TOP_P, REPETITION_PENALTY = 0.9, 50, 1.0, 1.05
MIN_FRAMES = 2  # end-of-speech banned for a piece's first frames: the reference's min_new_tokens


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
    "cp_temperature": (_positive, "a number > 0"),
    "cp_top_k": (_top_k, "an integer >= 0 (0: off)"),
    "cp_top_p": (_top_p, "a number in (0, 1]"),
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


def check_int(name: str, value, low: int, high: int | None = None) -> int:
    """`value` as an int in low..high, else a ValueError naming the argument and the range."""
    valid = f"{low}..{high}" if high is not None else f">= {low}"
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer {valid}, got {shown(value)}")
    if value < low or (high is not None and value > high):
        raise ValueError(f"{name} must be {valid}, got {shown(value)}")
    return int(value)


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


def check_ref_silence(seconds) -> float:
    """`ref_silence` as a float in 0..MAX_REF_SILENCE seconds (ValueError naming it otherwise)."""
    if not (_number(seconds) and 0.0 <= float(seconds) <= MAX_REF_SILENCE):
        raise ValueError(
            f"ref_silence must be a number of seconds in 0..{MAX_REF_SILENCE:g} (about 0.5 helps ICL), got {seconds!r}"
        )
    return float(seconds)


def _flag(name: str, none: bool = False):
    def check(value):
        if value is None and none:
            return None
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be True{', False or None' if none else ' or False'}, got {shown(value)}")
        return bool(value)

    return check


def _text(name: str, none: bool = True):
    def check(value):
        if value is None and none:
            return None
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string, got {type(value).__name__}")
        return value

    return check


def _optional(check):
    return lambda value: None if value is None else check(value)


def _given(value):
    return value  # checked where it is used, against the model (shape, file, voice)


# Each field of a Request and how it is checked on its own (what it must be against the model, e.g.
# a known speaker or the x-vector's size, the engine checks): the one copy of these checks, which
# the engines, the CLI and the server use.
CHECKS = {
    "speaker": _text("speaker"),
    "language": _text("language", none=False),
    "instruct": _text("instruct"),
    "xvector": _given,
    "voice": _given,
    "ref_audio": _given,
    "ref_text": _text("ref_text"),
    "xvector_only": _flag("xvector_only", none=True),
    "ref_codes": _given,
    "ref_silence": check_ref_silence,
    "text_streaming": _flag("text_streaming"),
    "greedy": _flag("greedy"),
    **{name: functools.partial(check_option, name) for name in OPTIONS},
    "seed": _optional(lambda value: check_int("seed", value, 0, MAX_SEED)),
    "max_frames": _optional(lambda value: check_int("max_frames", value, 1)),
    "chunk_frames": lambda value: check_int("chunk_frames", value, 1),
    "min_frames": lambda value: check_int("min_frames", value, 0),
    "speed": check_speed,
}


@dataclass(frozen=True, eq=False)
class Request:
    """One synthesis request: everything but the text, for `TTS.stream`, `stream_text` and
    `synthesize` (whose keyword options are these fields), the native engine and the server.

    It mirrors the native engine's kz_tts_request (native/include/kazetts/tts.h) field for field,
    under the same names (Java's Options spells them in camelCase), plus the Python engine's own:
    voice cloning (`voice`, `ref_audio`, `ref_text`, `xvector_only`, `ref_codes`, `ref_silence`)
    and `speed`. Each field is checked on creation (a one-line ValueError naming it); the sampling
    numbers are rounded to float32 as kz_tts_request holds them, so both engines sample with
    exactly the same numbers. The defaults are the reference's (kz_tts_default_request is pinned
    to them).

    The voice: a named `speaker` (CustomVoice; plus an `instruct` on 1.7B), an `instruct`
    describing the voice (VoiceDesign) or an `xvector` [hidden] (Base); `language` "auto" or one
    of the model's. Base models clone a voice: `voice` (TTS.enroll, Voice.load) or `ref_audio` (a
    path or (array, sample_rate)) with an optional `ref_text`; `xvector_only` True is x-vector
    cloning, False ICL, None ICL when there is a reference text; `ref_silence` seconds (0..2) of
    silence appended to ref_audio; or ICL directly from `ref_codes` [T, 16], `ref_text` and
    `xvector`. `text_streaming` is the reference's streaming text mode.

    Sampling takes the reference's generate options: `temperature`, `top_k` (0: off), `top_p`,
    `repetition_penalty` for the talker's codebook 0 and `cp_temperature`, `cp_top_k`, `cp_top_p`
    for the code predictor's 1..15 (the reference's subtalker_*); `greedy` is argmax after the
    repetition penalty; `seed` (0..MAX_SEED) makes sampling reproducible (None: a random one).
    `max_frames` caps each text piece (None: a budget from its length), `min_frames` bans
    end-of-speech until a piece has that many, `chunk_frames` is the frames per audio chunk after
    a piece's first; `speed` (MIN_SPEED..MAX_SPEED) time-stretches the audio, pitch kept."""

    speaker: str | None = None
    language: str = "auto"
    instruct: str | None = None
    xvector: np.ndarray | None = None
    voice: Any = None  # a kazetts.Voice
    ref_audio: Any = None
    ref_text: str | None = None
    xvector_only: bool | None = None
    ref_codes: np.ndarray | None = None
    ref_silence: float = 0.0
    text_streaming: bool = True
    greedy: bool = False
    temperature: float = TEMPERATURE
    top_k: int = TOP_K
    top_p: float = TOP_P
    repetition_penalty: float = REPETITION_PENALTY
    cp_temperature: float = TEMPERATURE
    cp_top_k: int = TOP_K
    cp_top_p: float = TOP_P
    seed: int | None = None
    max_frames: int | None = None
    chunk_frames: int = 4
    min_frames: int = MIN_FRAMES
    speed: float = 1.0

    def __post_init__(self):
        for f in fields(self):
            object.__setattr__(self, f.name, CHECKS[f.name](getattr(self, f.name)))

    def changed(self) -> dict:
        """The fields away from their defaults, by name."""
        changed = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None if f.default is None else value != getattr(DEFAULT_REQUEST, f.name):
                changed[f.name] = value
        return changed


FIELDS = frozenset(f.name for f in fields(Request))
# The old names of fields, still taken for a release with a DeprecationWarning. One name each:
# the native request's (xvector; cp_* for the reference's subtalker_*).
OLD_NAMES = {
    "speaker_embedding": "xvector",
    "x_vector_only": "xvector_only",
    "subtalker_temperature": "cp_temperature",
    "subtalker_top_k": "cp_top_k",
    "subtalker_top_p": "cp_top_p",
}


def field_names(options: dict, stacklevel: int = 2) -> dict:
    """Keyword options as Request fields: an old name is taken with a DeprecationWarning naming the
    new one (shown at `stacklevel`: 1 is the caller of this function, 2 its caller ...); an unknown
    one is a TypeError naming it."""
    named = {}
    for name, value in options.items():
        new = OLD_NAMES.get(name, name)
        if new not in FIELDS:
            near = difflib.get_close_matches(name, sorted(FIELDS) + sorted(OLD_NAMES), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise TypeError(f"unknown request option {name!r}{hint}; the options are kazetts.Request's fields")
        if new != name:
            if new in options:
                raise TypeError(f"{name} is the old name of {new}: give {new} alone")
            warnings.warn(f"{name}= is deprecated: use {new}=", DeprecationWarning, stacklevel=stacklevel + 1)
        named[new] = value
    return named


def request_fields(request: Request | None, options: dict, stacklevel: int = 2) -> dict:
    """`request`'s fields away from the defaults (None: none) with the keyword options over them
    (see field_names), not checked: what the native engine's wrapper hands to its own checks."""
    if request is not None and not isinstance(request, Request):
        raise TypeError(
            f"request must be a kazetts.Request, got {type(request).__name__} (the options are keywords: speaker=...)"
        )
    return {**(request.changed() if request is not None else {}), **field_names(options, stacklevel + 1)}


def make_request(request: Request | None, options: dict, stacklevel: int = 2) -> Request:
    """`request` (None: the defaults) with the keyword options over its fields, checked."""
    return Request(**request_fields(request, options, stacklevel + 1))


DEFAULT_REQUEST = Request()
