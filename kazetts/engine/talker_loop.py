"""The frame loop around the talker: prefill, then per frame CB0 -> codebooks 1..15 -> next input.

The codebooks after CB0 and the summed embedding of a frame's 16 codes (the talker's next input,
before the text row) come from a `FramePredictor`: the native code predictor in production, or
`TeacherForcing` (codes taken from a golden dump) to test the talker loop on its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol

import numpy as np

from kazetts.stages.prompt import Prompt
from kazetts.stages.sampling import SamplerConfig, TalkerSampler
from kazetts.stages.talker import Talker


class FramePredictor(Protocol):
    def predict(self, hidden: np.ndarray, cb0: int, frame: int) -> tuple[np.ndarray, np.ndarray]:
        """(codes[16] with CB0 first, summed embedding [hidden] of the 16 codes)."""
        ...


@dataclass
class TalkerTrace:
    """What one utterance went through: codes per frame, and per talker call its hidden state
    and logits (those only when `record`)."""

    codes: list[np.ndarray] = field(default_factory=list)
    hidden: list[np.ndarray] = field(default_factory=list)
    logits: list[np.ndarray] = field(default_factory=list)
    stopped_by: str = "max_frames"
    record: bool = True

    def add_call(self, hidden: np.ndarray, logits: np.ndarray) -> None:
        if self.record:
            self.hidden.append(hidden)
            self.logits.append(logits)

    def add_frame(self, codes: np.ndarray) -> None:
        self.codes.append(codes)


def talker_frames(
    talker: Talker,
    prompt: Prompt,
    sampler: TalkerSampler,
    predictor: FramePredictor,
    max_frames: int,
    rng: np.random.Generator | None = None,
    trace: TalkerTrace | None = None,
    timings: dict[str, float] | None = None,
) -> Iterator[np.ndarray]:
    """Yields the 16 codes of each frame until the talker picks end-of-speech or `max_frames`
    frames exist. The frame whose CB0 is end-of-speech is not a frame.

    `trace` (optional) records codes, hidden states and logits; `timings` (optional) accumulates
    seconds under "talker" (prefill included), "prefill" and "code_predictor". Raises ValueError
    before any compute when the prompt and the frames cannot fit the talker's context."""
    needed = len(prompt.prefill) + max_frames
    if needed > talker.n_ctx:
        raise ValueError(
            f"text too long: {len(prompt.prefill)} prompt positions + {max_frames} frames exceed "
            f"the talker context of {talker.n_ctx}; split the text"
        )
    trace = trace if trace is not None else TalkerTrace(record=False)
    timings = timings if timings is not None else {}
    talker.reset(needed)
    sampler.reset()
    clock = time.perf_counter()
    hidden, logits = talker.step(prompt.prefill)
    timings["prefill"] = timings.get("prefill", 0.0) + time.perf_counter() - clock
    for frame in range(max_frames + 1):
        now = time.perf_counter()
        timings["talker"] = timings.get("talker", 0.0) + now - clock
        trace.add_call(hidden, logits)
        cb0 = sampler.choose(logits, rng)
        if sampler.is_eos(cb0):
            trace.stopped_by = "eos"
            return
        if frame == max_frames:
            return
        codes, embedding = predictor.predict(hidden, cb0, frame)
        clock = time.perf_counter()
        timings["code_predictor"] = timings.get("code_predictor", 0.0) + clock - now
        trace.add_frame(codes)
        yield codes
        clock = time.perf_counter()
        hidden, logits = talker.step(embedding + prompt.text_row(frame))


def run_talker(
    talker: Talker,
    prompt: Prompt,
    sampler: TalkerSampler,
    predictor: FramePredictor,
    max_frames: int,
    rng: np.random.Generator | None = None,
) -> TalkerTrace:
    """The whole utterance at once, recording every talker call (for validation)."""
    trace = TalkerTrace()
    for _ in talker_frames(talker, prompt, sampler, predictor, max_frames, rng, trace):
        pass
    return trace


class NativeFrames:
    """Codebooks 1..15 from the native code predictor, sampled as the reference samples them
    (`config`: SamplerConfig.code_predictor, the request's subtalker_* options)."""

    def __init__(self, code_predictor, config: SamplerConfig, rng: np.random.Generator | None = None):
        self.code_predictor = code_predictor
        self.options = {
            "greedy": config.greedy,
            "temperature": config.temperature,
            "top_k": config.top_k,
            "top_p": config.top_p,
        }
        self.rng = rng

    def predict(self, hidden: np.ndarray, cb0: int, frame: int) -> tuple[np.ndarray, np.ndarray]:
        rest, embedding = self.code_predictor.predict(hidden, cb0, rng=self.rng, **self.options)
        return np.concatenate([[cb0], rest]).astype(np.int32), embedding


class TeacherForcing:
    """Codebooks 1..15 from a golden; the summed embedding from the model (`embed(codes16)`,
    e.g. the native code predictor's embed_codes, which reads its tables in any weight type)."""

    def __init__(self, codes: np.ndarray, embed: Callable[[np.ndarray], np.ndarray]):
        self.codes = np.asarray(codes)
        self.embed = embed

    def predict(self, hidden: np.ndarray, cb0: int, frame: int) -> tuple[np.ndarray, np.ndarray]:
        codes = self.codes[frame].astype(np.int32)
        codes[0] = cb0
        return codes, np.asarray(self.embed(codes), dtype=np.float32)
