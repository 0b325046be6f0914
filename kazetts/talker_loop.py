"""The frame loop around the talker: prefill, then per frame CB0 -> codebooks 1..15 -> next input.

The codebooks after CB0 and the summed embedding of a frame's 16 codes (the talker's next input,
before the text row) come from a `FramePredictor`: the native code predictor in production, or
`TeacherForcing` (codes taken from a golden dump) to test the talker loop on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .prompt import Prompt
from .sampling import TalkerSampler
from .talker import Talker


class FramePredictor(Protocol):
    def predict(self, hidden: np.ndarray, cb0: int, frame: int) -> tuple[np.ndarray, np.ndarray]:
        """(codes[16] with CB0 first, summed embedding [hidden] of the 16 codes)."""
        ...


@dataclass
class TalkerTrace:
    """What one utterance went through: codes per frame, and per talker call its hidden state and logits."""

    codes: list[np.ndarray] = field(default_factory=list)
    hidden: list[np.ndarray] = field(default_factory=list)
    logits: list[np.ndarray] = field(default_factory=list)
    stopped_by: str = "max_frames"


def run_talker(talker: Talker, prompt: Prompt, sampler: TalkerSampler, predictor: FramePredictor,
               max_frames: int, rng: np.random.Generator | None = None) -> TalkerTrace:
    """Generates until the talker picks end-of-speech or `max_frames` frames exist.

    The frame whose CB0 is end-of-speech is not a frame. Raises ValueError before any compute
    when the prompt and the frames cannot fit the talker's context."""
    needed = len(prompt.prefill) + max_frames
    if needed > talker.n_ctx:
        raise ValueError(f"text too long: {len(prompt.prefill)} prompt positions + {max_frames} frames exceed "
                         f"the talker context of {talker.n_ctx}; split the text")
    talker.reset()
    sampler.reset()
    trace = TalkerTrace()
    hidden, logits = talker.step(prompt.prefill)
    for frame in range(max_frames + 1):
        trace.hidden.append(hidden)
        trace.logits.append(logits)
        cb0 = sampler.choose(logits, rng)
        if sampler.is_eos(cb0):
            trace.stopped_by = "eos"
            break
        if frame == max_frames:
            break
        codes, embedding = predictor.predict(hidden, cb0, frame)
        trace.codes.append(codes)
        hidden, logits = talker.step(embedding + prompt.text_row(frame))
    return trace


class TeacherForcing:
    """Codebooks 1..15 from a golden; the summed embedding from the model's tables."""

    def __init__(self, codes: np.ndarray, codec_rows, code_predictor_tables: np.ndarray):
        self.codes = np.asarray(codes)
        self.codec_rows = codec_rows  # C(ids): the talker's codec embedding
        self.tables = code_predictor_tables  # [15, 2048, hidden]

    def predict(self, hidden: np.ndarray, cb0: int, frame: int) -> tuple[np.ndarray, np.ndarray]:
        codes = self.codes[frame].copy()
        codes[0] = cb0
        embedding = self.codec_rows([cb0])[0] + sum(self.tables[g, c] for g, c in enumerate(codes[1:]))
        return codes, embedding.astype(np.float32)
