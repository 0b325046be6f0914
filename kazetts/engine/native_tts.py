"""The native engine (libkazetts' kazetts/tts.h) from Python: the whole pipeline in C++.

What an app gets through the C ABI or the JNI bridge, bound with ctypes so the tests can hold it
against the Python engine (`kazetts.TTS`): same request and seed, same codes and samples.

    tts = NativeTTS(talker, mmproj, threads=2)
    r = tts.synthesize("Bonjour !", speaker="vivian", language="french", seed=3)  # or a kazetts.Request
    r.audio, r.codes, r.stop_reason, r.timings

kazetts.Request's fields are kz_tts_request's, under the same names; `c_request` builds the one
from the other.
"""

from __future__ import annotations

import ctypes
import json
import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from kazetts import native
from kazetts.engine.voice import NativeVoice
from kazetts.request import MAX_SEED, Request, request_fields
from kazetts.stages.codec import WEIGHTS

STOP_REASONS = ("eos", "budget", "cancelled")
N_CODEBOOKS = 16


class Params(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("n_threads", ctypes.c_int32),
        ("codec_weights", ctypes.c_int32),
        ("cp_weights", ctypes.c_int32),
        ("n_ctx", ctypes.c_int32),
        ("n_batch", ctypes.c_int32),
        ("verbose", ctypes.c_int32),
        ("codec_threads", ctypes.c_int32),
        ("max_batch", ctypes.c_int32),
        ("queue", ctypes.c_int32),
    ]


class Chunk(ctypes.Structure):
    _fields_ = [
        ("samples", ctypes.POINTER(ctypes.c_float)),
        ("n_samples", ctypes.c_int32),
        ("codes", ctypes.POINTER(ctypes.c_int32)),
        ("n_frames", ctypes.c_int32),
        ("piece", ctypes.c_int32),
        ("frames_total", ctypes.c_int32),
    ]


class NativeResult(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("stop_reason", ctypes.c_int32),
        ("n_frames", ctypes.c_int32),
        ("n_pieces", ctypes.c_int32),
        ("pieces_at_budget", ctypes.c_int32),
        ("n_samples", ctypes.c_int64),
        ("prefill_ms", ctypes.c_double),
        ("talker_ms", ctypes.c_double),
        ("code_predictor_ms", ctypes.c_double),
        ("codec_ms", ctypes.c_double),
        ("first_audio_ms", ctypes.c_double),
        ("total_ms", ctypes.c_double),
        ("batch_max", ctypes.c_int32),
    ]


CHUNK_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(Chunk), ctypes.c_void_p)
_c_int32_p = ctypes.POINTER(ctypes.c_int32)
_P = ctypes.c_void_p
_SIGNATURES = {
    "kz_tts_default_params": (Params, None),
    "kz_tts_default_request": (native.TtsRequest, None),
    "kz_tts_auto_codec_threads": (ctypes.c_int32, [ctypes.c_int32]),
    "kz_tts_load": (
        ctypes.c_int,
        [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.POINTER(Params),
            ctypes.POINTER(_P),
            ctypes.c_char_p,
            ctypes.c_size_t,
        ],
    ),
    "kz_tts_free": (None, [_P]),
    "kz_tts_model_info": (ctypes.c_char_p, [_P]),
    "kz_tts_last_error": (ctypes.c_char_p, [_P]),
    "kz_tts_sample_rate": (ctypes.c_int, [_P]),
    "kz_tts_synthesize": (
        ctypes.c_int,
        [_P, ctypes.c_char_p, ctypes.POINTER(native.TtsRequest), CHUNK_CALLBACK, _P, ctypes.POINTER(NativeResult)],
    ),
    "kz_tts_cancel": (None, [_P]),
    "kz_tts_stream_begin": (
        ctypes.c_int,
        [
            _P,
            ctypes.POINTER(native.TtsRequest),
            CHUNK_CALLBACK,
            _P,
            ctypes.POINTER(_P),
            ctypes.c_char_p,
            ctypes.c_size_t,
        ],
    ),
    "kz_tts_stream_push": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_size_t]),
    "kz_tts_stream_finish": (ctypes.c_int, [_P, ctypes.POINTER(NativeResult)]),
    "kz_tts_stream_free": (None, [_P]),
    "kz_tts_enroll": (
        ctypes.c_int,
        [
            _P,
            ctypes.POINTER(ctypes.c_float),
            ctypes.c_int64,
            ctypes.c_int32,
            ctypes.c_char_p,
            ctypes.c_float,
            ctypes.POINTER(_P),
        ],
    ),
}


def lib() -> ctypes.CDLL:
    """libkazetts with the tts.h functions typed."""
    return native.bind(_SIGNATURES)


def auto_codec_threads(threads: int) -> int:
    """codec_threads' default for `threads` talker threads (kz_tts_auto_codec_threads): the
    process's spare cores, at most `threads`; 0 (serial) without a spare core."""
    return int(lib().kz_tts_auto_codec_threads(int(threads)))


def _utf8(s: str | None) -> bytes | None:
    return s.encode("utf-8") if s else None


def c_request(**fields) -> tuple[native.TtsRequest, list]:
    """A kz_tts_request from kazetts.Request fields (the same names), kz_tts_default_request's
    for those not given; returns it with the buffers it points to (keep them alive). The values go
    to the native checks as given: the library refuses bad ones. A `voice` (kazetts.Voice) goes in
    as a kz_voice; the Python engine's own fields (ref_audio, ref_text, ref_codes, ref_silence)
    are a ValueError: the native engine clones from a voice only."""
    r = lib().kz_tts_default_request()
    keep: list = []
    for name, value in fields.items():
        if name in ("speaker", "language", "instruct"):
            setattr(r, name, _utf8(value))
        elif name == "xvector":
            if value is not None:
                x = np.ascontiguousarray(value, dtype=np.float32).reshape(-1)
                keep.append(x)
                r.xvector, r.xvector_len = native.ptr(x), x.size
        elif name == "voice":
            if value is not None:
                keep.append(NativeVoice.of(value))
                r.voice = keep[-1]._handle
        elif name == "xvector_only":
            r.xvector_only = -1 if value is None else int(bool(value))
        elif name == "seed":
            r.seed = -1 if value is None else int(value) & MAX_SEED
        elif name == "max_frames":
            r.max_frames = 0 if value is None else int(value)
        elif name in NATIVE_FIELDS:
            setattr(r, name, value)
        else:
            raise ValueError(f"the native engine takes no {name}: it is the Python engine's (kazetts.TTS)")
    return r, keep


# the fields of kazetts.Request the native engine has (kz_tts_request's, under the same names)
NATIVE_FIELDS = frozenset(name for name, _ in native.TtsRequest._fields_) - {"struct_size", "xvector_len"}


@dataclass
class Synthesis:
    audio: np.ndarray
    codes: np.ndarray  # int32 [frames, 16]
    stop_reason: str
    pieces: int
    pieces_at_budget: int
    timings: dict = field(default_factory=dict)
    chunks: list = field(default_factory=list)  # (frames_total, n_samples) per callback
    batch_max: int = 1  # the most requests it stepped with (NativeTTS max_batch)


class NativeTTS(native.NativeHandle):
    """A model loaded in the native engine (kz_tts_load)."""

    _free_name, _last_error_name = "kz_tts_free", "kz_tts_last_error"

    def __init__(
        self,
        talker,
        mmproj,
        threads: int = 2,
        codec_weights: str = "f16",
        n_ctx: int = 2048,
        codec_threads: int | None = None,
        max_batch: int = 1,
        queue: int = 0,
    ):
        """codec_threads as kazetts.TTS's (None: the library's default, kz_tts_auto_codec_threads).
        max_batch: requests said at once, each from its own thread (synthesize, stream_text), their
        talker steps and code predictor frames computed together; queue: how many more may wait
        for a seat, in arrival order (beyond them, or cancelled while waiting: NativeError)."""
        if codec_weights not in WEIGHTS:
            raise ValueError(f"unknown codec weights {codec_weights!r}: choose one of {', '.join(WEIGHTS)}")
        self._lib = lib()
        params = self._lib.kz_tts_default_params()
        params.n_threads, params.codec_weights, params.n_ctx = int(threads), WEIGHTS[codec_weights], int(n_ctx)
        params.max_batch, params.queue = int(max_batch), int(queue)
        if codec_threads is not None:
            params.codec_threads = int(codec_threads)
        self._handle = ctypes.c_void_p()
        err = native.error_buffer()
        native.check(
            self._lib.kz_tts_load(
                os.fsencode(str(talker)),
                os.fsencode(str(mmproj)),
                ctypes.byref(params),
                ctypes.byref(self._handle),
                err,
                len(err),
            ),
            err.value,
        )
        self.info = json.loads(self._lib.kz_tts_model_info(self._handle).decode("utf-8"))
        self.sample_rate = self._lib.kz_tts_sample_rate(self._handle)

    def cancel(self) -> None:
        self._lib.kz_tts_cancel(self._handle)

    def synthesize(
        self,
        text: str,
        request: Request | None = None,
        on_chunk: Callable[[np.ndarray, np.ndarray, int], bool] | None = None,
        **options,
    ) -> Synthesis:
        """The whole request; `on_chunk(audio, codes, frames_total)` (optional) sees every chunk
        and returns False to stop. `request` and the options as `kazetts.TTS.stream`'s (but for
        the Python engine's own: voice cloning, speed); the options are not checked here but by
        the library, whose checks the tests hold against the Python ones."""
        r, keep = c_request(**request_fields(request, options, stacklevel=2))
        callback, collected = _collector(on_chunk)
        res = NativeResult()
        res.struct_size = ctypes.sizeof(NativeResult)
        self._check(
            self._lib.kz_tts_synthesize(
                self._handle, text.encode("utf-8"), ctypes.byref(r), callback, None, ctypes.byref(res)
            )
        )
        del keep
        return self._synthesis(res, collected)

    def stream_text(
        self,
        chunks,
        request: Request | None = None,
        on_chunk: Callable[[np.ndarray, np.ndarray, int], bool] | None = None,
        **options,
    ) -> Synthesis:
        """A text stream (kz_tts_stream_*): `chunks` (str or UTF-8 bytes, cut anywhere) pushed in
        order from this thread while the stream's worker says them; then finish. `on_chunk` as
        `synthesize`'s, called on the worker thread. `request` and the options as `synthesize`'s."""
        r, keep = c_request(**request_fields(request, options, stacklevel=2))
        callback, collected = _collector(on_chunk)
        err = native.error_buffer()
        stream = ctypes.c_void_p()
        native.check(
            self._lib.kz_tts_stream_begin(
                self._handle, ctypes.byref(r), callback, None, ctypes.byref(stream), err, len(err)
            ),
            err.value,
        )
        res = NativeResult()
        res.struct_size = ctypes.sizeof(NativeResult)
        try:
            for chunk in chunks:
                data = chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)
                native.check(self._lib.kz_tts_stream_push(stream, data, len(data)), f"text that is not UTF-8: {data!r}")
            self._check(self._lib.kz_tts_stream_finish(stream, ctypes.byref(res)))
        finally:
            self._lib.kz_tts_stream_free(stream)
        del keep
        return self._synthesis(res, collected)

    def _synthesis(self, res: NativeResult, collected) -> Synthesis:
        audio, codes, chunks = collected
        timings = {name: getattr(res, name) for name, _ in NativeResult._fields_ if name.endswith("_ms")}
        return Synthesis(
            np.concatenate(audio) if audio else np.zeros(0, np.float32),
            np.concatenate(codes) if codes else np.zeros((0, N_CODEBOOKS), np.int32),
            STOP_REASONS[res.stop_reason],
            res.n_pieces,
            res.pieces_at_budget,
            timings,
            chunks,
            res.batch_max,
        )

    def enroll(self, pcm: np.ndarray, sample_rate: int, ref_text: str | None = None, ref_silence: float = 0.0):
        """A Voice from mono samples at any rate (kz_tts_enroll): the voice kazetts.TTS.enroll
        makes of (pcm, sample_rate), made by libkazetts alone (as an app without Python does)."""
        pcm = np.ascontiguousarray(pcm, dtype=np.float32).reshape(-1)
        handle = _P()
        self._check(
            self._lib.kz_tts_enroll(
                self._handle, native.ptr(pcm), pcm.size, int(sample_rate), _utf8(ref_text), ref_silence, handle
            )
        )
        return NativeVoice.owning(handle).voice()[0]


def _collector(on_chunk):
    """A chunk callback (kept alive by the caller) that collects the audio, codes and (frames_total,
    n_samples) of every chunk and asks `on_chunk(audio, codes, frames_total)` whether to go on (the
    request's own: others may run on the handle at once)."""
    audio: list[np.ndarray] = []
    all_codes: list[np.ndarray] = []
    chunks: list[tuple[int, int]] = []

    def callback(chunk_p, _user):
        c = chunk_p.contents
        samples = (
            np.ctypeslib.as_array(c.samples, shape=(c.n_samples,)).copy() if c.n_samples else np.zeros(0, np.float32)
        )
        codes = (
            np.ctypeslib.as_array(c.codes, shape=(c.n_frames, N_CODEBOOKS)).copy()
            if c.n_frames
            else np.zeros((0, N_CODEBOOKS), np.int32)
        )
        audio.append(samples)
        all_codes.append(codes)
        chunks.append((c.frames_total, c.n_samples))
        return 1 if on_chunk is None or on_chunk(samples, codes, c.frames_total) else 0

    return CHUNK_CALLBACK(callback), (audio, all_codes, chunks)
