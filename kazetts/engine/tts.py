"""The synthesis engine: text -> talker -> code predictor -> codec, frame by frame.

    tts = kazetts.TTS(talker="...-talker-q8_0.gguf", mmproj="...-mmproj-q8_0.gguf", threads=2)
    result = tts.synthesize("Bonjour !", speaker="vivian", language="french")
    for chunk in tts.stream("Bonjour !", speaker="vivian", language="french"): ...

Every request is checked (text, speaker, language, instruct, speaker embedding, context size)
and all its prompts are built before any compute. Long text is split into pieces (whole
sentences, packed) said one after the other and joined with a short crossfade; each piece gets
a frame budget from its length so a model that never says end-of-speech stops with a warning.
`synthesize` is `stream` collected, so the two give the same samples.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from kazetts.stages.code_predictor import CodePredictor
from kazetts.stages.codec import CodecDecoder
from kazetts.stages.codec_encoder import CodecEncoder
from kazetts.stages.prompt import Prompt, build_icl_prompt, build_prompt, chat_text, instruct_text, ref_chat_text
from kazetts.stages.sampling import SamplerConfig, TalkerSampler
from kazetts.stages.talker import Talker
from kazetts.engine.talker_loop import NativeFrames, TalkerTrace, talker_frames
from kazetts.engine.text_split import split_text

FRAME_SECONDS = 0.08
CROSSFADE_SAMPLES = 240  # 10 ms at 24 kHz between pieces of a long text
PIECE_CHARS = 300  # pieces of long text, in characters (a text that fits is said in one generation)
BUDGET_BASE, BUDGET_PER_TOKEN = 24, 8  # frame budget of a piece: generous for any real speech rate


def frame_budget(n_text_tokens: int) -> int:
    """Frames a piece of text may take before the runaway guard stops it."""
    return BUDGET_BASE + BUDGET_PER_TOKEN * n_text_tokens


@dataclass
class AudioChunk:
    audio: np.ndarray  # float32 PCM
    piece: int  # index of the text piece it belongs to
    frames: int  # frames decoded so far in the whole request


@dataclass
class Result:
    audio: np.ndarray
    sample_rate: int
    codes: np.ndarray  # int32 [frames, 16]
    timings: dict = field(default_factory=dict)
    stopped_by: list[str] = field(default_factory=list)  # per piece: "eos" or "max_frames"


class TTS:
    """A loaded model: talker (llama.cpp), code predictor and codec decoder (libkazetts)."""

    def __init__(self, talker: str, mmproj: str, threads: int = 2, codec_weights: str = "f16",
                 n_ctx: int = 2048):
        self.talker = Talker(talker, threads=threads, n_ctx=n_ctx)
        self.code_predictor = CodePredictor(mmproj, threads=threads)
        self.codec = CodecDecoder(mmproj, threads=threads, weights=codec_weights)
        self.voices = self.talker.file.voices
        self.sample_rate = self.codec.sample_rate
        self.mmproj = mmproj
        self.threads = threads
        self._codec_encoder: CodecEncoder | None = None

    # -- voice cloning building blocks (Base models) -------------------------------------------
    @property
    def codec_encoder(self) -> CodecEncoder:
        """The codec encoder (reference audio -> codes), loaded on first use: only Base mmproj files
        made by `kazetts convert` hold it (llama.cpp-made ones give x-vector cloning only)."""
        if self._codec_encoder is None:
            self._codec_encoder = CodecEncoder(self.mmproj, threads=self.threads)
        return self._codec_encoder

    def reference_frames(self, ref_codes: np.ndarray) -> np.ndarray:
        """Talker input rows [T, hidden] of reference codes [T, 16] (ICL prompt): per frame the sum
        of its 16 code embeddings, as for every generated frame."""
        codes = np.asarray(ref_codes)
        if codes.ndim != 2 or codes.shape[1] != self.codec.n_codebooks or len(codes) == 0:
            raise ValueError(f"reference codes must be [frames >= 1, {self.codec.n_codebooks}], got shape {codes.shape}")
        return np.stack([self.code_predictor.embed_codes(row) for row in codes])

    @property
    def speakers(self) -> list[str]:
        return sorted(self.voices.speakers)

    @property
    def languages(self) -> list[str]:
        return self.voices.spoken_languages

    @property
    def model_type(self) -> str:
        return self.voices.model_type

    # -- requests -------------------------------------------------------------------------------
    def _prompts(self, text: str, speaker, language, instruct, speaker_embedding, text_streaming,
                 max_frames, ref_codes=None, ref_text=None) -> list[tuple[Prompt, int]]:
        if not text or not text.strip():
            raise ValueError("empty text: there is nothing to say")
        instruct_ids = self.talker.tokenize(instruct_text(instruct)) if instruct else None
        icl = ref_codes is not None or ref_text is not None
        if icl:
            if ref_codes is None or not ref_text or not ref_text.strip():
                raise ValueError("ICL voice cloning needs both ref_codes and ref_text (the reference's transcript)")
            if speaker or instruct:
                raise ValueError("ICL voice cloning takes neither a speaker name nor an instruct")
            ref_ids, ref_frames = self.talker.tokenize(ref_chat_text(ref_text)), self.reference_frames(ref_codes)
        prompts = []
        for piece in split_text(text, PIECE_CHARS):
            if not piece.strip():
                continue
            ids = self.talker.tokenize(chat_text(piece))
            if icl:
                prompt = build_icl_prompt(self.talker.file, self.voices, ids, ref_ids, ref_frames, speaker_embedding,
                                          language=language, text_streaming=text_streaming)
            else:
                prompt = build_prompt(self.talker.file, self.voices, ids, language=language, speaker=speaker,
                                      instruct_ids=instruct_ids, speaker_embedding=speaker_embedding,
                                      text_streaming=text_streaming)
            budget = max_frames if max_frames is not None else frame_budget(len(ids))
            if len(prompt.prefill) + budget > self.talker.n_ctx:
                budget = self.talker.n_ctx - len(prompt.prefill)
                if budget < 1:
                    raise ValueError(f"text too long for the talker context of {self.talker.n_ctx}")
            prompts.append((prompt, budget))
        return prompts

    def stream(self, text: str, speaker: str | None = None, language: str = "auto", instruct: str | None = None,
               speaker_embedding: np.ndarray | None = None, text_streaming: bool = True, greedy: bool = False,
               seed: int | None = None, max_frames: int | None = None, chunk_frames: int = 4,
               timings: dict | None = None, codes_out: list | None = None,
               stopped_by: list | None = None, ref_codes: np.ndarray | None = None,
               ref_text: str | None = None) -> Iterator[AudioChunk]:
        """Yields audio as frames are decoded: a piece's first frame alone (the first audio comes
        as early as it can), then every `chunk_frames` frames (the codec runs faster on several).

        ICL voice cloning (Base): `ref_codes` [T, 16] (`codec_encoder.encode` of the reference at
        24 kHz), `ref_text` (its transcript) and `speaker_embedding` (its x-vector); the codec
        decodes every piece after the reference frames (`prime_codec`), whose audio is dropped."""
        if chunk_frames < 1:
            raise ValueError(f"chunk_frames must be >= 1, got {chunk_frames}")
        prompts = self._prompts(text, speaker, language, instruct, speaker_embedding, text_streaming, max_frames,
                                ref_codes, ref_text)
        timings = timings if timings is not None else {}
        rng = None if greedy else np.random.default_rng(seed)
        sampler = TalkerSampler.for_talker(self.talker.file.codec_vocab_size, self.voices.codec_eos,
                                           SamplerConfig(greedy=greedy))
        predictor = NativeFrames(self.code_predictor, greedy=greedy, rng=rng)
        start, total_frames, joiner = time.perf_counter(), 0, _Joiner(CROSSFADE_SAMPLES)
        for index, (prompt, budget) in enumerate(prompts):
            last_piece = index + 1 == len(prompts)
            if ref_codes is None:
                self.codec.reset()
            else:
                clock = time.perf_counter()
                prime_codec(self.codec, ref_codes)
                timings["codec_prime"] = timings.get("codec_prime", 0.0) + time.perf_counter() - clock
            trace = TalkerTrace(record=False)
            pending: list[np.ndarray] = []
            frames = talker_frames(self.talker, prompt, sampler, predictor, budget, rng, trace, timings)
            for codes in _batched(frames, 1, chunk_frames):
                clock = time.perf_counter()
                audio = self.codec.stream(np.stack(codes))
                timings["codec"] = timings.get("codec", 0.0) + time.perf_counter() - clock
                total_frames += len(codes)
                pending.extend(codes)
                if "first_chunk" not in timings:
                    timings["first_chunk"] = time.perf_counter() - start
                yield AudioChunk(joiner.push(audio, last_piece), index, total_frames)
            joiner.end_piece()
            if trace.stopped_by != "eos" and max_frames is None:
                warnings.warn(f"piece {index + 1}/{len(prompts)} reached its budget of {budget} frames "
                              "without end-of-speech; it was cut there", RuntimeWarning, stacklevel=2)
            if codes_out is not None:
                codes_out.extend(pending)
            if stopped_by is not None:
                stopped_by.append(trace.stopped_by)
        timings["frames"] = total_frames
        timings["wall"] = time.perf_counter() - start

    def synthesize(self, text: str, **options) -> Result:
        """The whole request at once; same arguments as `stream`."""
        timings: dict = {}
        codes: list = []
        stopped: list = []
        chunks = [c.audio for c in self.stream(text, timings=timings, codes_out=codes, stopped_by=stopped, **options)]
        audio = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
        frames = max(timings.get("frames", 0), 1)
        summary = {
            "frames": timings.get("frames", 0),
            "audio_seconds": len(audio) / self.sample_rate,
            "talker_ms_per_frame": 1000 * timings.get("talker", 0.0) / frames,
            "code_predictor_ms_per_frame": 1000 * timings.get("code_predictor", 0.0) / frames,
            "codec_ms_per_frame": 1000 * timings.get("codec", 0.0) / frames,
            "first_chunk_seconds": timings.get("first_chunk"),
            "wall_seconds": timings.get("wall", 0.0),
        }
        summary["real_time_factor"] = summary["wall_seconds"] / max(summary["audio_seconds"], 1e-9)
        return Result(audio.astype(np.float32), self.sample_rate,
                      np.stack(codes).astype(np.int32) if codes else np.zeros((0, 16), np.int32), summary, stopped)


def prime_codec(codec: CodecDecoder, ref_codes: np.ndarray) -> np.ndarray:
    """Streams the reference codes into a reset codec decoder and returns their samples (which
    ICL output drops): the frames pushed next decode with the reference as left context, as the
    reference's decode of [ref codes; generated codes] does (the streaming decoder equals a full
    decode), so their samples are that decode with the first ref_frames * 1920 samples cut."""
    codec.reset()
    return codec.stream(ref_codes)


def reference_cut(ref_frames: int, total_frames: int, n_samples: int) -> int:
    """Where generate_voice_clone cuts its decode of [ref; generated] (n_samples samples):
    int(ref_frames / total_frames * n_samples) in float64, which is ref_frames * 1920 or, for
    some lengths (e.g. 15 of 22 frames), one sample less through rounding: the reference then
    keeps the reference part's last sample. kazetts cuts at exactly ref_frames * 1920."""
    return int(ref_frames / max(total_frames, 1) * n_samples)


def _batched(frames: Iterator[np.ndarray], first: int, size: int) -> Iterator[list[np.ndarray]]:
    """Frames in lists of `first`, then of `size` (the last may be shorter)."""
    batch: list[np.ndarray] = []
    want = first
    for codes in frames:
        batch.append(codes)
        if len(batch) == want:
            yield batch
            batch, want = [], size
    if batch:
        yield batch


class _Joiner:
    """Emits the pieces' audio in order, crossfading each piece's last samples into the next.

    The last `fade` samples of a piece are held back until the next piece starts, then blended
    into its first samples; the last piece is emitted as it comes."""

    def __init__(self, fade: int):
        self.fade = fade
        self.held = np.zeros(0, np.float32)
        self.tail: np.ndarray | None = None

    def push(self, audio: np.ndarray, last_piece: bool) -> np.ndarray:
        if self.tail is not None and len(audio):
            n = min(len(self.tail), len(audio))
            ramp = np.linspace(0.0, 1.0, n, endpoint=False, dtype=np.float32)
            audio = audio.copy()
            audio[:n] = self.tail[:n] * (1 - ramp) + audio[:n] * ramp
            self.tail = None
        if last_piece:
            return audio
        audio = np.concatenate([self.held, audio])
        self.held = audio[-self.fade:]
        return audio[:-self.fade]

    def end_piece(self) -> None:
        if len(self.held):
            self.tail, self.held = self.held, np.zeros(0, np.float32)
