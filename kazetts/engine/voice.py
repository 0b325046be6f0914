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
Format 1 files (before the seal) still load, with a warning. The reader, the writer and the seal
are libkazetts' (kazetts/voice.h), which apps call too: one definition of the format.
"""

from __future__ import annotations

import ctypes
import os
import pathlib
import time
import warnings
from dataclasses import dataclass

import numpy as np

from kazetts import native
from kazetts.engine.output_file import OutputFile
from kazetts.request import check_ref_silence
from kazetts.stages.audio_input import SAMPLE_RATE, append_silence, reference_audio

_CODEBOOKS = 16


@dataclass(frozen=True)
class ModelFingerprint:
    """Which model a voice fits: its type, its talker width and its speaker encoder's weights."""

    model_type: str
    hidden_size: int
    speaker_encoder_sha256: str

    def check(self, voice_model: "ModelFingerprint", what: str = "this voice") -> None:
        """ValueError unless a voice made for `voice_model` fits this model (kz_voice_check_model:
        the native engine's check too), naming what differs."""
        err = native.error_buffer()
        status = native.bind(_SIGNATURES).kz_voice_check_model(
            *_described(voice_model), *_described(self), what.encode(), err, len(err)
        )
        if status != 0:
            raise ValueError(err.value.decode("utf-8", "replace"))


def _described(model: ModelFingerprint) -> tuple:
    return model.model_type.encode(), int(model.hidden_size), model.speaker_encoder_sha256.encode()


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
        output = OutputFile(path, replace=replace, inputs=inputs, what="voice file", **hint)
        try:
            with NativeVoice.of(self) as native_voice:
                native_voice.write(output.staging)
            return output.commit()
        finally:
            output.discard()

    def payload_sha256(self) -> str:
        """The seal: sha256 over everything the voice is made of, in a fixed order (model type,
        hidden size, speaker encoder digest, ref_seconds and ref_silence as float32, ref_text,
        then the x-vector as float32 and the reference codes as int32, little-endian;
        kz_voice_payload_sha256 in libkazetts, docs/voices.md)."""
        with NativeVoice.of(self) as native_voice:
            return native_voice.payload_sha256()

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Voice":
        """Reads a voice file; ValueError naming the file and what is wrong with it when it is not
        one kazetts wrote (damaged, another kind of file, a changed byte)."""
        path = pathlib.Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"voice file not found: {path}")
        with NativeVoice.read(path) as native_voice:
            voice, version = native_voice.voice()
        if version == 1:
            warnings.warn(
                f"{path} was written before voice files were sealed (format 1): a damaged byte "
                "cannot be detected; save it again (or enroll again) to seal it",
                stacklevel=2,
            )
        return voice


class _Info(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("model_type", ctypes.c_char_p),
        ("hidden_size", ctypes.c_int32),
        ("speaker_encoder_sha256", ctypes.c_char_p),
        ("xvector", ctypes.POINTER(ctypes.c_float)),
        ("ref_text", ctypes.c_char_p),
        ("ref_codes", ctypes.POINTER(ctypes.c_int32)),
        ("ref_frames", ctypes.c_int32),
        ("ref_seconds", ctypes.c_float),
        ("ref_silence", ctypes.c_float),
        ("format_version", ctypes.c_int32),
    ]


_P = ctypes.c_void_p
_LOAD = [ctypes.POINTER(_P), ctypes.c_char_p, ctypes.c_size_t]
_SIGNATURES = {
    "kz_voice_default_info": (_Info, []),
    "kz_voice_new": (ctypes.c_int, [ctypes.POINTER(_Info), *_LOAD]),
    "kz_voice_read": (ctypes.c_int, [ctypes.c_char_p, *_LOAD]),
    "kz_voice_get": (ctypes.c_int, [_P, ctypes.POINTER(_Info)]),
    "kz_voice_payload_sha256": (None, [_P, ctypes.c_char_p]),
    "kz_voice_write": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]),
    "kz_voice_free": (None, [_P]),
    "kz_voice_check_model": (
        ctypes.c_int,
        [*[ctypes.c_char_p, ctypes.c_int32, ctypes.c_char_p] * 2, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t],
    ),
}


class NativeVoice(native.NativeHandle):
    """A kz_voice (kazetts/voice.h): the one reader, writer and seal of voice files."""

    _free_name = "kz_voice_free"

    def __init__(self, make, *args):
        self._lib = native.bind(_SIGNATURES)
        self._handle = _P()
        err = native.error_buffer()
        status = getattr(self._lib, make)(*args, ctypes.byref(self._handle), err, len(err))
        if status != 0:
            self._handle = None
            raise _error(status, err.value)

    @classmethod
    def of(cls, voice: Voice) -> "NativeVoice":
        x_vector = np.ascontiguousarray(voice.x_vector, dtype=np.float32).reshape(-1)
        codes = None if voice.ref_codes is None else np.ascontiguousarray(voice.ref_codes, dtype=np.int32)
        info = native.bind(_SIGNATURES).kz_voice_default_info()
        info.model_type = voice.model.model_type.encode()
        info.hidden_size = int(voice.model.hidden_size)
        info.speaker_encoder_sha256 = voice.model.speaker_encoder_sha256.encode()
        if x_vector.size != info.hidden_size:
            raise ValueError(f"the x-vector has {x_vector.size} values, the voice's model {info.hidden_size}")
        info.xvector = native.ptr(x_vector)
        info.ref_text = voice.ref_text.encode() if voice.ref_text else None
        if codes is not None:
            info.ref_codes, info.ref_frames = native.ptr(codes.reshape(-1), ctypes.c_int32), len(codes)
        info.ref_seconds, info.ref_silence = float(voice.ref_seconds), float(voice.ref_silence)
        return cls("kz_voice_new", ctypes.byref(info))

    @classmethod
    def owning(cls, handle: ctypes.c_void_p) -> "NativeVoice":
        """The owner of a kz_voice a native call made (kz_tts_enroll)."""
        voice = cls.__new__(cls)
        voice._lib, voice._handle = native.bind(_SIGNATURES), handle
        return voice

    @classmethod
    def read(cls, path: pathlib.Path) -> "NativeVoice":
        return cls("kz_voice_read", os.fsencode(str(path)))

    def voice(self) -> tuple[Voice, int]:
        """The Voice (its arrays copied) and the format of the file it was read from."""
        info = self._lib.kz_voice_default_info()
        native.check(self._lib.kz_voice_get(self._handle, ctypes.byref(info)))
        hidden, frames = info.hidden_size, info.ref_frames
        codes = np.ctypeslib.as_array(info.ref_codes, (frames, _CODEBOOKS)).copy() if frames else None
        voice = Voice(
            x_vector=np.ctypeslib.as_array(info.xvector, (hidden,)).copy(),
            model=ModelFingerprint(info.model_type.decode(), hidden, info.speaker_encoder_sha256.decode()),
            ref_text=None if info.ref_text is None else info.ref_text.decode(),
            ref_codes=codes,
            ref_seconds=float(info.ref_seconds),
            ref_silence=float(info.ref_silence),
        )
        return voice, info.format_version

    def payload_sha256(self) -> str:
        out = ctypes.create_string_buffer(65)
        self._lib.kz_voice_payload_sha256(self._handle, out)
        return out.value.decode()

    def write(self, path) -> None:
        err = native.error_buffer()
        status = self._lib.kz_voice_write(self._handle, os.fsencode(str(path)), err, len(err))
        if status != 0:
            raise _error(status, err.value)


def _error(status: int, message: bytes) -> Exception:
    """A native voice error as the exception Python code expects: OSError for the disk, else
    ValueError (a voice or file that is not what it should be)."""
    text = message.decode("utf-8", "replace")
    return OSError(text) if status == 2 else ValueError(text)


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
