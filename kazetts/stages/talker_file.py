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

import gguf

from kazetts.gguf import names as names
from kazetts.gguf.header import GGUFError, GGUFHeader
from kazetts.stages.prompt import VoiceTable, takes_instruct

# Control ids every Qwen3-TTS talker has, under the token names llama.cpp's converter gives them.
_CODEC_TOKENS = {
    "codec_pad": "<|codec_pad|>",
    "codec_bos": "<|codec_bos|>",
    "codec_eos": "<|codec_eos_token|>",
    "codec_think": "<|codec_think|>",
    "codec_nothink": "<|codec_nothink|>",
    "codec_think_bos": "<|codec_think_bos|>",
    "codec_think_eos": "<|codec_think_eos|>",
}
_TEXT_TOKENS = {"tts_pad": "<tts_pad>", "tts_bos": "<tts_text_bos>", "tts_eos": "<tts_text_eod>"}
_NO_KERNEL_TYPES = tuple(gguf.GGMLQuantizationType[n] for n in ("I8", "I16", "I32", "I64", "F64"))
_ROW_TYPES = tuple(
    gguf.GGMLQuantizationType[n]
    for n in ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")
)


class TalkerFile:
    """A talker GGUF opened for reading (memory-mapped)."""

    def __init__(self, path: pathlib.Path | str):
        self.path = pathlib.Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"talker GGUF not found: {self.path}")
        self.header = GGUFHeader(self.path)
        arch = self.field("general.architecture")
        if arch != names.TALKER_ARCH:
            raise GGUFError(f"{self.path} is a {arch!r} GGUF, not a Qwen3-TTS talker ({names.TALKER_ARCH!r})")
        embd, output = (self._matrix(name) for name in (names.TOKEN_EMBD, names.OUTPUT))
        if embd[0] != output[0] or embd[1] <= output[1]:
            raise GGUFError(f"{self.path}: {names.TOKEN_EMBD} {embd} and {names.OUTPUT} {output} do not fit together")
        self.hidden_size = int(embd[0])
        self.codec_vocab_size = int(output[1])
        self.text_vocab_size = int(embd[1]) - self.codec_vocab_size
        self._check_types()
        self.voices = self._voices()
        self._check_ids()
        # The vocabulary (155k tokens, 150k merges: ~60 MB of Python strings) is llama.cpp's to use.
        for key in [k for k in self.header.kv if k.startswith("tokenizer.ggml.")]:
            del self.header.kv[key]

    def _check_types(self) -> None:
        """Types llama.cpp's CPU backend computes with: it loads any ggml type, then aborts
        multiplying by an F16 norm vector (binary_op: unsupported types) or calls a null kernel
        for an integer matrix (both found by the fuzzer)."""
        for name, (shape, ty) in self.header.tensors.items():
            if len(shape) <= 1 and ty != gguf.GGMLQuantizationType.F32:
                raise GGUFError(f"{self.path}: {name} is {ty.name}, llama.cpp takes vectors in F32 only")
            if ty in _NO_KERNEL_TYPES:
                raise GGUFError(f"{self.path}: {name} is {ty.name}, a type llama.cpp cannot multiply")

    def _matrix(self, name: str) -> list[int]:
        """The shape of a 2-D tensor whose rows kazetts reads."""
        if name not in self.header.tensors:
            raise GGUFError(f"{self.path} has no {name}")
        shape, ty = self.header.tensors[name]
        if len(shape) != 2 or min(shape) < 1 or ty not in _ROW_TYPES:
            raise GGUFError(
                f"{self.path}: {name} is {ty.name} {shape}, expected a 2-D table of one of "
                f"{', '.join(t.name for t in _ROW_TYPES)}"
            )
        return shape

    def _check_ids(self) -> None:
        """Every special id, speaker and language inside the table it indexes."""
        v = self.voices
        text = {"tts_pad": v.tts_pad, "tts_bos": v.tts_bos, "tts_eos": v.tts_eos}
        codec = {
            k: getattr(v, k)
            for k in (
                "codec_pad",
                "codec_bos",
                "codec_eos",
                "codec_think",
                "codec_nothink",
                "codec_think_bos",
                "codec_think_eos",
            )
        }
        codec |= {f"language {k}": i for k, i in v.languages.items()} | {
            f"speaker {k}": i for k, i in v.speakers.items()
        }
        for group, limit in ((text, self.text_vocab_size), (codec, self.codec_vocab_size)):
            for key, i in group.items():
                if type(i) is not int or not 0 <= i < limit:
                    raise GGUFError(f"{self.path}: {key} id {i!r} is not in 0..{limit - 1}")
        for speaker, dialect in v.speaker_dialects.items():
            if dialect not in v.languages:
                raise GGUFError(f"{self.path}: speaker {speaker}'s dialect {dialect!r} is not one of its languages")

    def table_span(self, name: str) -> tuple[int, int]:
        """(offset, bytes) of a tensor's data in the file."""
        return self.header.data_start + self.header.offsets[name], self.header.nbytes(name)

    def field(self, key: str, default=None):
        return self.header.kv.get(key, default)

    # -- embedding rows (EmbeddingRows protocol of kazetts.stages.prompt) -------------------------
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

    def _list(self, key: str, kind: type, n: int | None = None) -> list:
        """A list key of `kind` elements (empty when absent), `n` long when given."""
        value = self.field(key, [])
        if (
            not isinstance(value, list)
            or any(type(x) is not kind for x in value)
            or (n is not None and len(value) != n)
        ):
            raise GGUFError(
                f"{self.path}: {key} is not a list of {n if n is not None else 'any number of'} {kind.__name__}"
            )
        return value

    def _voices_from_metadata(self) -> VoiceTable:
        c, t = names.K_CODEC, names.K_TEXT
        speakers = self._list(names.K_SPEAKERS, str)
        languages = self._list(names.K_LANGUAGES, str)
        speaker_ids = self._list(names.K_SPEAKER_IDS, int, len(speakers))
        language_ids = self._list(names.K_LANGUAGE_IDS, int, len(languages))
        dialects = dict(
            zip(
                speakers,
                self._list(
                    names.K_SPEAKER_DIALECTS, str, len(speakers) if names.K_SPEAKER_DIALECTS in self.header.kv else None
                ),
            )
        )
        model_type = self.field(names.K_MODEL_TYPE)
        size = self.field(names.K_MODEL_SIZE, "")
        if not isinstance(model_type, str) or not isinstance(size, str):
            raise GGUFError(f"{self.path}: {names.K_MODEL_TYPE} and {names.K_MODEL_SIZE} must be strings")
        return VoiceTable(
            tts_pad=self.field(t + "tts_pad_token_id"),
            tts_bos=self.field(t + "tts_bos_token_id"),
            tts_eos=self.field(t + "tts_eos_token_id"),
            codec_pad=self.field(c + "pad_id"),
            codec_bos=self.field(c + "bos_id"),
            codec_eos=self.field(c + "eos_token_id"),
            codec_think=self.field(c + "think_id"),
            codec_nothink=self.field(c + "nothink_id"),
            codec_think_bos=self.field(c + "think_bos_id"),
            codec_think_eos=self.field(c + "think_eos_id"),
            languages=dict(zip(languages, language_ids)),
            speakers=dict(zip(speakers, speaker_ids)),
            speaker_dialects={k: v for k, v in dialects.items() if v},
            model_type=model_type,
            supports_instruct=takes_instruct(model_type, size),
        )

    def _voices_from_token_names(self) -> VoiceTable:
        tokens = self._list("tokenizer.ggml.tokens", str)
        index = {tok: i for i, tok in enumerate(tokens)}
        missing = [tok for tok in [*_CODEC_TOKENS.values(), *_TEXT_TOKENS.values()] if tok not in index]
        if missing:
            raise GGUFError(f"{self.path}: no kazetts metadata and no token named {missing[0]}")
        codec = {key: index[tok] - self.text_vocab_size for key, tok in _CODEC_TOKENS.items()}
        text = {key: index[tok] for key, tok in _TEXT_TOKENS.items()}

        def named(prefix: str) -> dict[str, int]:
            return {
                tok[len(prefix) : -2]: i - self.text_vocab_size
                for tok, i in index.items()
                if tok.startswith(prefix) and tok.endswith("|>") and i >= self.text_vocab_size
            }

        speakers = named("<|spk_")
        # llama.cpp's converter keeps only Base models, which take an x-vector and no instruct.
        return VoiceTable(
            **text,
            **codec,
            languages=named("<|codec_language_"),
            speakers=speakers,
            model_type="custom_voice" if speakers else "base",
            supports_instruct=False,
        )
