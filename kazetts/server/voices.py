"""The voices a request may name: the model's speakers, saved (cloned) voices (the `SavedVoices`
hook; `VoiceFiles` reads a folder of .voice files) and voice design presets (name -> instruct,
`load_presets`), listed in the shape Open WebUI reads: {"voices": [{"id", "name"}]}."""

from __future__ import annotations

import json
import pathlib
from typing import Protocol

import numpy as np

from kazetts.engine.voice import ModelFingerprint, Voice
from kazetts.server.errors import bad_request

# OpenAI's built-in names: clients send them by default (Open WebUI falls back to "alloy"); they
# mean the server's default voice.
OPENAI_VOICES = (
    "alloy",
    "ash",
    "ballad",
    "coral",
    "echo",
    "fable",
    "onyx",
    "nova",
    "sage",
    "shimmer",
    "verse",
    "marin",
    "cedar",
)


class SavedVoices(Protocol):
    """Where saved voices come from (voice cloning adds one): names, and a voice's x-vector."""

    def names(self) -> list[str]: ...

    def embedding(self, name: str) -> np.ndarray: ...


class VoiceCatalog:
    """`aliases` are names that mean the default voice (OpenAI's, which HTTP clients send); the
    default is `default`, else the first voice (a speaker, else a saved voice, else a preset)."""

    def __init__(
        self,
        speakers: list[str],
        languages: list[str],
        default: str | None = None,
        saved: SavedVoices | None = None,
        presets: dict[str, str] | None = None,
        aliases: tuple[str, ...] = OPENAI_VOICES,
    ):
        self.speakers, self.languages, self.saved = speakers, languages, saved
        self.presets, self.aliases = dict(presets or {}), aliases
        if default is not None and default.lower() not in speakers and default not in self._named_voices():
            raise ValueError(f"unknown default voice {default!r}; choose one of {self.names()}")
        self.default = default or next(iter(self.names()), None)

    def _saved_names(self) -> list[str]:
        return self.saved.names() if self.saved is not None else []

    def _named_voices(self) -> list[str]:
        """Saved voices and presets: names matched as written (speakers ignore case)."""
        return self._saved_names() + list(self.presets)

    def names(self) -> list[str]:
        return self.speakers + self._named_voices()

    def listing(self) -> list[dict]:
        voices = [{"id": name, "name": name, "kind": "speaker", "languages": self.languages} for name in self.speakers]
        voices += [
            {"id": name, "name": name, "kind": "saved", "languages": self.languages} for name in self._saved_names()
        ]
        voices += [{"id": name, "name": name, "kind": "preset", "languages": self.languages} for name in self.presets]
        return voices

    def resolve(self, name: str | None) -> dict:
        """TTS keyword arguments for a requested voice; a 400 naming the choices if unknown."""
        if name is None or name.lower() in self.aliases:
            name = self.default
            if name is None:
                return {}
        if name.lower() in self.speakers:
            return {"speaker": name.lower()}
        if name in self._saved_names():
            return {"xvector": self.saved.embedding(name)}
        if name in self.presets:
            return {"instruct": self.presets[name]}
        aliases = f" (or an OpenAI name for the default voice {self.default!r})" if self.aliases else ""
        raise bad_request(f"unknown voice {name!r}; choose one of {self.names()}{aliases}", "voice", "voice_not_found")


class VoiceFiles:
    """Every <name>.voice file of a folder (`kazetts enroll`), read once and checked against the
    model, so that a voice made for another model is refused at start rather than per request.
    A voice speaks by its x-vector (the x-vector clone), as text streamed in can only do."""

    def __init__(self, folder: str | pathlib.Path, model: ModelFingerprint):
        folder = pathlib.Path(folder)
        if not folder.is_dir():
            raise ValueError(f"voice folder {folder} is not a directory")
        self._voices: dict[str, Voice] = {}
        for path in sorted(folder.glob("*.voice")):
            voice = Voice.load(path)
            model.check(voice.model, what=str(path))
            self._voices[path.stem] = voice

    def names(self) -> list[str]:
        return list(self._voices)

    def embedding(self, name: str) -> np.ndarray:
        return self._voices[name].x_vector


def load_presets(path: str | pathlib.Path) -> dict[str, str]:
    """Voice design presets from a JSON object {"name": "instruct describing the voice", ...}."""
    try:
        presets = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"cannot read the presets file {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise ValueError(f"the presets file {path} is not valid JSON: {error}") from None
    if not isinstance(presets, dict) or not all(
        isinstance(name, str) and name.strip() and isinstance(instruct, str) and instruct.strip()
        for name, instruct in presets.items()
    ):
        raise ValueError(
            f"the presets file {path} must be a JSON object of voice names to instructs, "
            '{"narrator": "A calm, low male voice."}'
        )
    return presets
