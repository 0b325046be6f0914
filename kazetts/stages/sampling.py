"""Token sampling for the talker (codebook 0) and the code predictor, numpy only.

Reproduces what Hugging Face transformers 4.57.3 ``generate`` does with the settings the
official reference (qwen-tts 0.1.1, ``Qwen3TTSForConditionalGeneration.generate``) passes.

Talker (``self.talker.generate(inputs_embeds=..., **talker_kwargs)``). ``_get_logits_processor``
(transformers/generation/utils.py) builds, in this order:

1. ``RepetitionPenaltyLogitsProcessor(1.05)`` (utils.py:1141). It sees ``input_ids`` which, since
   only ``inputs_embeds`` are passed, start empty (``_maybe_initialize_input_ids_for_generation``
   returns a ``(batch, 0)`` tensor) and grow by the generated CB0 ids only: the prompt is never
   penalised. Every *distinct* id generated so far is penalised once (gather/scatter, no
   compounding): ``logit * p`` if ``logit < 0`` else ``logit / p``; the arithmetic is float32 with
   the scalar rounded to float32 (``x / float32(1.05)``, checked bit for bit against torch).
2. ``MinLengthLogitsProcessor(2, eos)`` (utils.py:1169): ``_prepare_generated_length``
   (utils.py:1685) turns ``min_new_tokens=2`` into ``min_length = 2 + len(input_ids) = 2``.
3. ``MinNewTokensLengthLogitsProcessor(0, 2, eos)`` (utils.py:1181). 2 and 3 are the same
   thing here: EOS is set to ``-inf`` while fewer than 2 ids have been generated.
4. ``SuppressTokensLogitsProcessor`` (utils.py:1225): ids ``vocab-1024 .. vocab-1`` except EOS
   are set to ``-inf`` at every step.
   -- only when ``do_sample`` (utils.py:1251), i.e. never in greedy mode: --
5. ``TemperatureLogitsWarper(0.9)`` if ``temperature != 1.0`` (utils.py:1266): ``x / float32(T)``.
6. ``TopKLogitsWarper(50)`` if ``top_k != 0`` (utils.py:1268): ``x < topk(x, k)[-1]`` is set to
   ``-inf``, so values tied with the k-th largest are all kept (more than k may survive).
7. ``TopPLogitsWarper`` only if ``top_p < 1.0`` (utils.py:1272): top_p = 1.0 adds nothing.

Then ``_sample`` (utils.py:2800) takes ``softmax`` + ``torch.multinomial`` when sampling, else
``argmax`` of the processed scores (greedy keeps 1-4, including the repetition penalty).

Code predictor (``self.code_predictor.generate(inputs_embeds=..., max_new_tokens=15,
do_sample=subtalker_dosample, top_k=subtalker_top_k, top_p=..., temperature=...)``): no
repetition penalty, no min length, no suppressed ids; only the warpers 5-7 when sampling,
plain argmax in greedy mode.

Random numbers: ``pick`` draws one uniform from ``rng.random()`` (any source with that method:
a numpy ``Generator``, or ``kazetts.native.Rng``, the splitmix64 stream both engines use)
and inverts the CDF, so a given seed gives the same tokens run to run. The native engine's
copy of these rules (native/src/stages/sampling.cpp, cp_sampling.h) is pinned to this module by
tests/test_native_engine.py. It cannot reproduce ``torch.multinomial``'s random stream bit
for bit, so sampled output matches the reference only in distribution; bit-exact comparisons
are done in greedy mode.

A request's options, their defaults and their checks are kazetts.request's (``Request``);
``talker_config`` and ``code_predictor_config`` turn them into each sampler's ``SamplerConfig``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Sequence

import numpy as np

from kazetts.errors import KazettsError

from kazetts.request import MIN_FRAMES, REPETITION_PENALTY, TEMPERATURE, TOP_K, TOP_P, Request

NEG_INF = np.float32(-np.inf)
NAN_LOGITS = "the talker's logits hold NaN: the model's weights are damaged"  # as native/src/stages/sampling.h


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


def talker_suppress_tokens(vocab_size: int, eos_token_id: int, special_count: int = 1024) -> list[int]:
    """The reference's ``suppress_tokens``: the last ``special_count`` ids of the talker vocabulary
    (its control tokens) except EOS. ``vocab_size``/``eos_token_id`` come from the model config."""
    return [i for i in range(vocab_size - special_count, vocab_size) if i != eos_token_id]


# --------------------------------------------------------------------------- processors


def apply_repetition_penalty(scores: np.ndarray, history: Iterable[int], penalty: float) -> np.ndarray:
    """HF ``RepetitionPenaltyLogitsProcessor`` on one row (in place on ``scores``)."""
    if penalty is None or penalty == 1.0:
        return scores
    ids = np.unique(np.asarray(list(history), dtype=np.int64))
    if ids.size:
        p = np.float32(penalty)
        picked = scores[ids]
        scores[ids] = np.where(picked < 0, picked * p, picked / p)
    return scores


def apply_temperature(scores: np.ndarray, temperature: float | None) -> np.ndarray:
    if temperature is None or temperature == 1.0:
        return scores
    return scores / np.float32(temperature)


def apply_top_k(scores: np.ndarray, top_k: int | None, min_tokens_to_keep: int = 1) -> np.ndarray:
    """HF ``TopKLogitsWarper``: everything strictly below the k-th largest value becomes -inf
    (ties with the k-th value survive)."""
    if top_k is None or top_k == 0:
        return scores
    k = min(max(int(top_k), min_tokens_to_keep), scores.shape[-1])
    kth = np.partition(scores, scores.shape[-1] - k)[scores.shape[-1] - k]
    return np.where(scores < kth, NEG_INF, scores)


def _softmax32(scores: np.ndarray) -> np.ndarray:
    shifted = scores - scores.max()
    e = np.exp(shifted, dtype=np.float32)
    return (e / e.sum(dtype=np.float32)).astype(np.float32)


def apply_top_p(scores: np.ndarray, top_p: float | None, min_tokens_to_keep: int = 1) -> np.ndarray:
    """HF ``TopPLogitsWarper`` (only built for ``top_p < 1.0``): sort ascending, drop the tokens
    whose cumulative probability is <= 1 - top_p, always keep the ``min_tokens_to_keep`` largest.
    torch's cumsum accumulates float32 in double on CPU; so does this. The order among exactly
    tied logits (torch.sort is not stable) and softmax rounding can differ at the boundary."""
    if top_p is None or top_p >= 1.0:
        return scores
    order = np.argsort(scores, kind="stable")
    sorted_scores = scores[order]
    cumulative = np.cumsum(_softmax32(sorted_scores).astype(np.float64)).astype(np.float32)
    remove_sorted = cumulative <= np.float32(1 - top_p)
    remove_sorted[-min_tokens_to_keep:] = False
    remove = np.empty_like(remove_sorted)
    remove[order] = remove_sorted
    return np.where(remove, NEG_INF, scores)


def warp(scores: np.ndarray, config: SamplerConfig) -> np.ndarray:
    """The sampling-only warpers, in HF's order: temperature, top-k, top-p."""
    if config.greedy:
        return scores
    scores = apply_temperature(scores, config.temperature)
    scores = apply_top_k(scores, config.top_k)
    return apply_top_p(scores, config.top_p)


def pick(scores: np.ndarray, greedy: bool, rng=None) -> int:
    """argmax (first index on ties, as torch on CPU) or one multinomial draw from softmax(scores).
    Ids whose score is -inf have probability exactly 0 and can never be drawn."""
    if greedy:
        return int(np.argmax(scores))
    if rng is None:
        raise ValueError("sampling needs a random source (np.random.default_rng(seed) or native.Rng(seed))")
    finite = np.isfinite(scores)
    if not finite.any():
        raise ValueError("every logit is -inf: nothing can be sampled")
    x = scores.astype(np.float64)
    weights = np.where(finite, np.exp(x - x[finite].max()), 0.0)
    cdf = np.cumsum(weights)
    u = rng.random() * cdf[-1]
    index = int(np.searchsorted(cdf, u, side="right"))
    if index >= len(cdf) or weights[index] == 0.0:  # u rounded onto the upper end
        index = int(np.flatnonzero(weights)[-1])
    return index


def margin(scores: np.ndarray) -> float:
    """Top-1 minus top-2 of a processed row (how close an argmax was to flipping)."""
    top = np.sort(scores)[-2:]
    return float(top[1] - top[0])


# --------------------------------------------------------------------------- samplers


class TalkerSampler:
    """Codebook-0 sampler of the talker. Keeps the CB0 ids generated so far (what HF's
    ``input_ids`` hold during ``talker.generate``) and applies, per step: repetition penalty,
    EOS ban for the first ``min_new_tokens`` steps, suppressed ids, then (sampling only)
    temperature, top-k, top-p."""

    def __init__(self, config: SamplerConfig, eos_token_id: int, suppress_tokens: Sequence[int] = ()):
        self.config = config
        self.eos_token_id = int(eos_token_id)
        self.suppress_tokens = np.asarray(sorted(set(int(i) for i in suppress_tokens)), dtype=np.int64)
        self.history: list[int] = []

    @classmethod
    def for_talker(
        cls,
        vocab_size: int,
        eos_token_id: int,
        config: SamplerConfig | None = None,
        special_count: int = 1024,
        **overrides,
    ) -> "TalkerSampler":
        """As the reference configures it; ids come from the model (config.json / GGUF)."""
        config = replace(config or SamplerConfig(), **overrides)
        return cls(config, eos_token_id, talker_suppress_tokens(vocab_size, eos_token_id, special_count))

    @property
    def step(self) -> int:
        """Number of CB0 ids generated so far."""
        return len(self.history)

    def reset(self) -> None:
        self.history = []

    def process(self, logits: np.ndarray) -> np.ndarray:
        """Raw codec-head logits [vocab] -> processed float32 scores (no state change)."""
        scores = np.array(logits, dtype=np.float32, copy=True).reshape(-1)
        scores = apply_repetition_penalty(scores, self.history, self.config.repetition_penalty)
        if self.config.min_new_tokens and self.step < self.config.min_new_tokens:
            scores[self.eos_token_id] = NEG_INF
        if self.suppress_tokens.size:
            scores[self.suppress_tokens] = NEG_INF
        return warp(scores, self.config)

    def choose(self, logits: np.ndarray, rng=None) -> int:
        """Raw logits -> the next CB0 id; the id is appended to the history. KazettsError on NaN
        logits (argmax and the draw would pick an id from them), as the native sampler."""
        if np.isnan(logits).any():
            raise KazettsError(NAN_LOGITS)
        token = pick(self.process(logits), self.config.greedy, rng)
        self.history.append(token)
        return token

    def is_eos(self, token: int) -> bool:
        return int(token) == self.eos_token_id


class CodePredictorSampler:
    """Sampler of the code predictor (CB1..15): no penalty, no minimum length, no suppressed
    ids; temperature, top-k, top-p when sampling, argmax when greedy. Stateless."""

    def __init__(self, config: SamplerConfig | None = None):
        self.config = config or SamplerConfig.code_predictor()

    def process(self, logits: np.ndarray) -> np.ndarray:
        scores = np.array(logits, dtype=np.float32, copy=True).reshape(-1)
        scores = apply_repetition_penalty(scores, (), self.config.repetition_penalty)
        return warp(scores, self.config)

    def choose(self, logits: np.ndarray, rng=None) -> int:
        return pick(self.process(logits), self.config.greedy, rng)
