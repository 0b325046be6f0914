"""The talker: a llama.cpp `qwen3tts` model driven by embedding vectors, in libkazetts.

``Talker`` wraps the C API of ``native/include/kazetts/talker.h`` (``kz_talker_*``), the driver
both engines run (the native engine holds its C++ class, ``native/src/stages/talker.h``): llama.cpp
through the libllama that llama-cpp-python ships, which libkazetts links. Each call feeds
embeddings (the prefill, then one vector per frame) and returns, for the last position only, the
hidden state after the final norm (the code predictor's input) and the 3072 codec logits (CB0).
That row is the only output of a decode, its hidden state copied while the graph runs; the batches
carry IMROPE's 4 position streams; the KV cache holds what the longest utterance so far asked
for: see talker.h.

Slots: a talker of ``slots`` > 1 holds as many utterances at a time, each a llama.cpp sequence of
its own (``reset_slot``, ``step_slots``, ``outputs``), and each slot gets, bit for bit, the hidden
state and logits its rows get alone in a talker of one slot (the rules at the top of
native/src/stages/talker.h). ``step`` and ``reset`` are slot 0's.
"""

from __future__ import annotations

import ctypes
import os
import pathlib
from typing import Iterable

import llama_cpp
import numpy as np

from kazetts import native
from kazetts.gguf.header import GGUFError
from kazetts.stages.talker_file import TalkerFile


class _Params(ctypes.Structure):
    """kz_talker_params."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("n_threads", ctypes.c_int32),
        ("n_ctx", ctypes.c_int32),
        ("n_batch", ctypes.c_int32),
        ("slots", ctypes.c_int32),
        ("verbose", ctypes.c_int32),
    ]


_P = ctypes.c_void_p
_c_float_p = ctypes.POINTER(ctypes.c_float)
_c_int32_p = ctypes.POINTER(ctypes.c_int32)
_SIGNATURES = {
    "kz_talker_default_params": (_Params, []),
    "kz_talker_load": (
        ctypes.c_int,
        [ctypes.c_char_p, ctypes.POINTER(_Params), ctypes.POINTER(_P), ctypes.c_char_p, ctypes.c_size_t],
    ),
    "kz_talker_free": (None, [_P]),
    "kz_talker_last_error": (ctypes.c_char_p, [_P]),
    "kz_talker_tokenize": (
        ctypes.c_int,
        [_P, ctypes.c_char_p, ctypes.c_int32, _c_int32_p, ctypes.c_int32, _c_int32_p],
    ),
    "kz_talker_reset_slot": (ctypes.c_int, [_P, ctypes.c_int32, ctypes.c_int32]),
    "kz_talker_step_slots": (
        ctypes.c_int,
        [_P, ctypes.c_int32, _c_int32_p, ctypes.POINTER(_c_float_p), _c_int32_p],
    ),
    "kz_talker_hidden": (_c_float_p, [_P, ctypes.c_int32]),
    "kz_talker_logits": (_c_float_p, [_P, ctypes.c_int32]),
    "kz_talker_position": (ctypes.c_int32, [_P, ctypes.c_int32]),
    "kz_talker_slots": (ctypes.c_int32, [_P]),
    "kz_talker_capacity": (ctypes.c_int32, [_P]),
    "kz_talker_hidden_size": (ctypes.c_int32, [_P]),
    "kz_talker_n_vocab": (ctypes.c_int32, [_P]),
    "kz_talker_shares_steps": (ctypes.c_int32, [_P]),
    "kz_talker_decodes": (ctypes.c_int64, [_P]),
    "kz_talker_model_params": (None, [_P]),
}
_FILE_ERRORS = (2, 3)  # KZ_ERR_IO, KZ_ERR_FORMAT: llama.cpp cannot load the file
# KZ_ERR_INVALID_ARGUMENT, KZ_ERR_STATE: a call refused before anything is computed (a slot out of
# range, an utterance longer than its reset made room for)
_REFUSED = (1, 6)


def extra_buffers() -> bool:
    """Whether the talker loads its weights with llama.cpp's extra CPU buffer types (CPU_REPACK),
    as kz_talker_model_params decides: yes, except on CPUs with AMX (see kazetts/talker.h)."""
    params = llama_cpp.llama_model_default_params()
    native.bind(_SIGNATURES).kz_talker_model_params(ctypes.byref(params))
    return bool(params.use_extra_bufts)


@llama_cpp.llama_log_callback
def _quiet_log(level, text, user_data):  # llama.cpp logs to stderr by default; kazetts keeps quiet
    return None


class Talker(native.NativeHandle):
    """A loaded talker with its KV cache: `slots` utterances at a time (default one).

    n_ctx bounds prompt + frames of one utterance; the KV cache (117 MB per 1024 positions a slot
    on the 0.6B) holds what the longest utterance so far asked for (`reset(positions)`), in steps
    of 256 positions, not n_ctx from the start. n_batch bounds the prefill chunk and with it
    llama.cpp's compute buffer."""

    _free_name, _last_error_name = "kz_talker_free", "kz_talker_last_error"

    def __init__(
        self,
        path: pathlib.Path | str,
        threads: int = 2,
        n_ctx: int = 1024,
        n_batch: int = 64,
        verbose: bool = False,
        slots: int = 1,
    ):
        if not verbose:  # (ggml's GGUF reader logs through it too: before the file is opened)
            llama_cpp.llama_log_set(_quiet_log, ctypes.c_void_p())
        # opening it checks what llama.cpp would load and then abort the process on (a token twice
        # in the vocabulary: one flipped byte; an F16 norm vector; an integer matrix)
        self.file = TalkerFile(path)
        self._lib = native.bind(_SIGNATURES)
        params = self._lib.kz_talker_default_params()
        params.n_threads, params.n_ctx, params.n_batch = int(threads), int(n_ctx), int(n_batch)
        params.slots, params.verbose = int(slots), int(bool(verbose))
        handle, err = ctypes.c_void_p(), native.error_buffer()
        status = self._lib.kz_talker_load(
            os.fsencode(self.file.path), ctypes.byref(params), ctypes.byref(handle), err, len(err)
        )
        if status in _FILE_ERRORS:
            raise GGUFError(err.value.decode("utf-8", "replace"))
        if status in _REFUSED:  # threads, n_ctx, n_batch or slots out of range
            raise ValueError(err.value.decode("utf-8", "replace"))
        native.check(status, err.value)
        self._handle = handle
        # llama.cpp maps the file and reads all of it in; token_embd (~160 MB on the 0.6B) it never
        # reads again, the talker being fed embeddings (the prompt reads its rows from the file)
        native.release_file_pages(self.file.path, *self.file.embd_span)
        self.n_ctx, self.n_batch, self.threads = n_ctx, n_batch, threads
        self.slots = self._lib.kz_talker_slots(handle)
        self.hidden_size = self._lib.kz_talker_hidden_size(handle)
        self._n_vocab = self._lib.kz_talker_n_vocab(handle)
        text = self.file.text_vocab_size
        self._codec_ids = slice(text, text + self.file.codec_vocab_size)

    @property
    def handle(self) -> ctypes.c_void_p:
        """The kz_talker handle, for native code that drives its slots."""
        return self._handle

    @property
    def position(self) -> int:
        """Positions slot 0 was fed since its reset."""
        return self._lib.kz_talker_position(self._live(), 0)

    @property
    def capacity(self) -> int:
        """Positions each slot has room for now (what the longest utterance so far asked for)."""
        return self._lib.kz_talker_capacity(self._live())

    # -- text -----------------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[int]:
        """Token ids with llama.cpp's tokenizer from the GGUF; special tokens are parsed."""
        data = text.encode("utf-8")
        capacity, n = len(data) + 16, ctypes.c_int32()
        while True:
            tokens = (ctypes.c_int32 * capacity)()
            status = self._lib.kz_talker_tokenize(self._live(), data, len(data), tokens, capacity, ctypes.byref(n))
            if status == 0 or n.value <= capacity:
                break
            capacity = n.value  # more ids than room: again with room for them
        self._call(status)
        return list(tokens[: n.value])

    # -- decoding -------------------------------------------------------------------------------
    def reset(self, positions: int | None = None) -> None:
        """Forget the previous utterance (clears the KV cache) and make room for one of up to
        `positions` (prompt + frames; default n_ctx)."""
        self.reset_slot(0, positions)

    def reset_slot(self, slot: int, positions: int | None = None) -> None:
        """reset() of one slot: the other slots keep their utterances."""
        if positions is not None and not 1 <= positions <= self.n_ctx:
            raise ValueError(f"an utterance of {positions} positions does not fit the talker's context of {self.n_ctx}")
        self._call(self._lib.kz_talker_reset_slot(self._live(), int(slot), 0 if positions is None else int(positions)))

    def step(self, embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Feeds [n, hidden] embeddings after what came before; returns (hidden [H], codec logits [V])
        of the last position."""
        self.step_slots([(0, embeddings)])
        return self.outputs(0)

    def step_slots(self, steps: Iterable[tuple[int, np.ndarray]]) -> None:
        """Feeds each listed slot (at most once) its [n, hidden] embeddings after what came before,
        all in one call (single rows of several slots share decodes where that keeps each slot's
        bits); then `outputs(slot)` is each one's last position's. The other slots keep theirs."""
        steps = list(steps)
        rows = [np.ascontiguousarray(e, dtype=np.float32).reshape(-1, self.hidden_size) for _, e in steps]
        n = len(steps)
        slots = (ctypes.c_int32 * n)(*(int(slot) for slot, _ in steps))
        pointers = (_c_float_p * n)(*(native.ptr(r) for r in rows))
        counts = (ctypes.c_int32 * n)(*(len(r) for r in rows))
        self._call(self._lib.kz_talker_step_slots(self._live(), n, slots, pointers, counts))

    def outputs(self, slot: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(hidden [H], codec logits [V]) of the slot's last step: copies."""
        hidden, logits = self._lib.kz_talker_hidden(self._live(), slot), self._lib.kz_talker_logits(self._handle, slot)
        if not hidden or not logits:
            raise ValueError(f"no slot {slot} in a talker of {self.slots}")
        return (
            np.ctypeslib.as_array(hidden, shape=(self.hidden_size,)).copy(),
            np.ctypeslib.as_array(logits, shape=(self._n_vocab,))[self._codec_ids].copy(),
        )

    # -- diagnostics (tests) --------------------------------------------------------------------
    @property
    def shares_steps(self) -> bool:
        """Whether single rows of several slots share decodes (checked at load, see talker.h)."""
        return bool(self._lib.kz_talker_shares_steps(self._live()))

    @property
    def decodes(self) -> int:
        """llama_decode calls so far (the load's included)."""
        return self._lib.kz_talker_decodes(self._live())

    def _live(self) -> ctypes.c_void_p:
        if not self._handle:
            raise ValueError("the talker is closed")
        return self._handle

    def _call(self, status: int) -> None:
        if status in _REFUSED:
            raise ValueError(self._lib.kz_talker_last_error(self._handle).decode("utf-8", "replace"))
        self._check(status)
