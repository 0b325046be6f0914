"""Talker inputs for every voice mode, exactly as the reference builds them.

`Qwen3TTSForConditionalGeneration.generate` (qwen-tts 0.1.1) feeds the talker embedding vectors
only. With P(x) the projected text embedding of token x and C(x) the talker's codec embedding:

  [instruct]  P(<|im_start|>user\\n{instruct}<|im_end|>\\n)                 (when given)
  role        P(ids[0:3])                                 <|im_start|>assistant\\n
  codec tags  P(tts_pad) + C(t) for each tag but the last of  prefix + [speaker] + [pad, bos],
              the last of those rows with P(tts_bos) instead of P(tts_pad)
  text        streaming:     P(ids[3]) + C(bos); then one text row per generated step
              non-streaming: P(t) + C(pad) for t in ids[3:-5], P(tts_eos) + C(pad), P(tts_pad) + C(bos)

where prefix = [think, think_bos, language, think_eos], or [nothink, think_bos, think_eos] for
language "auto"; a dialect speaker turns chinese/auto into its dialect's language id. Every
generated step's input is C(CB0) + sum_g CP_g(CB_g) + the next trailing text row (P(tts_pad)
once they run out).

Ids (codec control ids, speakers, languages) come from the model (`VoiceTable`), never from
this module. Rows come from an `EmbeddingRows` source: the GGUF reader at run time, the
Hugging Face weights in tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np

# Chat wrapper of the text: ids[0:3] = <|im_start|>assistant\n, ids[-5:] = <|im_end|>\n<|im_start|>assistant\n
ROLE_TOKENS = 3
TAIL_TOKENS = 5
# Reference transcript wrapper (ICL): ids[-2:] = <|im_end|>\n
REF_TAIL_TOKENS = 2


class EmbeddingRows(Protocol):
    """Where embedding rows come from: P(text ids) (projected) and C(codec ids), float32 [n, hidden]."""

    def text(self, ids: Sequence[int]) -> np.ndarray: ...

    def codec(self, ids: Sequence[int]) -> np.ndarray: ...


def takes_instruct(model_type: str, size_tag: str) -> bool:
    """The reference drops instructs on the 0.6B CustomVoice model; Base models take none."""
    return model_type == "voice_design" or (model_type == "custom_voice" and size_tag != "0b6")


@dataclass(frozen=True)
class VoiceTable:
    """A model's special ids, speakers and languages (read from config.json or the GGUF)."""

    tts_pad: int
    tts_bos: int
    tts_eos: int
    codec_pad: int
    codec_bos: int
    codec_eos: int
    codec_think: int
    codec_nothink: int
    codec_think_bos: int
    codec_think_eos: int
    languages: dict[str, int]  # includes dialect entries such as "sichuan_dialect"
    speakers: dict[str, int] = field(default_factory=dict)
    speaker_dialects: dict[str, str] = field(default_factory=dict)
    model_type: str = "custom_voice"
    supports_instruct: bool = True

    @classmethod
    def from_hf_config(cls, config: dict) -> "VoiceTable":
        talker = config["talker_config"]
        dialects = {name: d for name, d in (talker.get("spk_is_dialect") or {}).items() if d}
        model_type = config.get("tts_model_type", "custom_voice")
        return cls(
            tts_pad=config["tts_pad_token_id"],
            tts_bos=config["tts_bos_token_id"],
            tts_eos=config["tts_eos_token_id"],
            codec_pad=talker["codec_pad_id"],
            codec_bos=talker["codec_bos_id"],
            codec_eos=talker["codec_eos_token_id"],
            codec_think=talker["codec_think_id"],
            codec_nothink=talker["codec_nothink_id"],
            codec_think_bos=talker["codec_think_bos_id"],
            codec_think_eos=talker["codec_think_eos_id"],
            languages=dict(talker.get("codec_language_id") or {}),
            speakers=dict(talker.get("spk_id") or {}),
            speaker_dialects=dialects,
            model_type=model_type,
            supports_instruct=takes_instruct(model_type, config.get("tts_model_size", "")),
        )

    @property
    def spoken_languages(self) -> list[str]:
        """Languages a caller may ask for ("auto" plus every non-dialect entry)."""
        return ["auto"] + sorted(name for name in self.languages if "dialect" not in name)

    def language_id(self, language: str, speaker: str | None) -> int | None:
        """Codec language id for a request (None for "auto"), with the dialect speaker rule."""
        if not isinstance(language, str):
            raise ValueError(f"language must be a string; choose one of {self.spoken_languages}")
        lang = language.lower()
        if lang != "auto" and lang not in self.spoken_languages:
            raise ValueError(f"unknown language {language!r}; choose one of {self.spoken_languages}")
        dialect = self.speaker_dialects.get(speaker.lower()) if speaker else None
        if dialect and lang in ("chinese", "auto"):
            return self.languages[dialect]
        return None if lang == "auto" else self.languages[lang]


@dataclass
class Prompt:
    """The talker prefill and the text rows still to be fed, one per generated step."""

    prefill: np.ndarray  # [L, hidden]
    trailing_text: np.ndarray  # [n, hidden]
    tts_pad: np.ndarray  # [hidden], the text row once trailing_text runs out

    def text_row(self, step: int) -> np.ndarray:
        """Text row added to the input of generated step `step` (0 = first generated frame)."""
        return self.trailing_text[step] if step < len(self.trailing_text) else self.tts_pad


def build_prompt(
    rows: EmbeddingRows,
    voices: VoiceTable,
    text_ids: Sequence[int],
    *,
    language: str = "auto",
    speaker: str | None = None,
    instruct_ids: Sequence[int] | None = None,
    speaker_embedding: np.ndarray | None = None,
    text_streaming: bool = True,
) -> Prompt:
    """Builds the reference's talker inputs. `text_ids` is the chat-wrapped text (see module doc)."""
    text_ids = list(text_ids)
    parts, bos_row, special = _prefix(rows, voices, text_ids, language, speaker, instruct_ids, speaker_embedding)
    tts_eos, tts_pad = special["eos"], special["pad"]
    body = text_ids[ROLE_TOKENS:-TAIL_TOKENS]
    if text_streaming:
        parts.append(rows.text(body[:1]) + bos_row)
        trailing = np.concatenate([rows.text(body[1:]).reshape(-1, tts_pad.shape[0]), tts_eos[None]])
    else:
        pad = rows.codec([voices.codec_pad])
        parts += [rows.text(body) + pad, tts_eos[None] + pad, tts_pad[None] + bos_row]
        trailing = np.zeros((0, tts_pad.shape[0]), np.float32)
    return Prompt(np.concatenate(parts).astype(np.float32), trailing.astype(np.float32), tts_pad.astype(np.float32))


def build_icl_prompt(
    rows: EmbeddingRows,
    voices: VoiceTable,
    text_ids: Sequence[int],
    ref_text_ids: Sequence[int],
    ref_frames: np.ndarray,
    speaker_embedding: np.ndarray,
    *,
    language: str = "auto",
    text_streaming: bool = True,
) -> Prompt:
    """The reference's ICL voice-clone inputs (`generate_icl_prompt`): the x-vector prefix, then
    text rows P(ref body ++ text body) ++ P(tts_eos) aligned with codec rows C(bos) ++ ref_frames.

    `text_ids` is the chat-wrapped text (`chat_text`), `ref_text_ids` the chat-wrapped transcript
    of the reference (`ref_chat_text`), `ref_frames` [T, hidden] the reference frames' talker
    inputs: the sum of the 16 code embeddings of each frame (talker codec_embedding for CB0, the
    code predictor's tables for CB1..15; `CodePredictor.embed_codes`). Streaming: row i is text
    row i + codec row i; text rows beyond the codec rows are fed one per generated step, and if
    the text is shorter it is padded with P(tts_pad). Non-streaming: every text row + C(pad), then
    every codec row + P(tts_pad)."""
    text_ids, ref_text_ids = list(text_ids), list(ref_text_ids)
    if speaker_embedding is None:
        raise ValueError("voice cloning from reference codes needs the reference's speaker embedding (x-vector)")
    if len(ref_text_ids) <= ROLE_TOKENS + REF_TAIL_TOKENS:
        raise ValueError("empty reference text: ICL cloning needs the transcript of the reference audio")
    frames = np.asarray(ref_frames, np.float32)
    parts, bos_row, special = _prefix(rows, voices, text_ids, language, None, None, speaker_embedding)
    tts_eos, tts_pad = special["eos"], special["pad"]
    if frames.ndim != 2 or frames.shape[1] != tts_pad.shape[0] or len(frames) == 0:
        raise ValueError(f"reference frames must be [frames >= 1, {tts_pad.shape[0]}], got shape {frames.shape}")
    body = ref_text_ids[ROLE_TOKENS:-REF_TAIL_TOKENS] + text_ids[ROLE_TOKENS:-TAIL_TOKENS]
    text = np.concatenate([rows.text(body), tts_eos[None]])
    codec = np.concatenate([bos_row, frames])
    empty = np.zeros((0, tts_pad.shape[0]), np.float32)
    if not text_streaming:
        parts += [text + rows.codec([voices.codec_pad]), codec + tts_pad]
        trailing = empty
    elif len(text) > len(codec):
        parts.append(text[: len(codec)] + codec)
        trailing = text[len(codec) :]
    else:
        parts.append(np.concatenate([text, np.repeat(tts_pad[None], len(codec) - len(text), axis=0)]) + codec)
        trailing = empty
    return Prompt(np.concatenate(parts).astype(np.float32), trailing.astype(np.float32), tts_pad.astype(np.float32))


def _prefix(
    rows: EmbeddingRows,
    voices: VoiceTable,
    text_ids: list[int],
    language: str,
    speaker: str | None,
    instruct_ids: Sequence[int] | None,
    speaker_embedding: np.ndarray | None,
):
    """Rows every mode starts with ([instruct], role, codec tags up to C(pad)), the C(bos) row the
    text part starts from, and the P(tts_*) rows {"bos", "eos", "pad"}."""
    if len(text_ids) <= ROLE_TOKENS + TAIL_TOKENS:
        raise ValueError("empty text: there is nothing to say")
    if speaker is not None and not isinstance(speaker, str):
        raise ValueError(f"speaker must be a name; choose one of {sorted(voices.speakers)}")
    lang_id = voices.language_id(language, speaker)
    bos_eos_pad = rows.text([voices.tts_bos, voices.tts_eos, voices.tts_pad])
    special = {"bos": bos_eos_pad[0], "eos": bos_eos_pad[1], "pad": bos_eos_pad[2]}
    speaker_row = _speaker_row(rows, voices, speaker, speaker_embedding, hidden=special["pad"].shape[0])
    if instruct_ids is not None and not voices.supports_instruct:
        raise ValueError(f"this {voices.model_type} model does not take an instruct")
    _check_voice(voices, speaker, instruct_ids, speaker_embedding)
    if lang_id is None:
        prefix = [voices.codec_nothink, voices.codec_think_bos, voices.codec_think_eos]
    else:
        prefix = [voices.codec_think, voices.codec_think_bos, lang_id, voices.codec_think_eos]

    codec_rows = [rows.codec(prefix)]
    if speaker_row is not None:
        codec_rows.append(speaker_row[None])
    codec_rows.append(rows.codec([voices.codec_pad, voices.codec_bos]))
    codec = np.concatenate(codec_rows)
    text_side = np.concatenate([np.repeat(special["pad"][None], len(codec) - 2, axis=0), special["bos"][None]])
    parts = [] if instruct_ids is None else [rows.text(list(instruct_ids))]
    parts += [rows.text(text_ids[:ROLE_TOKENS]), text_side + codec[:-1]]
    return parts, codec[-1:], special


def _speaker_row(
    rows: EmbeddingRows, voices: VoiceTable, speaker: str | None, speaker_embedding: np.ndarray | None, hidden: int
) -> np.ndarray | None:
    if speaker_embedding is not None:
        if speaker:
            raise ValueError("give either a speaker name or a speaker embedding, not both")
        row = np.asarray(speaker_embedding, dtype=np.float32)
        if row.shape != (hidden,):
            size = f"{row.size} values" if row.ndim == 1 else f"shape {list(row.shape)}"
            raise ValueError(f"speaker embedding has {size}; this model needs {hidden} values (shape [{hidden}])")
        if not np.isfinite(row).all():
            raise ValueError("speaker embedding holds NaN or infinite values")
        return row
    if not speaker:
        return None
    if speaker.lower() not in voices.speakers:
        choices = sorted(voices.speakers) or "none: this model has no named speakers"
        raise ValueError(f"unknown speaker {speaker!r}; choose one of {choices}")
    return rows.codec([voices.speakers[speaker.lower()]])[0]


def _check_voice(voices: VoiceTable, speaker: str | None, instruct_ids, speaker_embedding) -> None:
    """The voice each model type is made for, as the reference's entry points take it:
    generate_custom_voice (a named speaker), generate_voice_design (an instruct and no speaker),
    generate_voice_clone (Base: a speaker embedding)."""
    kind = voices.model_type
    if kind == "custom_voice" and not speaker:
        raise ValueError(f"this custom_voice model needs a speaker; choose one of {sorted(voices.speakers)}")
    if kind == "voice_design":
        if speaker or speaker_embedding is not None:
            raise ValueError("this voice_design model takes no speaker: describe the voice with an instruct")
        if instruct_ids is None:
            raise ValueError("this voice_design model needs an instruct describing the voice")
    if kind == "base" and speaker_embedding is None:
        raise ValueError("this base model needs a speaker_embedding (an x-vector of the voice to clone)")


def chat_text(text: str) -> str:
    """The assistant turn the reference tokenizes around the text to speak."""
    return f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n"


def ref_chat_text(ref_text: str) -> str:
    """The assistant turn the reference tokenizes around the transcript of an ICL reference."""
    return f"<|im_start|>assistant\n{ref_text}<|im_end|>\n"


def instruct_text(instruct: str) -> str:
    """The user turn the reference tokenizes around an instruct."""
    return f"<|im_start|>user\n{instruct}<|im_end|>\n"
