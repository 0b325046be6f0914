"""Token sampling for the talker (codebook 0): libkazetts' rule (kz_talker_choose, rules.h).

The rule itself (HF ``generate``'s repetition penalty, end-of-speech ban, suppressed control ids,
temperature / top-k / top-p and the draw, as qwen-tts 0.1.1 configures them) has one definition,
native/src/stages/sampling.cpp, which both engines run: this module keeps a request's CB0 history
and hands each step's logits to it, one call a frame. Its numpy statement, which the tests hold
against HF's own processors and against the native rule, is kazetts/validation/oracles/sampling.py.
The code predictor samples CB1..15 inside libkazetts (cp_sampling.h).

A request's options, their defaults and their checks are kazetts.request's (``Request``);
``talker_config`` and ``code_predictor_config`` turn them into each sampler's ``SamplerConfig``.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, replace

import numpy as np

from kazetts import native
from kazetts.errors import KazettsError
from kazetts.request import MIN_FRAMES, REPETITION_PENALTY, TEMPERATURE, TOP_K, TOP_P, Request

NAN_LOGITS = "the talker's logits hold NaN: the model's weights are damaged"  # as native/src/stages/sampling.h
NAN_STATUS = -2  # kz_talker_choose's answer to NaN logits

_SIGNATURES = {
    "kz_talker_choose": (
        ctypes.c_int32,
        [
            ctypes.POINTER(ctypes.c_float),
            ctypes.c_int32,
            ctypes.c_int32,
            ctypes.POINTER(ctypes.c_int32),
            ctypes.c_int32,
            ctypes.POINTER(native.TtsRequest),
            ctypes.POINTER(ctypes.c_uint64),
        ],
    ),
}


def lib() -> ctypes.CDLL:
    """libkazetts with kz_talker_choose typed."""
    return native.bind(_SIGNATURES)


@dataclass
class SamplerConfig:
    """HF ``generate`` knobs. ``greedy=True`` is ``do_sample=False``: the warpers (temperature,
    top-k, top-p) are skipped, the logits processors (penalty, min tokens, suppress) still apply."""

    temperature: float = TEMPERATURE
    top_k: int = TOP_K
    top_p: float = TOP_P
    repetition_penalty: float = REPETITION_PENALTY
    min_new_tokens: int = MIN_FRAMES
    greedy: bool = False

    @classmethod
    def code_predictor(
        cls, temperature: float = TEMPERATURE, top_k: int = TOP_K, top_p: float = TOP_P, greedy: bool = False
    ) -> "SamplerConfig":
        """The reference's ``subtalker_*`` settings: no penalty, no minimum length."""
        return cls(
            temperature=temperature, top_k=top_k, top_p=top_p, repetition_penalty=1.0, min_new_tokens=0, greedy=greedy
        )

    def request(self) -> native.TtsRequest:
        """The kz_tts_request fields kz_talker_choose reads (the sampling ones and min_frames)."""
        r = native.TtsRequest()
        r.struct_size = ctypes.sizeof(native.TtsRequest)
        r.greedy, r.min_frames = int(bool(self.greedy)), int(self.min_new_tokens)
        r.temperature, r.top_k, r.top_p = self.temperature, int(self.top_k), self.top_p
        r.repetition_penalty = self.repetition_penalty
        return r


def talker_config(request: Request) -> SamplerConfig:
    """A request's talker (CB0) settings."""
    return SamplerConfig(
        temperature=request.temperature,
        top_k=request.top_k,
        top_p=request.top_p,
        repetition_penalty=request.repetition_penalty,
        min_new_tokens=request.min_frames,
        greedy=bool(request.greedy),
    )


def code_predictor_config(request: Request) -> SamplerConfig:
    """A request's code predictor (CB1..15) settings: its ``cp_*`` options (the reference's ``subtalker_*``)."""
    return SamplerConfig.code_predictor(
        request.cp_temperature, request.cp_top_k, request.cp_top_p, bool(request.greedy)
    )


class TalkerSampler:
    """Codebook-0 sampler of the talker for one utterance: keeps the CB0 ids generated so far
    (what HF's ``input_ids`` hold during ``talker.generate``) and picks each next id with
    kz_talker_choose, drawing from a ``native.Rng`` when sampling."""

    def __init__(self, config: SamplerConfig, vocab_size: int, eos_token_id: int):
        self.config = config
        self.vocab_size, self.eos_token_id = int(vocab_size), int(eos_token_id)
        self._request = config.request()
        self._history = np.zeros(64, np.int32)
        self._steps = 0
        self._lib = lib()

    @classmethod
    def for_talker(
        cls, vocab_size: int, eos_token_id: int, config: SamplerConfig | None = None, **overrides
    ) -> "TalkerSampler":
        """As the reference configures it; ids come from the model (config.json / GGUF)."""
        return cls(replace(config or SamplerConfig(), **overrides), vocab_size, eos_token_id)

    @property
    def history(self) -> np.ndarray:
        """The CB0 ids generated so far (int32; a view: writing an id changes the history)."""
        return self._history[: self._steps]

    @history.setter
    def history(self, ids) -> None:
        ids = np.asarray(ids, np.int32).reshape(-1)
        self._history = np.resize(ids, max(64, 2 * len(ids)))
        self._steps = len(ids)

    @property
    def step(self) -> int:
        """Number of CB0 ids generated so far."""
        return self._steps

    def reset(self) -> None:
        self._steps = 0

    def choose(self, logits: np.ndarray, rng: native.Rng | None = None) -> int:
        """Raw codec-head logits [vocab] -> the next CB0 id, appended to the history. Sampling
        draws one uniform from `rng`; KazettsError on NaN logits (a damaged model)."""
        row = np.ascontiguousarray(logits, dtype=np.float32).reshape(-1)
        if row.size != self.vocab_size:
            raise ValueError(f"logits have {row.size} values; this talker has {self.vocab_size} codec ids")
        if not self.config.greedy and not isinstance(rng, native.Rng):
            raise ValueError("sampling needs a random source: a kazetts.native.Rng")
        if self._steps == len(self._history):
            self._history = np.resize(self._history, 2 * len(self._history))
        token = self._lib.kz_talker_choose(
            native.ptr(row),
            self.vocab_size,
            self.eos_token_id,
            native.ptr(self._history, ctypes.c_int32),
            self._steps,
            ctypes.byref(self._request),
            None if self.config.greedy else rng.pointer,
        )
        if token == NAN_STATUS:
            raise KazettsError(NAN_LOGITS)
        if token < 0:
            raise ValueError(f"kz_talker_choose refused the step (sampling {self.config})")
        self._history[self._steps] = token
        self._steps += 1
        return token

    def is_eos(self, token: int) -> bool:
        return int(token) == self.eos_token_id
