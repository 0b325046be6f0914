"""The talker: a llama.cpp `qwen3tts` model driven by embedding vectors through llama-cpp-python.

Each call feeds embeddings (the prefill, then one vector per frame) and returns, for the last
position only, the hidden state after the final norm (the code predictor's input) and the
3072 codec logits (CB0). That row is the only output: the context computes logits without
embeddings (with embeddings on, llama.cpp outputs every row of a batch, "embeddings required but
some input tokens were not marked as outputs -> overriding": the last layer's FFN, the head and
155008 padded logits for each prompt row, with compute and output buffers for n_batch such rows,
~85 MB), and libkazetts' eval callback copies the hidden state of the output row while the graph
runs (kazetts/talker.h: the context parameters of both engines come from there).

The model uses IMROPE (M-RoPE, interleaved): a batch carries 4 position streams per token,
section-major (pos[j * n_tokens + i] = p_i for j = 0..3); in TTS all streams are equal, so
it is plain RoPE. The batch is built here with a 4 x n_tokens position array because
`llama_batch_init(n, embd, 1)` allocates only n positions and llama.cpp would read past it.
"""

from __future__ import annotations

import ctypes
import pathlib

import llama_cpp
import numpy as np

from kazetts import native
from kazetts.errors import KazettsError
from kazetts.gguf.header import GGUFError
from kazetts.stages.talker_file import TalkerFile

POSITION_STREAMS = 4
KV_STEP = 256  # the KV cache grows in steps of llama.cpp's padding of attended cells


class _Hidden(ctypes.Structure):
    """kz_talker_hidden: where a decode's eval callback copies the output row's hidden state."""

    _fields_ = [("data", ctypes.POINTER(ctypes.c_float)), ("n_embd", ctypes.c_int64), ("written", ctypes.c_int32)]


_SIGNATURES = {
    "kz_talker_context_params": (
        None,
        [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(_Hidden)],
    ),
}


def extra_buffers_are_safe() -> bool:
    """False when llama-cpp-python's ggml CPU backend sees AMX here (or cannot be asked).

    ggml's AMX kernels for batches of 2+ rows (the prefill; one row takes an AVX-512 VNNI path)
    start with ggml_tile_config_init, whose `_tile_loadconfig(&tc)` GCC 12 compiles wrongly: its
    amxtileintrin.h declares ldtilecfg's memory operand as 8 bytes, so the stores of the 64-byte
    config's rows and colsb are dead-store-eliminated and every tile has 0 rows; the next tile
    instruction (tilezero) raises #UD, the process dies of SIGILL. Any weight type with AMX kernels,
    any thread count. Keeping only some tensors in AMX buffers does not help: each one crashes in
    the prefill. (Restoring the config in gdb makes the prefill run; see docs/benchmarks.md.)"""
    libs = sorted(pathlib.Path(llama_cpp.__file__).parent.joinpath("lib").glob("libggml-cpu.*"))
    return bool(libs) and not ctypes.CDLL(str(libs[0])).ggml_cpu_has_amx_int8()


@llama_cpp.llama_log_callback
def _quiet_log(level, text, user_data):  # llama.cpp logs to stderr by default; kazetts keeps quiet
    return None


class Talker:
    """A loaded talker with its KV cache (one utterance at a time).

    n_ctx bounds prompt + frames of one utterance; the KV cache (117 MB per 1024 positions on the
    0.6B) holds what the longest utterance so far asked for (`reset(positions)`), in steps of
    KV_STEP, not n_ctx from the start. n_batch bounds the prefill chunk and with it llama.cpp's
    compute buffer."""

    def __init__(
        self, path: pathlib.Path | str, threads: int = 2, n_ctx: int = 1024, n_batch: int = 64, verbose: bool = False
    ):
        if not verbose:  # (ggml's GGUF reader logs through it too: before the file is opened)
            llama_cpp.llama_log_set(_quiet_log, ctypes.c_void_p())
        # opening it checks what llama.cpp would load and then abort the process on (a token twice
        # in the vocabulary: one flipped byte; an F16 norm vector; an integer matrix)
        self.file = TalkerFile(path)
        llama_cpp.llama_backend_init()
        model_params = llama_cpp.llama_model_default_params()
        model_params.n_gpu_layers = 0
        # llama.cpp's extra CPU buffer types repack weights for faster kernels (ARM dotprod/i8mm,
        # AVX2 Q4_0), but with AMX (recent Xeons) a GCC 12 build of ggml dies of SIGILL in
        # ggml_backend_amx_mul_mat on any batch of 2+ rows (see extra_buffers_are_safe): there,
        # plain CPU buffers.
        model_params.use_extra_bufts = extra_buffers_are_safe()
        native.use_talker_backend()  # the talker's Q8_0 products (see kazetts/talker_backend.h)
        self._model = llama_cpp.llama_model_load_from_file(str(self.file.path).encode(), model_params)
        if not self._model:
            raise GGUFError(f"llama.cpp could not load the talker {self.file.path} (truncated or corrupted?)")
        # llama.cpp maps the file and reads all of it in; token_embd (~160 MB on the 0.6B) it never
        # reads again, the talker being fed embeddings (the prompt reads its rows from the file)
        native.release_file_pages(self.file.path, *self.file.embd_span)
        self.n_ctx, self.n_batch, self.threads = n_ctx, n_batch, threads
        self.hidden_size = self.file.hidden_size
        self._hidden_row = np.zeros(self.hidden_size, dtype=np.float32)
        self._hidden = _Hidden(native.ptr(self._hidden_row), self.hidden_size, 0)
        self.position = self.capacity = 0
        self._ctx = None
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        try:
            self._reserve(1)  # a context that fails, fails here
        except KazettsError:
            llama_cpp.llama_model_free(self._model)
            self._model = None
            raise

    def _reserve(self, positions: int) -> None:
        """A context of at least `positions` (whole KV_STEPs, at most n_ctx), made anew when the
        current one is smaller. llama.cpp attends to the used cells padded to 256, so a context
        of whole steps computes what an n_ctx one does, bit for bit."""
        capacity = min(self.n_ctx, -(-positions // KV_STEP) * KV_STEP)
        if capacity <= self.capacity:
            return
        if self._ctx:
            llama_cpp.llama_free(self._ctx)
            self._ctx, self.capacity = None, 0
        ctx_params = llama_cpp.llama_context_default_params()
        native.bind(_SIGNATURES).kz_talker_context_params(
            ctypes.byref(ctx_params), capacity, self.n_batch, self.threads, ctypes.byref(self._hidden)
        )
        self._ctx = llama_cpp.llama_init_from_model(self._model, ctx_params)
        if not self._ctx:
            raise KazettsError(f"llama.cpp could not create a context of {capacity} positions for {self.file.path}")
        self.capacity = capacity

    # -- text -----------------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[int]:
        """Token ids with llama.cpp's tokenizer from the GGUF; special tokens are parsed."""
        data = text.encode("utf-8")
        capacity = len(data) + 16
        tokens = (llama_cpp.llama_token * capacity)()
        n = llama_cpp.llama_tokenize(self._vocab, data, len(data), tokens, capacity, False, True)
        if n < 0:
            raise ValueError("text too long to tokenize")
        return list(tokens[:n])

    # -- decoding -------------------------------------------------------------------------------
    def reset(self, positions: int | None = None) -> None:
        """Forget the previous utterance (clears the KV cache) and make room for one of up to
        `positions` (prompt + frames; default n_ctx)."""
        if positions is not None and not 1 <= positions <= self.n_ctx:
            raise ValueError(f"an utterance of {positions} positions does not fit the talker's context of {self.n_ctx}")
        self._reserve(self.n_ctx if positions is None else positions)
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self._ctx), True)
        self.position = 0

    def step(self, embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Feeds [n, hidden] embeddings after what came before; returns (hidden [H], codec logits [V])
        of the last position."""
        embeddings = np.ascontiguousarray(embeddings, dtype=np.float32).reshape(-1, self.hidden_size)
        if self.position + len(embeddings) > self.capacity:
            raise ValueError(
                f"the utterance needs more than the {self.capacity} positions reset() made room for "
                f"(the talker's context holds at most {self.n_ctx})"
            )
        self._hidden.written = 0
        for start in range(0, len(embeddings), self.n_batch):
            chunk = embeddings[start : start + self.n_batch]
            self._decode(chunk, output_last=start + self.n_batch >= len(embeddings))
        if not self._hidden.written:
            raise KazettsError(f"llama.cpp's graph for {self.file.path} gave no hidden state (result_norm)")
        n_vocab = self.file.text_vocab_size + self.file.codec_vocab_size
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self._ctx, -1), shape=(n_vocab,))
        return self._hidden_row.copy(), logits[self.file.text_vocab_size :].copy()

    def _decode(self, chunk: np.ndarray, output_last: bool) -> None:
        n = len(chunk)
        positions = np.tile(np.arange(self.position, self.position + n, dtype=np.int32), POSITION_STREAMS)
        n_seq = np.ones(n, dtype=np.int32)
        seq0 = (ctypes.c_int32 * 1)(0)
        seq_ids = (ctypes.POINTER(ctypes.c_int32) * n)(*([ctypes.cast(seq0, ctypes.POINTER(ctypes.c_int32))] * n))
        outputs = np.zeros(n, dtype=np.int8)
        outputs[-1] = 1 if output_last else 0
        batch = llama_cpp.llama_batch()
        batch.n_tokens = n
        batch.token = ctypes.cast(None, ctypes.POINTER(llama_cpp.llama_token))
        batch.embd = chunk.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        batch.pos = positions.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_pos))
        batch.n_seq_id = n_seq.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
        batch.seq_id = seq_ids
        batch.logits = outputs.ctypes.data_as(ctypes.POINTER(ctypes.c_int8))
        status = llama_cpp.llama_decode(self._ctx, batch)
        if status != 0:
            raise KazettsError(
                f"llama_decode failed with status {status} at position {self.position} of {self.file.path}"
            )
        self.position += n

    def close(self) -> None:
        if getattr(self, "_ctx", None):
            llama_cpp.llama_free(self._ctx)
            self._ctx = None
        if getattr(self, "_model", None):
            llama_cpp.llama_model_free(self._model)
            self._model = None

    def __del__(self):
        self.close()
