"""The synthesis engine: text -> talker -> code predictor -> codec, frame by frame.

    tts = kazetts.TTS(talker="...-talker-q8_0.gguf", mmproj="...-mmproj-q8_0.gguf", threads=2)
    result = tts.synthesize("Bonjour !", speaker="vivian", language="french")
    for chunk in tts.stream("Bonjour !", speaker="vivian", language="french"): ...
    voice = tts.enroll("me.wav")                                     # Base models: voice cloning
    result = tts.synthesize("Bonjour !", voice=voice)                # or ref_audio="me.wav"

Every request is checked (text, speaker, language, instruct, speaker embedding, context size)
and all its prompts are built before any compute. Long text is split into pieces (whole
sentences, packed) said one after the other and joined with a short crossfade; each piece gets
a frame budget from its length so a model that never says end-of-speech stops with a warning.
`synthesize` is `stream` collected, so the two give the same samples. Sampling draws from
`native.Rng(seed)` (libkazetts' splitmix64), the stream the native engine (kazetts/tts.h)
draws from, so both engines give the same codes for one seed.
"""

from __future__ import annotations

import ctypes
import functools
import os
import pathlib
import threading
import time
import warnings
from dataclasses import dataclass, field, replace
from typing import AsyncIterator, Callable, Iterator

import numpy as np

from kazetts import native
from kazetts.errors import KazettsError, ModelFileError
from kazetts.request import MAX_BATCH, MAX_THREADS, Request, check_int, check_text_length, make_request
from kazetts.gguf import names as N
from kazetts.gguf.header import GGUFHeader
from kazetts.stages.code_predictor import CodePredictor
from kazetts.stages.codec import CodecDecoder
from kazetts.stages.codec_encoder import CodecEncoder
from kazetts.stages.prompt import (
    ROLE_TOKENS,
    TAIL_TOKENS,
    Prompt,
    build_icl_prompt,
    build_prompt,
    chat_text,
    instruct_text,
    ref_chat_text,
)
from kazetts.stages.sampling import TalkerSampler, code_predictor_config, talker_config
from kazetts.stages.speaker_encoder import SpeakerEncoder, fingerprint
from kazetts.stages.talker import Talker
from kazetts.engine.batch import Batch, LoneSeat, Seat, SeatPool
from kazetts.engine.codec_pipeline import CodecPipeline
from kazetts.engine.model_files import check_model_files, find_model_files
from kazetts.engine.native_tts import auto_codec_threads
from kazetts.engine.talker_loop import FramePredictor, TalkerTrace, talker_frames
from kazetts.engine.text_split import split_text
from kazetts.engine.text_stream import ArrivingPrompt, TextPieces, run_with_async_chunks
from kazetts.engine.time_stretch import stretch_chunks
from kazetts.engine.voice import ModelFingerprint, Voice, enroll

FRAME_SECONDS = 0.08
MIN_CONTEXT = 16  # talker positions: the native engine's floor too (kz_tts_load)
PIECE_CHARS = 300  # pieces of long text, in characters (a text that fits is said in one generation)
NO_CODEC_ENCODER = (
    "this mmproj has no codec encoder (llama.cpp's converter does not write it; `kazetts convert` "
    "does): ICL cloning needs the reference's codec codes; use xvector_only=True"
)
# the lists the engine used to fill in, and where their figures are now
OLD_FIGURES = {
    "timings": "read the stream's timings (tts.stream(...).timings) or synthesize's Result.timings",
    "codes_out": "each AudioChunk carries its codes (chunk.codes); synthesize's Result.codes",
    "stopped_by": "read the stream's stopped_by (tts.stream(...).stopped_by) or synthesize's Result.stopped_by",
}
# what text streamed in cannot take: voice cloning but by an x-vector, the non-streaming text mode
STREAMED_TEXT_TAKES_NO = (
    "voice",
    "ref_audio",
    "ref_text",
    "xvector_only",
    "ref_codes",
    "ref_silence",
    "text_streaming",
)


_P, _float_p = ctypes.c_void_p, ctypes.POINTER(ctypes.c_float)
_SIGNATURES = {  # the engine's rules of libkazetts' rules.h
    "kz_frame_budget": (ctypes.c_int32, [ctypes.c_int32] * 4),
    "kz_joiner_new": (_P, []),
    "kz_joiner_free": (None, [_P]),
    "kz_joiner_push": (ctypes.c_int32, [_P, _float_p, ctypes.c_int32, ctypes.c_int32, _float_p]),
    "kz_joiner_end_piece": (None, [_P]),
    "kz_joiner_flush": (ctypes.c_int32, [_P, _float_p, ctypes.c_int32]),
}


def frame_budget(n_text_tokens: int, max_frames: int | None, n_prefill: int, n_ctx: int) -> int:
    """Frames a piece may take (kz_frame_budget): max_frames, else the runaway guard's budget
    from its chat-wrapped text ids, clipped to the room its prompt leaves in the context; 0
    when it leaves none."""
    max_frames = min(max_frames or 0, n_ctx)  # (as an int32: no budget exceeds the context anyway)
    return max(0, native.bind(_SIGNATURES).kz_frame_budget(n_text_tokens, max_frames, n_prefill, n_ctx))


@dataclass
class AudioChunk:
    audio: np.ndarray  # float32 PCM
    piece: int  # index of the text piece it belongs to
    frames: int  # frames decoded so far in the whole request
    codes: np.ndarray = field(
        default_factory=lambda: np.zeros((0, 16), np.int32)
    )  # int32 [n, 16]: frames decoded since the last chunk


@dataclass
class Result:
    audio: np.ndarray
    sample_rate: int
    codes: np.ndarray  # int32 [frames, 16]
    timings: dict = field(default_factory=dict)
    stopped_by: list[str] = field(default_factory=list)  # per piece: "eos" or "max_frames"


class Stream:
    """What `TTS.stream` and `TTS.stream_text` return: an iterator of AudioChunk (each with the
    codes of its frames), and the request's figures as it runs: `stopped_by`, per piece said,
    "eos" or "max_frames" (cut at its frame budget); `timings`, seconds per stage ("talker",
    "code_predictor", "codec"), "first_chunk", and once the stream has ended "frames" and "wall".
    `close()` ends the request between two chunks."""

    def __init__(self, chunks: Iterator[AudioChunk], timings: dict, stopped_by: list):
        self._chunks, self.timings, self.stopped_by = chunks, timings, stopped_by

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> AudioChunk:
        return next(self._chunks)

    def close(self) -> None:
        self._chunks.close()


class AsyncStream:
    """`TTS.stream_text` of an async iterator: Stream's figures, its chunks as an async iterator."""

    def __init__(self, chunks: AsyncIterator[AudioChunk], timings: dict, stopped_by: list):
        self._chunks, self.timings, self.stopped_by = chunks, timings, stopped_by

    def __aiter__(self) -> "AsyncStream":
        return self

    async def __anext__(self) -> AudioChunk:
        return await self._chunks.__anext__()

    async def aclose(self) -> None:
        await self._chunks.aclose()


def on_a_thread_of_its_own(fn: Callable[[], None]) -> None:
    """Runs fn on a thread that ends with it (what it raises is raised here). A load computes
    (the talker's checks): ggml's OpenMP team would outlive it on the caller's thread, and every
    request said from another thread then ran ~1.5x slower (0.6B Q8_0, 2 threads: 90 vs 59 ms a
    frame). kz_tts_load loads on a thread of its own for the same reason."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as error:  # noqa: BLE001 - handed to the caller
            raised.append(error)

    thread = threading.Thread(target=run, name="kazetts-load")
    thread.start()
    thread.join()
    if raised:
        raise raised[0]


def _model_paths(talker, mmproj) -> tuple[str, str]:
    """TTS(model_dir) or TTS(talker, mmproj): the two files as strings."""
    if mmproj is not None:
        return str(talker), str(mmproj)
    want = "a directory with one *-talker-*.gguf and one *-mmproj-*.gguf, or the talker and the mmproj files"
    if not pathlib.Path(talker).exists():
        raise FileNotFoundError(f"model directory {talker} not found: give {want}")
    if not pathlib.Path(talker).is_dir():
        raise ValueError(f"{talker} is not a model directory: give {want}")
    return tuple(str(f) for f in find_model_files(pathlib.Path(talker)))


class TTS:
    """A loaded model: talker (llama.cpp), code predictor and codec decoder (libkazetts),
    from a model directory (`TTS("models/0.6b")`) or its two files (`TTS(talker, mmproj)`).

    `max_batch` requests at once (default 1), each from its own thread or asyncio task: their
    talker steps and code predictor frames run together (kazetts.engine.batch), and each gets
    the samples it gets alone. One more waits for a seat, in arrival order, when fewer than
    `queue` (default 0) wait already; else BusyError (with the defaults: a second `stream` while
    one runs, from another thread or two generators interleaved). `close()` (or `with
    kazetts.TTS(...) as tts:`) frees the native memory at once; streams running meanwhile free it
    when the last one ends.

    `threads` runs the talker and the code predictor (and the codec, serial). `codec_threads`
    >= 1 gives the codec decoder that many threads of its own on a worker thread, decoding the
    frames already made while the talker and code predictor make the next ones (a frame then
    costs about max(talker + code predictor, codec) instead of their sum, given free cores);
    0 is serial; None (default) is 0 when the process has no core beyond `threads` (an
    overlapped codec would only take the talker's cycles), else the spare cores, at most
    `threads` (kz_tts_auto_codec_threads, the native engine's rule). The samples, chunks and
    their order are the same either way, in stream, synthesize and stream_text."""

    def __init__(
        self,
        talker: str | os.PathLike,
        mmproj: str | os.PathLike | None = None,
        threads: int = 2,
        codec_weights: str = "f16",
        n_ctx: int = 2048,
        codec_threads: int | None = None,
        max_batch: int = 1,
        queue: int = 0,
    ):
        talker, mmproj = _model_paths(talker, mmproj)
        threads = check_int("threads", threads, 1, MAX_THREADS)
        max_batch = check_int("max_batch", max_batch, 1, MAX_BATCH)
        queue = check_int("queue", queue, 0)
        n_ctx = check_int("n_ctx", n_ctx, MIN_CONTEXT)
        codec_threads = (
            auto_codec_threads(threads)
            if codec_threads is None
            else check_int("codec_threads", codec_threads, 0, MAX_THREADS)
        )
        self._closed = False
        self._enroll_lock = threading.Lock()  # the speaker and codec encoders: one request at a time
        self.talker = self.code_predictor = self.codec = self._speaker_encoder = self._batch = None
        self._streams: list = []

        def load() -> None:
            self.talker = Talker(talker, threads=threads, n_ctx=n_ctx, slots=max_batch)
            self.code_predictor = CodePredictor(mmproj, threads=threads)
            self.codec = CodecDecoder(mmproj, threads=codec_threads or threads, weights=codec_weights)
            self._check_files_match(mmproj)
            self._seats = SeatPool(self._make_seats(max_batch, serial_codec=codec_threads == 0), queue)

        try:
            on_a_thread_of_its_own(load)
        except BaseException:
            self._free()
            raise
        self.voices = self.talker.file.voices
        self.sample_rate = self.codec.sample_rate
        self.mmproj, self.threads, self.codec_threads = str(mmproj), threads, codec_threads
        self.max_batch, self.queue = max_batch, queue
        self.mmproj_tensors = frozenset(GGUFHeader(mmproj).tensors)  # what the mmproj holds (e.g. a codec encoder)
        self._fingerprint: ModelFingerprint | None = None
        self._codec_encoder: CodecEncoder | None = None

    def _check_files_match(self, mmproj) -> None:
        """The talker and the mmproj come from one model: one checkpoint as far as the files say
        (after the loaders, whose errors about either file are the precise ones), and their widths
        and vocabularies agree."""
        talker, cp = self.talker.file, self.code_predictor
        check_model_files(talker.path, mmproj)
        if (
            cp.n_embd_in != talker.hidden_size
            or cp.cb0_vocab != talker.codec_vocab_size
            or self.codec.n_codebooks != cp.n_codebooks + 1
        ):
            raise ModelFileError(
                f"{mmproj} does not belong to the talker {talker.path}: code predictor input "
                f"{cp.n_embd_in} and codec vocabulary {cp.cb0_vocab} vs talker hidden "
                f"{talker.hidden_size} and {talker.codec_vocab_size} codec ids"
            )

    def _make_seats(self, max_batch: int, serial_codec: bool) -> list:
        """One seat on the stages themselves, or max_batch seats in a batch (a talker slot and a
        codec stream each)."""
        if max_batch == 1:
            return [LoneSeat(self.talker, self.code_predictor, self.codec)]
        self._batch = Batch(self.talker, self.code_predictor)
        self._streams = [self.codec.new_stream() for _ in range(max_batch)]
        return [Seat(self._batch, slot, stream, serial_codec) for slot, stream in enumerate(self._streams)]

    # -- lifetime -------------------------------------------------------------------------------
    def close(self) -> None:
        """Frees the native stages now (running streams free them when the last one ends;
        requests waiting for a seat are refused)."""
        self._closed = True
        seats = getattr(self, "_seats", None)
        if seats is None or seats.close():
            self._free()

    def _free(self) -> None:
        for stage in (
            *self._streams,
            self._batch,
            self.codec,
            self.code_predictor,
            self.talker,
            self._speaker_encoder,
            getattr(self, "_codec_encoder", None),
        ):
            if stage is not None:
                stage.close()

    def __enter__(self) -> "TTS":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

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
            raise ValueError(
                f"reference codes must be [frames >= 1, {self.codec.n_codebooks}], got shape {codes.shape}"
            )
        embed = self._batch.embed_codes if self._batch else self.code_predictor.embed_codes
        return np.stack([embed(row) for row in codes])

    @property
    def speakers(self) -> list[str]:
        return sorted(self.voices.speakers)

    @property
    def languages(self) -> list[str]:
        return self.voices.spoken_languages

    @property
    def model_type(self) -> str:
        return self.voices.model_type

    # -- voice cloning (Base models) ------------------------------------------------------------
    @property
    def has_codec_encoder(self) -> bool:
        """Whether ICL cloning is possible: a Base mmproj made by `kazetts convert` holds the codec
        encoder; llama.cpp's converter never writes it (x-vector cloning only)."""
        return self.model_type == "base" and any(name.startswith(N.ENC + ".") for name in self.mmproj_tensors)

    def _require_base(self) -> None:
        if self.model_type != "base":
            raise ValueError(
                f"voice cloning needs a Base model; this is a {self.model_type} model "
                "(it speaks with speaker= or instruct=)"
            )

    @property
    def speaker_encoder(self) -> SpeakerEncoder:
        self._require_base()
        if self._speaker_encoder is None:
            self._speaker_encoder = SpeakerEncoder(self.mmproj, threads=self.threads)
        return self._speaker_encoder

    @property
    def model_fingerprint(self) -> ModelFingerprint:
        """What a voice must have been made for to be used with this model."""
        self._require_base()
        if self._fingerprint is None:
            self._fingerprint = ModelFingerprint(self.model_type, self.talker.hidden_size, fingerprint(self.mmproj))
        return self._fingerprint

    def enroll(
        self, ref_audio, ref_text: str | None = None, timings: dict | None = None, ref_silence: float = 0.0
    ) -> Voice:
        """A reusable Voice from a reference recording: a path (WAV, FLAC, OGG ...) or
        (array, sample_rate). With `ref_text` (its transcript) and a codec encoder the voice
        also holds the reference codes that ICL cloning needs. `ref_silence` (seconds, 0..2)
        appends that much silence to the reference before encoding: about 0.5 keeps ICL from
        continuing the reference's last phoneme into its output (docs/voices.md); 0, the
        default, is the reference's behaviour."""
        self._require_base()
        with self._enroll_lock:
            return enroll(
                self.speaker_encoder,
                self.model_fingerprint,
                ref_audio,
                ref_text,
                codec_encoder=self.codec_encoder if ref_text and self.has_codec_encoder else None,
                timings=timings,
                ref_silence=ref_silence,
            )

    def _clone(self, request: Request) -> tuple[np.ndarray | None, np.ndarray | None, str | None]:
        """A request's (x-vector, ICL reference codes, ICL reference text): a cloned voice's, else
        the request's own. xvector_only None: ICL when there is a reference text, else x-vector only."""
        voice, ref_audio, ref_text, ref_codes = request.voice, request.ref_audio, request.ref_text, request.ref_codes
        if request.ref_silence and ref_audio is None:
            raise ValueError("ref_silence is appended to a ref_audio (a voice keeps the one it was enrolled with)")
        if voice is None and ref_audio is None:
            if ref_codes is not None or ref_text is not None:  # ICL asked for directly
                if ref_codes is None or not ref_text or not ref_text.strip():
                    raise ValueError(
                        "ICL voice cloning needs both ref_codes and ref_text (the reference's "
                        "transcript), or a voice= or ref_audio= to clone"
                    )
                self._require_base()
                return request.xvector, ref_codes, ref_text
            if request.xvector_only is not None:
                raise ValueError("xvector_only needs a voice= or ref_audio= to clone")
            return request.xvector, None, None
        if voice is not None and ref_audio is not None:
            raise ValueError("give either a voice or a ref_audio, not both")
        if ref_codes is not None:
            raise ValueError("ref_codes come from the voice or ref_audio: give only one of them")
        if request.speaker or request.xvector is not None:
            raise ValueError("a cloned voice replaces speaker= and xvector=: give only one of them")
        self._require_base()
        if voice is None:
            voice = self.enroll(
                ref_audio, ref_text if request.xvector_only is not True else None, ref_silence=request.ref_silence
            )
        else:
            if not isinstance(voice, Voice):
                raise ValueError(
                    f"voice must be a kazetts.Voice (see TTS.enroll, Voice.load), got {type(voice).__name__}"
                )
            if ref_text is not None:
                raise ValueError("a voice carries its own ref_text: enroll it with the text instead")
            self.model_fingerprint.check(voice.model)
        icl = request.xvector_only is False or (request.xvector_only is None and bool(voice.ref_text))
        if icl:
            if not voice.ref_text:
                raise ValueError("ICL cloning (xvector_only=False) needs ref_text, the words said in the reference")
            if voice.ref_codes is None:
                raise ValueError(NO_CODEC_ENCODER)
            return voice.x_vector, voice.ref_codes, voice.ref_text
        return voice.x_vector, None, None

    # -- requests -------------------------------------------------------------------------------
    def _prompts(self, text: str, request: Request, xvector, ref_codes=None, ref_text=None) -> list[tuple[Prompt, int]]:
        """Every piece's prompt and frame budget; `xvector`, `ref_codes`, `ref_text` as _clone gives them."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        check_text_length(text)
        if not text.strip():
            raise ValueError("empty text: there is nothing to say")
        speaker, language, instruct, max_frames = (
            request.speaker,
            request.language,
            request.instruct,
            request.max_frames,
        )
        instruct_ids = self.talker.tokenize(instruct_text(instruct)) if instruct else None
        icl = ref_codes is not None  # with its ref_text and x-vector (TTS._clone checks them)
        if icl:
            ref_ids, ref_frames = self.talker.tokenize(ref_chat_text(ref_text)), self.reference_frames(ref_codes)
        prompts = []
        for piece in split_text(text, PIECE_CHARS):
            if not piece.strip():
                continue
            ids = self.talker.tokenize(chat_text(piece))
            if icl:
                prompt = build_icl_prompt(
                    self.talker.file,
                    ids,
                    ref_ids,
                    ref_frames,
                    xvector,
                    language=language,
                    speaker=speaker,
                    instruct_ids=instruct_ids,
                    text_streaming=request.text_streaming,
                )
            else:
                prompt = build_prompt(
                    self.talker.file,
                    ids,
                    language=language,
                    speaker=speaker,
                    instruct_ids=instruct_ids,
                    speaker_embedding=xvector,
                    text_streaming=request.text_streaming,
                )
            budget = frame_budget(len(ids), max_frames, len(prompt.prefill), self.talker.n_ctx)
            if budget < 1 and icl:
                raise ValueError(
                    f"the voice's reference is {len(ref_codes)} frames ({len(ref_codes) * FRAME_SECONDS:.1f} s): "
                    f"with its text and this text it leaves no room in the talker context of "
                    f"{self.talker.n_ctx}; enroll a shorter reference (3-10 s)"
                )
            if budget < 1:
                raise ValueError(f"text too long for the talker context of {self.talker.n_ctx}")
            prompts.append((prompt, budget))
        return prompts

    def stream(self, text: str, request: Request | None = None, **options) -> Stream:
        """Yields audio as frames are decoded: a piece's first frame alone (the first audio comes
        as early as it can), then every `chunk_frames` frames (the codec runs faster on several).

        `request` (a kazetts.Request; None: the defaults) says how: the voice, voice cloning,
        sampling, seed, frame limits and `speed`; keyword `options` are Request fields that
        override its own, e.g. `tts.stream(text, speaker="vivian", seed=3)`. Returns a Stream: an
        iterator of AudioChunk (each with the codes of its frames) whose `timings` and
        `stopped_by` fill in as it runs. ICL cloning decodes every piece after the reference
        frames (`prime_codec`), whose audio is dropped.

        The whole request is checked (ValueError naming the field; TypeError for an unknown
        option) when called, before any compute; once iterated, it waits for a seat or raises
        BusyError when this TTS serves max_batch requests and `queue` wait already."""
        request, timings, codes, stopped_by = self._open(request, options)
        body = functools.partial(
            self._stream, text=text, request=request, timings=timings, codes_out=codes, stopped_by=stopped_by
        )
        return Stream(self._run(body, request, codes, timings), timings, stopped_by)

    def _open(self, request: Request | None, options: dict) -> tuple[Request, dict, list, list]:
        """stream's, stream_text's and synthesize's request (warnings name their caller's caller)
        and the figures it fills in: timings, the codes of the frames delivered, stop reasons.
        The lists the engine once filled in (OLD_FIGURES) are still filled, with a DeprecationWarning."""
        figures = {name: options.pop(name) for name in OLD_FIGURES if name in options}
        for name in figures:
            warnings.warn(f"{name}= is deprecated: {OLD_FIGURES[name]}", DeprecationWarning, stacklevel=3)
        request = make_request(request, options, stacklevel=3)
        timings = figures.get("timings")
        return (
            request,
            timings if timings is not None else {},
            figures.get("codes_out") if figures.get("codes_out") is not None else [],
            figures.get("stopped_by") if figures.get("stopped_by") is not None else [],
        )

    def _run(self, body: Callable, request: Request, codes: list, timings: dict) -> Iterator[AudioChunk]:
        """A request's chunks (`body(seat)`) at its speed, each given the codes decoded since the
        chunk before (`codes`: every frame delivered so far; the time-stretch holds chunks back
        and adds a last one), in a seat of this TTS."""
        sent = 0
        for chunk in self._seated(lambda seat: stretch_chunks(body(seat), request.speed, self.sample_rate), timings):
            new = np.array(codes[sent : chunk.frames], np.int32).reshape(-1, self.codec.n_codebooks)
            sent = chunk.frames
            yield replace(chunk, codes=new)

    def _seated(self, body: Callable, timings: dict) -> Iterator[AudioChunk]:
        """Runs a request's generator `body(seat)` in a seat (waiting for one, or BusyError: see
        SeatPool), noting in `timings` the most requests it stepped with ("batch_max"); the last
        request out after a close() frees the stages."""
        seat = self._seats.take()
        try:
            seat.enter()
            yield from body(seat)
        finally:
            timings["batch_max"] = seat.batch_max
            seat.leave()
            if self._seats.give(seat):
                self._free()

    def _samplers(self, request: Request, seat) -> tuple[native.Rng | None, TalkerSampler, FramePredictor]:
        """A request's random stream (None when greedy), CB0 sampler and code predictor frames."""
        rng = None if request.greedy else native.Rng(request.seed)
        sampler = TalkerSampler.for_talker(
            self.talker.file.codec_vocab_size, self.voices.codec_eos, talker_config(request)
        )
        return rng, sampler, seat.frames(code_predictor_config(request), rng)

    def _check_open(self) -> None:
        """Between two chunks: a TTS closed during the request stops it."""
        if self._closed:
            raise KazettsError("this TTS was closed during the request")

    def _stream(
        self, seat, text, request: Request, timings: dict, codes_out: list, stopped_by: list
    ) -> Iterator[AudioChunk]:
        xvector, ref_codes, ref_text = self._clone(request)
        prompts = self._prompts(text, request, xvector, ref_codes, ref_text)
        rng, sampler, predictor = self._samplers(request, seat)
        with _Output(seat.codec, self.codec_threads > 0, timings, codes_out) as out:
            for index, (prompt, budget) in enumerate(prompts):
                last_piece = index + 1 == len(prompts)
                if ref_codes is None:  # the codec is idle between pieces
                    seat.codec.reset()
                else:
                    clock = time.perf_counter()
                    prime_codec(seat.codec, ref_codes)
                    timings["codec_prime"] = timings.get("codec_prime", 0.0) + time.perf_counter() - clock
                trace = TalkerTrace(record=False)
                out.start_piece(request.chunk_frames)
                frames = talker_frames(seat.talker, prompt, sampler, predictor, budget, rng, trace, timings)
                for codes in seat.present(frames):
                    self._check_open()
                    out.add(codes)
                    yield from out.chunks(index, last_piece)
                yield from out.end_piece(index, last_piece)
                _piece_ended(trace, f"{index + 1}/{len(prompts)}", budget, request.max_frames, stopped_by)
        timings["frames"] = out.frames
        timings["wall"] = time.perf_counter() - out.start

    def synthesize(self, text: str, request: Request | None = None, **options) -> Result:
        """The whole request at once, `stream` collected (the same arguments, the same samples):
        its audio, the codes of all its frames, per-frame `timings` (ms per frame of each stage,
        first_chunk_seconds, wall_seconds, real_time_factor ...) and `stopped_by` per piece."""
        request, timings, codes, stopped_by = self._open(request, options)
        body = functools.partial(
            self._stream, text=text, request=request, timings=timings, codes_out=codes, stopped_by=stopped_by
        )
        chunks = list(self._run(body, request, codes, timings))
        audio = np.concatenate([c.audio for c in chunks]) if chunks else np.zeros(0, np.float32)
        frames = max(timings.get("frames", 0), 1)
        summary = {
            "frames": timings.get("frames", 0),
            "audio_seconds": len(audio) / self.sample_rate,
            "talker_ms_per_frame": 1000 * timings.get("talker", 0.0) / frames,
            "code_predictor_ms_per_frame": 1000 * timings.get("code_predictor", 0.0) / frames,
            "codec_ms_per_frame": 1000 * timings.get("codec", 0.0) / frames,
            "first_chunk_seconds": timings.get("first_chunk"),
            "wall_seconds": timings.get("wall", 0.0),
            "batch_max": timings.get("batch_max", 1),
        }
        summary["real_time_factor"] = summary["wall_seconds"] / max(summary["audio_seconds"], 1e-9)
        return Result(
            audio.astype(np.float32),
            self.sample_rate,
            np.concatenate([c.codes for c in chunks]) if chunks else np.zeros((0, self.codec.n_codebooks), np.int32),
            summary,
            stopped_by,
        )

    def stream_text(self, chunks, request: Request | None = None, **options) -> Stream | AsyncStream:
        """Speaks text that is still being written: `chunks` is an iterator (or an async
        iterator) of str or UTF-8 bytes pieces, e.g. an LLM's deltas, cut anywhere.

        Runs the model's streaming-text mode, one text token per frame, feeding only tokens
        that no later text can change (kazetts.engine.text_stream), and waits for text when the
        talker catches up with it; so speech starts with the first word, nothing is dropped or
        reordered, and a text of up to PIECE_CHARS // 2 characters gives exactly the codes of
        `stream(text)`. Returns a Stream like `stream` (an AsyncStream for async input); audio
        already decoded is sent before waiting for text. `request` and the options as `stream`'s,
        but for voice cloning (a cloned voice speaks by its `xvector`) and text_streaming (always
        on); checked here, before any text is read."""
        request, timings, codes, stopped_by = self._open(request, options)
        for name in STREAMED_TEXT_TAKES_NO:
            if name in request.changed():
                raise ValueError(
                    f"stream_text takes no {name}: text streamed in speaks with a speaker, an instruct or an "
                    "xvector (a cloned voice's x-vector: xvector=voice.x_vector), in the streaming text mode"
                )
        self._prompts("a", request, request.xvector)

        def run(sync_chunks):
            body = functools.partial(
                self._stream_text,
                chunks=sync_chunks,
                request=request,
                timings=timings,
                codes_out=codes,
                stopped_by=stopped_by,
            )
            return self._run(body, request, codes, timings)

        if hasattr(chunks, "__aiter__"):
            return AsyncStream(run_with_async_chunks(run, chunks), timings, stopped_by)
        return Stream(run(chunks), timings, stopped_by)

    def _stream_text(
        self, seat, chunks, request: Request, timings: dict, codes_out: list, stopped_by: list
    ) -> Iterator[AudioChunk]:
        max_frames = request.max_frames
        instruct_ids = self.talker.tokenize(instruct_text(request.instruct)) if request.instruct else None
        pieces = TextPieces(chunks, self.talker.tokenize, PIECE_CHARS)
        rng, sampler, predictor = self._samplers(request, seat)
        index = -1
        with _Output(seat.codec, self.codec_threads > 0, timings, codes_out) as out:
            while pieces.next_piece():
                index += 1
                prompt = ArrivingPrompt(
                    build_prompt(
                        self.talker.file,
                        pieces.chat_ids(),
                        language=request.language,
                        speaker=request.speaker,
                        instruct_ids=instruct_ids,
                        speaker_embedding=request.xvector,
                    ),
                    pieces,
                    self.talker.file,
                )
                n_prefill, n_ctx = len(prompt.prefill), self.talker.n_ctx
                room = frame_budget(0, max_frames or n_ctx, n_prefill, n_ctx)  # max_frames, else all the room
                if room < 1:
                    raise ValueError(f"text too long for the talker context of {n_ctx}")
                seat.codec.reset()  # idle between pieces
                trace, produced, budget = TalkerTrace(record=False), 0, None
                out.start_piece(request.chunk_frames)
                frames = seat.present(talker_frames(seat.talker, prompt, sampler, predictor, room, rng, trace, timings))
                # the last piece is not known in advance: the joiner holds every crossfade tail back
                for codes in frames:
                    self._check_open()
                    produced += 1
                    if budget is None and pieces.closed:  # its text ids are known once it has closed
                        budget = frame_budget(len(pieces.tokens) + ROLE_TOKENS + TAIL_TOKENS, None, n_prefill, n_ctx)
                    over = max_frames is None and budget is not None and produced >= budget
                    waits = not pieces.ready(produced)
                    out.add(codes, now=over or waits)
                    yield from out.chunks(index, last_piece=False, wait=waits)  # all audio out before waiting for text
                    if over:
                        frames.close()
                        break
                    if waits:  # the next frame's text row: waited for here, where the batch does not wait for it
                        pieces.token(produced)
                yield from out.end_piece(index, last_piece=False)
                _piece_ended(trace, f"{index + 1}", produced, max_frames, stopped_by)
            if index < 0:
                raise ValueError("empty text: there is nothing to say")
            yield AudioChunk(out.joiner.flush(), index, out.frames)
        timings["frames"] = out.frames
        timings["wall"] = time.perf_counter() - out.start


class _Output:
    """A request's audio out: its codec pushes (CodecPipeline, serial or overlapped) taken back
    in order through the pieces' joiner, counting frames, timing the first chunk and handing the
    codes of each delivered chunk to `codes_out`. Closing it drops what was not delivered."""

    def __init__(self, codec: CodecDecoder, overlap: bool, timings: dict, codes_out: list | None):
        self.pipeline = CodecPipeline(codec, overlap, timings)
        self.timings, self.codes_out = timings, codes_out
        self.joiner = _Joiner()
        self.frames, self.start = 0, time.perf_counter()
        self.start_piece(1)

    def start_piece(self, chunk_frames: int) -> None:
        """A piece's first frame goes to the codec alone (its audio as early as it can be), then
        chunk_frames at a time (the codec runs faster on several)."""
        self.pending, self.want, self.chunk_frames = [], 1, chunk_frames

    def add(self, codes: np.ndarray, now: bool = False) -> None:
        """One frame's codes; pushed with those pending once a batch is full, or `now`."""
        self.pending.append(codes)
        if len(self.pending) == self.want or now:
            self.pipeline.push(self.pending)
            self.pending, self.want = [], self.chunk_frames

    def chunks(self, piece: int, last_piece: bool, wait: bool = False) -> Iterator[AudioChunk]:
        """The decoded chunks (`wait`: all pushed; the request's first is always waited for, so
        the first audio comes as early as serial)."""
        for codes, audio in self.pipeline.ready(wait, first=self.frames == 0):
            self.frames += len(codes)
            if self.codes_out is not None:
                self.codes_out.extend(codes)
            self.timings.setdefault("first_chunk", time.perf_counter() - self.start)
            yield AudioChunk(self.joiner.push(audio, last_piece), piece, self.frames)

    def end_piece(self, piece: int, last_piece: bool) -> Iterator[AudioChunk]:
        """The piece's last frames pushed, all its chunks out: the codec is then idle (reset or
        primed for the next piece)."""
        if self.pending:
            self.pipeline.push(self.pending)
            self.pending = []
        yield from self.chunks(piece, last_piece, wait=True)
        self.joiner.end_piece()

    def __enter__(self) -> "_Output":
        return self

    def __exit__(self, *exc) -> None:
        self.pipeline.close()
        self.joiner.close()


def _piece_ended(trace: TalkerTrace, piece: str, frames: int, max_frames: int | None, stopped_by: list | None) -> None:
    """Warns when a piece ran out of frames before end-of-speech (unless the caller capped them)
    and records why it stopped."""
    if trace.stopped_by != "eos" and max_frames is None:
        warnings.warn(
            f"piece {piece} reached its budget of {frames} frames without end-of-speech; it was cut there",
            RuntimeWarning,
            stacklevel=3,
        )
    if stopped_by is not None:
        stopped_by.append(trace.stopped_by)


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


class _Joiner(native.NativeHandle):
    """Emits the pieces' audio in order, crossfading each piece's last samples into the next
    (kz_joiner: the last 10 ms of a piece are held back until the next piece starts, then
    blended into its first samples; the last piece is emitted as it comes)."""

    _free_name = "kz_joiner_free"

    def __init__(self):
        self._lib = native.bind(_SIGNATURES)
        self._handle = self._lib.kz_joiner_new()
        if not self._handle:
            raise MemoryError("kz_joiner_new")

    def push(self, audio: np.ndarray, last_piece: bool) -> np.ndarray:
        audio = np.ascontiguousarray(audio, np.float32)
        out = np.empty(len(audio), np.float32)
        n = self._lib.kz_joiner_push(self._handle, native.ptr(audio), len(audio), int(last_piece), native.ptr(out))
        return out[:n]

    def end_piece(self) -> None:
        self._lib.kz_joiner_end_piece(self._handle)

    def flush(self) -> np.ndarray:
        """What is still held once the last piece has ended (when that was not known in advance)."""
        out = np.empty(self._lib.kz_joiner_flush(self._handle, None, 0), np.float32)
        self._lib.kz_joiner_flush(self._handle, native.ptr(out), len(out))
        return out
