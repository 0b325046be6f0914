"""What kazetts reads from a talker GGUF without llama.cpp: voices, ids and embedding rows.

`token_embd` holds [P(text ids) | C(codec ids)] (llama.cpp's layout: the text projection is
folded in at conversion). Rows are read through the file's memory map and only the rows asked
for are dequantized (F32, F16, Q8_0, k-quants...), so the table is never materialized: llama.cpp's
own helper copies all of it to F32 (~635 MB for 0.6B).

Files written by kazetts carry `kazetts.*` metadata; files from llama.cpp's converter do not,
so the ids are then recovered from the token names it writes (`<|codec_pad|>`,
`<|codec_language_french|>`, `<|spk_vivian|>`, `<tts_pad>` ...).
"""

from __future__ import annotations

import pathlib
from typing import Sequence

import numpy as np

from kazetts.gguf import names as names
from kazetts.gguf.errors import ModelFileError
from kazetts.gguf.header import GGUFHeader
from kazetts.stages.prompt import VoiceTable, takes_instruct

# Control ids every Qwen3-TTS talker has, under the token names llama.cpp's converter gives them.
_CODEC_TOKENS = {
    "codec_pad": "<|codec_pad|>", "codec_bos": "<|codec_bos|>", "codec_eos": "<|codec_eos_token|>",
    "codec_think": "<|codec_think|>", "codec_nothink": "<|codec_nothink|>",
    "codec_think_bos": "<|codec_think_bos|>", "codec_think_eos": "<|codec_think_eos|>",
}
_TEXT_TOKENS = {"tts_pad": "<tts_pad>", "tts_bos": "<tts_text_bos>", "tts_eos": "<tts_text_eod>"}


class TalkerFile:
    """A talker GGUF opened for reading (memory-mapped)."""

    def __init__(self, path: pathlib.Path | str):
        self.path = pathlib.Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"talker GGUF not found: {self.path}")
        self.header = GGUFHeader(self.path)
        arch = self.field("general.architecture")
        if arch != names.TALKER_ARCH:
            raise ModelFileError(f"{self.path} is a {arch!r} GGUF, not a Qwen3-TTS talker ({names.TALKER_ARCH!r})")
        for required in (names.TOKEN_EMBD, names.OUTPUT):
            if required not in self.header.tensors:
                raise ModelFileError(f"{self.path} has no {required}")
        embd_shape = self.header.tensors[names.TOKEN_EMBD][0]
        self.hidden_size = int(embd_shape[0])
        self.codec_vocab_size = int(self.header.tensors[names.OUTPUT][0][1])
        self.text_vocab_size = int(embd_shape[1]) - self.codec_vocab_size
        self.voices = self._voices()

    def field(self, key: str, default=None):
        return self.header.kv.get(key, default)

    # -- embedding rows (EmbeddingRows protocol of kazetts.prompt) --------------------------------
    def rows(self, ids: Sequence[int]) -> np.ndarray:
        """Rows of token_embd as float32 [n, hidden], dequantizing only those rows."""
        return self.header.rows(names.TOKEN_EMBD, ids)

    def text(self, ids: Sequence[int]) -> np.ndarray:
        return self.rows(ids)

    def codec(self, ids: Sequence[int]) -> np.ndarray:
        return self.rows(np.asarray(ids, dtype=np.int64) + self.text_vocab_size)

    # -- voices ---------------------------------------------------------------------------------
    def _voices(self) -> VoiceTable:
        if self.field(names.K_MODEL_TYPE) is not None:
            return self._voices_from_metadata()
        return self._voices_from_token_names()

    def _voices_from_metadata(self) -> VoiceTable:
        c, t = names.K_CODEC, names.K_TEXT
        dialects = dict(zip(self.field(names.K_SPEAKERS, []), self.field(names.K_SPEAKER_DIALECTS, [])))
        model_type = self.field(names.K_MODEL_TYPE)
        size = self.field(names.K_MODEL_SIZE, "")
        return VoiceTable(
            tts_pad=self.field(t + "tts_pad_token_id"), tts_bos=self.field(t + "tts_bos_token_id"),
            tts_eos=self.field(t + "tts_eos_token_id"),
            codec_pad=self.field(c + "pad_id"), codec_bos=self.field(c + "bos_id"), codec_eos=self.field(c + "eos_token_id"),
            codec_think=self.field(c + "think_id"), codec_nothink=self.field(c + "nothink_id"),
            codec_think_bos=self.field(c + "think_bos_id"), codec_think_eos=self.field(c + "think_eos_id"),
            languages=dict(zip(self.field(names.K_LANGUAGES, []), self.field(names.K_LANGUAGE_IDS, []))),
            speakers=dict(zip(self.field(names.K_SPEAKERS, []), self.field(names.K_SPEAKER_IDS, []))),
            speaker_dialects={k: v for k, v in dialects.items() if v},
            model_type=model_type,
            supports_instruct=takes_instruct(model_type, size))

    def _voices_from_token_names(self) -> VoiceTable:
        tokens = self.field("tokenizer.ggml.tokens")
        index = {tok: i for i, tok in enumerate(tokens)}
        missing = [tok for tok in [*_CODEC_TOKENS.values(), *_TEXT_TOKENS.values()] if tok not in index]
        if missing:
            raise ModelFileError(f"{self.path}: no kazetts metadata and no token named {missing[0]}")
        codec = {key: index[tok] - self.text_vocab_size for key, tok in _CODEC_TOKENS.items()}
        text = {key: index[tok] for key, tok in _TEXT_TOKENS.items()}

        def named(prefix: str) -> dict[str, int]:
            return {tok[len(prefix):-2]: i - self.text_vocab_size for tok, i in index.items()
                    if tok.startswith(prefix) and tok.endswith("|>") and i >= self.text_vocab_size}

        speakers = named("<|spk_")
        # llama.cpp's converter keeps only Base models, which take an x-vector and no instruct.
        return VoiceTable(**text, **codec, languages=named("<|codec_language_"), speakers=speakers,
                          model_type="custom_voice" if speakers else "base", supports_instruct=False)
