"""Cloned voices: enrolment of a reference recording, and the `.voice` file that keeps it.

    voice = tts.enroll("me.wav", ref_text="what I say in it")   # a Voice
    voice.save("me.voice"); voice = kazetts.Voice.load("me.voice")
    tts.synthesize("Bonjour !", voice=voice)

A Voice holds what a Base model needs to speak like the reference: the speaker encoder's
x-vector (x-vector cloning) and, for ICL cloning, the reference text and the codec encoder's
codes of the recording. It names the model it was made for (`ModelFingerprint`: model type,
talker width, a digest of the speaker encoder's weights), so a voice is never fed to another
model or size.

File format (GGUF, architecture "kazetts.voice"; docs/voices.md):
  keys     kazetts.voice.format_version u32, kazetts.voice.model_type str,
           kazetts.voice.hidden_size u32, kazetts.voice.speaker_encoder_sha256 str,
           kazetts.voice.ref_seconds f32 (the recording), kazetts.voice.ref_silence f32 (seconds of
           silence appended to it before encoding; 0 in files that lack it),
           kazetts.voice.ref_text str (when given),
           kazetts.voice.payload_sha256 str (format 2: the seal, see `payload_sha256`)
  tensors  x_vector F32 [hidden]; ref_codes I32 [frames, 16] (ggml ne [16, frames], when encoded)

A file is sealed with a digest of everything a voice is made of, checked on load: a changed byte
(in the x-vector, the codes or a key) is refused in one line instead of speaking with another voice.
Format 1 files (before the seal) still load, with a warning.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import time
import warnings
from dataclasses import dataclass

import numpy as np

from kazetts.engine.output_file import OutputFile
from kazetts.request import check_ref_silence
from kazetts.stages.audio_input import SAMPLE_RATE, append_silence, reference_audio

ARCH = "kazetts.voice"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)  # 1: before the payload digest
_K = "kazetts.voice."
_CODEBOOKS = 16


@dataclass(frozen=True)
class ModelFingerprint:
    """Which model a voice fits: its type, its talker width and its speaker encoder's weights."""

    model_type: str
    hidden_size: int
    speaker_encoder_sha256: str

    def check(self, voice_model: "ModelFingerprint", what: str = "this voice") -> None:
        """ValueError unless a voice made for `voice_model` fits this model."""
        if voice_model == self:
            return
        if (voice_model.model_type, voice_model.hidden_size) != (self.model_type, self.hidden_size):
            differs = (
                f"a {voice_model.model_type} model of hidden size {voice_model.hidden_size}, "
                f"this is a {self.model_type} model of hidden size {self.hidden_size}"
            )
        else:
            theirs, ours = voice_model.speaker_encoder_sha256, self.speaker_encoder_sha256
            shown = next((n for n in (12, 24) if theirs[:n] != ours[:n]), len(max(theirs, ours, key=len)))
            differs = f"another speaker encoder ({theirs[:shown]}, this model's is {ours[:shown]})"
        raise ValueError(f"{what} was made for {differs}: enroll the reference again with this model")


@dataclass
class Voice:
    """A cloned voice (see the module doc)."""

    x_vector: np.ndarray  # float32 [hidden]
    model: ModelFingerprint
    ref_text: str | None = None  # the reference's transcript (ICL)
    ref_codes: np.ndarray | None = None  # int32 [frames, 16]: the codec encoder's codes of the reference (ICL)
    ref_seconds: float = 0.0  # the recording at 24 kHz
    ref_silence: float = 0.0  # seconds of silence appended to it before encoding (enroll's ref_silence)

    @property
    def has_icl(self) -> bool:
        """Whether the voice can clone in ICL mode (reference text and codes)."""
        return bool(self.ref_text) and self.ref_codes is not None

    def save(self, path: str | os.PathLike, *, replace: bool = True, inputs=(), **hint) -> pathlib.Path:
        """Writes the voice file through an OutputFile (a unique staging file renamed over the
        target: a failed write leaves any old file as it was and nothing behind). `replace=False`
        refuses an existing file; `inputs` are files it must never be (the recording, the model)."""
        import gguf

        output = OutputFile(path, replace=replace, inputs=inputs, what="voice file", **hint)
        try:
            self._write(gguf.GGUFWriter(output.staging, ARCH))
            return output.commit()
        finally:
            output.discard()

    def payload_sha256(self) -> str:
        """The seal: sha256 over everything the voice is made of, in a fixed order (model type,
        hidden size, speaker encoder digest, ref_seconds and ref_silence as float32, ref_text,
        then the x-vector as float32 and the reference codes as int32, little-endian)."""
        h = hashlib.sha256(b"kazetts.voice/2\0")
        for text in (self.model.model_type, str(int(self.model.hidden_size)), self.model.speaker_encoder_sha256):
            h.update(text.encode() + b"\0")
        h.update(np.array([self.ref_seconds, self.ref_silence], dtype="<f4").tobytes())
        h.update((self.ref_text or "").encode() + b"\0")
        h.update(np.ascontiguousarray(self.x_vector, dtype="<f4").tobytes())
        if self.ref_codes is not None:
            h.update(np.ascontiguousarray(self.ref_codes, dtype="<i4").tobytes())
        return h.hexdigest()

    def _write(self, w) -> None:
        w.add_uint32(_K + "format_version", FORMAT_VERSION)
        w.add_string(_K + "model_type", self.model.model_type)
        w.add_uint32(_K + "hidden_size", int(self.model.hidden_size))
        w.add_string(_K + "speaker_encoder_sha256", self.model.speaker_encoder_sha256)
        w.add_float32(_K + "ref_seconds", float(self.ref_seconds))
        w.add_float32(_K + "ref_silence", float(self.ref_silence))
        if self.ref_text:
            w.add_string(_K + "ref_text", self.ref_text)
        w.add_string(_K + "payload_sha256", self.payload_sha256())
        w.add_tensor("x_vector", np.ascontiguousarray(self.x_vector, dtype=np.float32))
        if self.ref_codes is not None:
            w.add_tensor("ref_codes", np.ascontiguousarray(self.ref_codes, dtype=np.int32))
        try:
            w.write_header_to_file()
            w.write_kv_data_to_file()
            w.write_tensors_to_file()
        finally:
            w.close()

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Voice":
        """Reads a voice file; ValueError naming the file and what is wrong with it when it is not
        one kazetts wrote (damaged, another kind of file, a changed byte)."""
        import gguf

        path = pathlib.Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"voice file not found: {path}")
        try:
            reader = gguf.GGUFReader(path)
            kv = {name: field.contents() for name, field in reader.fields.items()}
            tensors = {t.name: t for t in reader.tensors}
        except OSError as e:
            raise OSError(f"cannot read the voice file {path}: {e.strerror or e}") from None
        except Exception:  # the gguf package fails on damaged files with any error (IndexError, ValueError...)
            raise ValueError(f"{path} is not a kazetts voice file (damaged, or not a GGUF file)") from None
        if kv.get("general.architecture") != ARCH:
            raise ValueError(f"{path} is not a kazetts voice file (a {kv.get('general.architecture')!r} GGUF)")
        version = kv.get(_K + "format_version")
        if isinstance(version, bool) or not isinstance(version, int) or version not in READABLE_VERSIONS:
            raise ValueError(
                f"{path} is a voice file of format {version!r}; this kazetts reads formats "
                f"{', '.join(map(str, READABLE_VERSIONS))}"
            )
        try:
            model = ModelFingerprint(
                str(kv[_K + "model_type"]), int(kv[_K + "hidden_size"]), str(kv[_K + "speaker_encoder_sha256"])
            )
        except KeyError as e:
            raise ValueError(f"{path}: the voice file has no {e.args[0]}") from None
        except (TypeError, ValueError):
            raise ValueError(f"{path}: the voice file's model keys are damaged") from None
        voice = cls(
            x_vector=_tensor(path, tensors, "x_vector", gguf.GGMLQuantizationType.F32, model.hidden_size),
            model=model,
            ref_text=_text(path, kv, "ref_text"),
            ref_codes=_ref_codes(path, tensors, gguf.GGMLQuantizationType.I32),
            ref_seconds=_number(path, kv, "ref_seconds"),
            ref_silence=_number(path, kv, "ref_silence"),
        )
        seal = kv.get(_K + "payload_sha256")
        if seal is None and version == 1:
            warnings.warn(
                f"{path} was written before voice files were sealed (format 1): a damaged byte "
                "cannot be detected; save it again (or enroll again) to seal it",
                stacklevel=2,
            )
        elif seal is None:
            raise ValueError(
                f"{path} has no seal (kazetts.voice.payload_sha256), which format {version} files carry: "
                "it is damaged; enroll the reference again"
            )
        elif seal != voice.payload_sha256():  # (a seal in a file that says format 1 is checked too)
            raise ValueError(
                f"{path} is damaged: its content does not match its digest (a changed byte?); "
                "enroll the reference again"
            )
        return voice


def _tensor(path, tensors: dict, name: str, ggml_type, size: int | None = None) -> np.ndarray:
    """A voice tensor of the type it must have (and `size` values, when given), as a flat array."""
    t = tensors.get(name)
    if t is None:
        raise ValueError(f"{path}: the voice file has no {name}")
    if t.tensor_type != ggml_type:
        raise ValueError(f"{path}: {name} is stored as {t.tensor_type.name}, a voice file holds it as {ggml_type.name}")
    data = np.array(t.data).reshape(-1)
    if size is not None and data.size != size:
        raise ValueError(f"{path}: {name} has {data.size} values, the file says hidden size {size}")
    return data


def _ref_codes(path, tensors: dict, ggml_type) -> np.ndarray | None:
    if "ref_codes" not in tensors:
        return None
    codes = _tensor(path, tensors, "ref_codes", ggml_type)
    if codes.size == 0 or codes.size % _CODEBOOKS:
        raise ValueError(f"{path}: ref_codes has {codes.size} values, not whole frames of {_CODEBOOKS} codes")
    return codes.astype(np.int32).reshape(-1, _CODEBOOKS)


def _text(path, kv: dict, key: str) -> str | None:
    value = kv.get(_K + key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{path}: the voice file's {key} is damaged (not a text)")
    return value


def _number(path, kv: dict, key: str) -> float:
    value = kv.get(_K + key, 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
        raise ValueError(f"{path}: the voice file's {key} is damaged ({value!r})")
    return float(value)


def enroll(
    speaker_encoder,
    model: ModelFingerprint,
    ref_audio,
    ref_text: str | None = None,
    codec_encoder=None,
    timings: dict | None = None,
    ref_silence: float = 0.0,
) -> Voice:
    """A Voice from a reference recording (path, or (array, sample rate)), as the reference's
    create_voice_clone_prompt makes it: mono, 24 kHz, x-vector; reference codes when a codec
    encoder is given and there is a reference text (ICL needs both). `ref_silence` seconds of
    zeros are appended at 24 kHz before both encoders (0: the reference's behaviour).
    `timings` receives seconds per step (audio, mel + speaker_encoder, codec_encoder)."""
    from kazetts.stages import mel

    if ref_text is not None and not ref_text.strip():
        raise ValueError("ref_text is empty: give the words said in the reference, or none for x-vector cloning")
    ref_silence = check_ref_silence(ref_silence)
    timings = timings if timings is not None else {}
    clock = time.perf_counter()
    recording = reference_audio(ref_audio, speaker_encoder.min_samples)
    audio = append_silence(recording, ref_silence)
    timings["audio"] = time.perf_counter() - clock
    clock = time.perf_counter()
    log_mel = mel.log_mel(audio)
    timings["mel"] = time.perf_counter() - clock
    clock = time.perf_counter()
    x_vector = speaker_encoder.encode(log_mel)
    timings["speaker_encoder"] = time.perf_counter() - clock
    codes = None
    if codec_encoder is not None and ref_text:
        clock = time.perf_counter()
        codes = codec_encoder.encode(audio)
        timings["codec_encoder"] = time.perf_counter() - clock
    return Voice(
        x_vector=x_vector,
        model=model,
        ref_text=ref_text,
        ref_codes=codes,
        ref_seconds=len(recording) / SAMPLE_RATE,
        ref_silence=ref_silence,
    )
