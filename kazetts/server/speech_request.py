"""The body of POST /v1/audio/speech (and of the text-streaming WebSocket's start message),
checked field by field into a SpeechRequest; every refusal is a 400 naming the field.

OpenAI's fields: model, input, voice (a name, or {"id": ...}), instructions, response_format,
speed, stream_format; kazetts' extensions, under kazetts.Request's names: language, seed, the
sampling options of the engine (temperature, top_k, top_p, repetition_penalty, cp_temperature,
cp_top_k, cp_top_p; the old names subtalker_* still taken), and the aliases speaker = voice,
instruct = instructions that other Qwen3-TTS servers take. Unknown fields are ignored, as
clients add their own (Kokoro's "stream", "lang_code" ...).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any, Callable

from kazetts.request import CHECKS, INT_OPTIONS, OLD_NAMES, OPTIONS, Request
from kazetts.server.audio_formats import ALL_FORMATS
from kazetts.server.errors import bad_request

MAX_INPUT_CHARS = 4096  # OpenAI's limit, and what one request (or text stream) may hold here
# what an integer literal beyond Python's conversion limit reads as: more digits than that limit,
# outside every field's range, so the field's own check refuses it and names it
_TOO_MANY_DIGITS = 10 ** sys.get_int_max_str_digits()


def _integer(digits: str) -> int:
    if len(digits.lstrip("-")) <= sys.get_int_max_str_digits():
        return int(digits)
    return -_TOO_MANY_DIGITS if digits.startswith("-") else _TOO_MANY_DIGITS


def read_json(data: bytes | str, what: str) -> Any:
    """A request body or WebSocket message decoded; a 400 naming `what` if it is not JSON (or
    nests deeper than the decoder goes). An integer of more digits than Python converts is read
    as one of more digits still, for its field to refuse."""
    try:
        return json.loads(data, parse_int=_integer)
    except RecursionError:
        raise bad_request(f"{what} is nested too deeply", None, "invalid_json") from None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        raise bad_request(f"{what} is not valid JSON: {error}", None, "invalid_json") from None


@dataclass
class SpeechRequest:
    input: str
    voice_id: str | None
    response_format: str
    stream_format: str
    model: str
    engine_request: Request  # the voice, language, instruct (OpenAI's instructions), seed, speed, sampling


def _typed(body: dict, name: str, kind: type | tuple, default: Any = None, aliases: tuple[str, ...] = ()) -> Any:
    """body[name] (or an alias) if given, checked to be of `kind` (a bool is not a number here)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for key in (name, *aliases):
        value = body.get(key)
        if value is None:
            continue
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            wanted = " or ".join(
                "object" if k is dict else "number" if k is float else k.__name__
                for k in kinds
                if k is not int or float not in kinds
            )
            raise bad_request(f"'{key}' must be a {wanted}, got {type(value).__name__}", key, "invalid_type")
        return value
    return default


def _checked(name: str, value: Any) -> Any:
    """A kazetts.Request field checked as the engines check it (kazetts.request.CHECKS), its
    ValueError a 400 naming the field."""
    try:
        return CHECKS[name](value)
    except ValueError as error:
        raise bad_request(str(error), name, "invalid_value") from None


def parse_speech(
    body: Any,
    *,
    formats: list[str],
    default_format: str,
    resolve_voice: Callable[[str | None], dict],
    languages: list[str],
    takes_instruct: bool,
    max_input_chars: int = MAX_INPUT_CHARS,
    text_required: bool = True,
) -> SpeechRequest:
    """Checks a decoded JSON body; `resolve_voice(name)` gives the engine's voice arguments or
    raises the 400 for an unknown voice (see VoiceCatalog), as kazetts.Request fields."""
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object", None, "invalid_json")
    text = _typed(body, "input", str)
    if text_required:
        if text is None:
            raise bad_request("'input' is required: the text to say", "input", "missing_required_parameter")
        if not text.strip():
            raise bad_request("'input' is empty: there is nothing to say", "input", "empty_input")
    if text is not None and len(text) > max_input_chars:
        raise bad_request(
            f"'input' has {len(text)} characters; the limit is {max_input_chars}", "input", "string_above_max_length"
        )
    voice = _typed(body, "voice", (str, dict), aliases=("speaker",))
    if isinstance(voice, dict):
        voice = voice.get("id")
        if not isinstance(voice, str):
            raise bad_request('\'voice\' as an object must be {"id": "<voice id>"}', "voice", "invalid_type")
    fmt = _typed(body, "response_format", str, default_format)
    if fmt not in formats:
        reason = "is not a format" if fmt not in ALL_FORMATS else "cannot be written by this machine's libsndfile"
        raise bad_request(
            f"response_format {fmt!r} {reason}; choose one of {formats}", "response_format", "unsupported_format"
        )
    speed = _checked("speed", _typed(body, "speed", (int, float), 1.0))
    stream_format = _typed(body, "stream_format", str, "audio")
    if stream_format not in ("audio", "sse"):
        raise bad_request(
            f"stream_format {stream_format!r} is not one of ['audio', 'sse']", "stream_format", "invalid_value"
        )
    language = _typed(body, "language", str, "auto").lower()
    if language not in languages:
        raise bad_request(f"unknown language {language!r}; choose one of {languages}", "language", "invalid_value")
    seed = _checked("seed", _typed(body, "seed", int))
    sampling = {}
    for name in OPTIONS:
        old = tuple(old for old, new in OLD_NAMES.items() if new == name)
        value = _typed(body, name, int if name in INT_OPTIONS else (int, float), aliases=old)
        if value is not None:
            sampling[name] = _checked(name, value)
    instructions = _typed(body, "instructions", str, aliases=("instruct",))
    if instructions is not None and len(instructions) > max_input_chars:
        raise bad_request(
            f"'instructions' has {len(instructions)} characters; the limit is {max_input_chars}",
            "instructions",
            "string_above_max_length",
        )
    fields = resolve_voice(voice)
    if instructions and takes_instruct:
        fields["instruct"] = instructions
    return SpeechRequest(
        input=text or "",
        voice_id=voice,
        response_format=fmt,
        stream_format=stream_format,
        model=_typed(body, "model", str, "kazetts"),
        engine_request=Request(**fields, language=language, seed=seed, speed=speed, **sampling),
    )
