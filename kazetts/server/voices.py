"""The voices a request may name: the model's speakers, and saved (cloned) voices once those
exist (the `SavedVoices` hook), listed in the shape Open WebUI reads: {"voices": [{"id", "name"}]}."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from kazetts.server.errors import bad_request

# OpenAI's built-in names: clients send them by default (Open WebUI falls back to "alloy"); they
# mean the server's default voice.
OPENAI_VOICES = ("alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse",
                 "marin", "cedar")


class SavedVoices(Protocol):
    """Where saved voices come from (voice cloning adds one): names, and a voice's x-vector."""

    def names(self) -> list[str]: ...

    def embedding(self, name: str) -> np.ndarray: ...


class VoiceCatalog:
    def __init__(self, speakers: list[str], languages: list[str], default: str | None = None,
                 saved: SavedVoices | None = None):
        self.speakers, self.languages, self.saved = speakers, languages, saved
        if default is not None and default.lower() not in speakers and default not in self._saved_names():
            raise ValueError(f"unknown default voice {default!r}; choose one of {speakers + self._saved_names()}")
        self.default = default or (speakers[0] if speakers else None)

    def _saved_names(self) -> list[str]:
        return self.saved.names() if self.saved is not None else []

    def listing(self) -> list[dict]:
        voices = [{"id": name, "name": name, "kind": "speaker", "languages": self.languages} for name in self.speakers]
        voices += [{"id": name, "name": name, "kind": "saved", "languages": self.languages} for name in self._saved_names()]
        return voices

    def resolve(self, name: str | None) -> dict:
        """TTS keyword arguments for a requested voice; a 400 naming the choices if unknown."""
        if name is None or name.lower() in OPENAI_VOICES:
            name = self.default
            if name is None:
                return {}
        if name.lower() in self.speakers:
            return {"speaker": name.lower()}
        if name in self._saved_names():
            return {"speaker_embedding": self.saved.embedding(name)}
        choices = self.speakers + self._saved_names()
        raise bad_request(f"unknown voice {name!r}; choose one of {choices} (or an OpenAI name for the default "
                          f"voice {self.default!r})", "voice", "voice_not_found")
