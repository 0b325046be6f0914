"""Several requests at once on one model (TTS(max_batch=N)): where their frame loops meet.

Each request runs its own frame loop (talker_frames) on its own thread, in a seat: a talker slot
(its own sequence and KV cells), a codec stream and a member of the batch. Its talker steps and
code predictor frames go through the batch (kazetts/batch.h, the native engine's meeting point),
which runs them together once every present request has handed one in: one talker call for all
rows, one pass over the code predictor's weights for all frames. Each request gets the bits it
gets alone. A request is present only while its frame loop computes the next frame; while its
codec decodes, its consumer reads its audio or it waits for text, it is away and not waited for.
"""

from __future__ import annotations

import collections
import ctypes
import functools
import threading
from typing import Iterator

import numpy as np

from kazetts import native
from kazetts.errors import BusyError, KazettsError
from kazetts.stages.code_predictor import CodePredictor
from kazetts.stages.codec import CodecDecoder, CodecStream
from kazetts.stages.sampling import SamplerConfig
from kazetts.stages.talker import Talker
from kazetts.engine.talker_loop import NativeFrames

_P, _i32, _i32_p = ctypes.c_void_p, ctypes.c_int32, ctypes.POINTER(ctypes.c_int32)
_f32_p = ctypes.POINTER(ctypes.c_float)
_SIGNATURES = {
    "kz_batch_new": (_P, [_P, _P]),
    "kz_batch_free": (None, [_P]),
    "kz_batch_enter": (_P, [_P]),
    "kz_batch_away": (None, [_P, _i32]),
    "kz_batch_leave": (None, [_P]),
    "kz_batch_talker_step": (ctypes.c_int, [_P, _i32, _f32_p, _i32, _i32, _i32_p]),
    "kz_batch_cp_frame": (ctypes.c_int, [_P, _i32, _i32, _P, _i32_p, _f32_p, _i32_p]),
    "kz_batch_embed_codes": (ctypes.c_int, [_P, _i32_p, _f32_p]),
    "kz_batch_codec_decode": (
        ctypes.c_int,
        [_P, _P, _i32_p, ctypes.c_int, ctypes.c_int, _f32_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
    ),
    "kz_batch_last_error": (ctypes.c_char_p, []),
}


class Batch(native.NativeHandle):
    """The meeting point of the requests on one talker (of max_batch slots) and code predictor,
    which nothing else may use while it lives."""

    _free_name = "kz_batch_free"

    def __init__(self, talker: Talker, code_predictor: CodePredictor):
        self._lib = native.bind(_SIGNATURES)
        self.talker, self.code_predictor = talker, code_predictor
        self._handle = self._lib.kz_batch_new(talker.handle, code_predictor._handle)
        if not self._handle:
            raise MemoryError("kz_batch_new")

    def _check(self, status: int) -> None:
        if status != 0:
            native.check(status, self._lib.kz_batch_last_error() or b"")

    def embed_codes(self, codes16) -> np.ndarray:
        """The code predictor's embed_codes, between the batches."""
        codes = self.code_predictor.frame_codes(codes16)
        out = np.zeros(self.code_predictor.n_embd_in, np.float32)
        self._check(self._lib.kz_batch_embed_codes(self._handle, native.ptr(codes, ctypes.c_int32), native.ptr(out)))
        return out


class Seat:
    """A request's place in the batch: its talker slot, codec stream and presence.

    `talker` drives the slot as talker_frames drives a Talker (reset, then steps), through the
    batch; `frames(config, rng)` makes its code predictor frames there; `present(frames)` marks
    the request present while a frame is computed. `codec` decodes on the batch's thread when
    the codec is serial (`serial_codec`), as the native engine does: ggml's OpenMP team of the
    request's thread, spinning idle between its codec pushes, took the cores from the batch's
    (a lone request ran ~1.6x slower); an overlapped codec keeps its own thread."""

    def __init__(self, batch: Batch, slot: int, codec: CodecStream, serial_codec: bool):
        self.batch, self.slot = batch, slot
        self.codec = _BatchCodec(batch, codec) if serial_codec else codec
        self.talker = _SlotTalker(self)
        self._member = None
        self.batch_max = 1  # the most requests its steps ran with

    def call(self, fn, *args) -> None:
        """A batch call for this seat's slot: fn(handle, slot, *args, together), `together` the
        count of requests it ran with (kept in batch_max)."""
        together = ctypes.c_int32(0)
        self.batch._check(fn(self.batch._handle, self.slot, *args, ctypes.byref(together)))
        self.batch_max = max(self.batch_max, together.value)

    def enter(self) -> None:
        """The request starts: a member, away until its frame loop computes."""
        self.batch_max = 1
        self._member = self.batch._lib.kz_batch_enter(self.batch._handle)
        if not self._member:
            raise MemoryError("kz_batch_enter")
        self.batch._lib.kz_batch_away(self._member, 1)

    def leave(self) -> None:
        if self._member:
            self.batch._lib.kz_batch_leave(self._member)
            self._member = None

    def present(self, frames: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
        """`frames` (a talker_frames generator) with the request present while each frame is made."""
        lib = self.batch._lib
        try:
            while True:
                lib.kz_batch_away(self._member, 0)
                try:
                    codes = next(frames)
                except StopIteration:
                    return
                finally:
                    lib.kz_batch_away(self._member, 1)
                yield codes
        finally:
            frames.close()

    def frames(self, config: SamplerConfig, rng: native.Rng | None) -> "_SlotFrames":
        return _SlotFrames(self, config, rng)


class _BatchCodec:
    """A codec stream whose pushes run on the batch's thread, between the batches."""

    def __init__(self, batch: Batch, stream: CodecStream):
        self._stream = stream
        self._push = functools.partial(batch._lib.kz_batch_codec_decode, batch._handle)

    def stream(self, codes_chunk) -> np.ndarray:
        status, audio = self._stream.decoder._push(self._push, self._stream._handle, codes_chunk)
        self._stream._check(status)
        return audio

    def reset(self) -> None:
        self._stream.reset()


class _SlotTalker:
    """The Talker interface talker_frames uses, for one slot through the batch."""

    def __init__(self, seat: Seat):
        self._seat = seat
        self._talker = seat.batch.talker
        self.n_ctx = self._talker.n_ctx
        self._reset = -1

    def reset(self, positions: int | None = None) -> None:
        """Made anew with the next step (the piece's prefill), in the batch's thread."""
        self._reset = self.n_ctx if positions is None else int(positions)

    def step(self, embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = np.ascontiguousarray(embeddings, dtype=np.float32).reshape(-1, self._talker.hidden_size)
        self._seat.call(self._seat.batch._lib.kz_batch_talker_step, native.ptr(rows), len(rows), self._reset)
        self._reset = -1
        return self._talker.outputs(self._seat.slot)


class _SlotFrames:
    """Codebooks 1..15 of the slot's frames from the batch (a FramePredictor), sampled as
    NativeFrames samples them."""

    def __init__(self, seat: Seat, config: SamplerConfig, rng: native.Rng | None):
        self._seat = seat
        cp = seat.batch.code_predictor
        self._keep: list = []
        self._sampling = cp.sampling(
            self._keep,
            greedy=config.greedy,
            temperature=config.temperature,
            top_k=config.top_k,
            top_p=config.top_p,
            rng=rng,
        )
        self._codes = np.zeros(cp.n_codebooks, np.int32)
        self._n_embd_in = cp.n_embd_in

    def predict(self, hidden: np.ndarray, cb0: int, frame: int) -> tuple[np.ndarray, np.ndarray]:
        """(the frame's 16 codes, their summed embedding); `hidden` is the slot's, which the batch reads itself."""
        embedding = np.zeros(self._n_embd_in, np.float32)
        self._seat.call(
            self._seat.batch._lib.kz_batch_cp_frame,
            int(cb0),
            ctypes.byref(self._sampling),
            native.ptr(self._codes, ctypes.c_int32),
            native.ptr(embedding),
        )
        return np.concatenate([[cb0], self._codes]).astype(np.int32), embedding


class LoneSeat:
    """The one seat of a TTS of max_batch 1: the talker, code predictor and codec themselves,
    driven on the request's thread (no batch, nobody to wait for)."""

    def __init__(self, talker: Talker, code_predictor: CodePredictor, codec: CodecDecoder):
        self.talker, self.codec, self._code_predictor = talker, codec, code_predictor
        self.batch_max = 1

    def enter(self) -> None:
        pass

    def leave(self) -> None:
        pass

    def present(self, frames: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
        return frames

    def frames(self, config: SamplerConfig, rng: native.Rng | None) -> NativeFrames:
        return NativeFrames(self._code_predictor, config, rng)


class SeatPool:
    """A TTS's seats: a request takes one for its whole run. Beyond them a request waits for one,
    in arrival order, when fewer than `queue` wait already; else BusyError."""

    def __init__(self, seats: list, queue: int):
        self._free, self._count, self._queue = list(seats), len(seats), queue
        self._waiting: collections.deque = collections.deque()
        self._changed = threading.Condition()
        self._closed = self._released = False

    def take(self):
        with self._changed:
            if self._closed:
                raise KazettsError("this TTS is closed")
            if not self._free or self._waiting:
                if len(self._waiting) >= self._queue:
                    raise BusyError(self._busy())
                ticket = object()
                self._waiting.append(ticket)
                try:
                    self._changed.wait_for(lambda: self._closed or (self._waiting[0] is ticket and self._free))
                finally:
                    self._waiting.remove(ticket)
                    self._changed.notify_all()
                if self._closed:
                    raise KazettsError("this TTS was closed while the request waited for a seat")
            return self._free.pop()

    def _busy(self) -> str:
        if self._count == 1 and self._queue == 0:
            return (
                "this TTS is already serving a request (one at a time): finish or close() the running stream "
                "first, or make it with max_batch=N to serve N at once"
            )
        return (
            f"this TTS serves {self._count} requests at once (max_batch) and {len(self._waiting)} wait for a "
            "seat (queue): try again later"
        )

    def give(self, seat) -> bool:
        """The request ended; True (once) when the TTS was closed and every seat is now free:
        its stages can be freed."""
        with self._changed:
            self._free.append(seat)
            self._changed.notify_all()
            return self._release()

    def close(self) -> bool:
        """No more requests (those waiting are refused); True (once) when no seat is taken."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            return self._release()

    def _release(self) -> bool:
        if self._closed and len(self._free) == self._count and not self._released:
            self._released = True
            return True
        return False

    @property
    def waiting(self) -> int:
        """Requests waiting for a seat."""
        return len(self._waiting)
