"""The Wyoming face: Home Assistant's protocol for voice services, on the HTTP server's worker
(one model, a FIFO queue), with the `wyoming` package's event types (pure Python: it installs
with pip on Termux).

    describe                                       -> info: one TTS program, its voices
    synthesize {text, voice: {name, language}}     -> audio-start, audio-chunk as frames are decoded, audio-stop
    synthesize-start {voice}, synthesize-chunk {text} (cut anywhere) ..., synthesize-stop
        -> for each piece of text: audio-start, audio-chunk ..., audio-stop (TTS.stream_text, speaking
           while the text arrives); then synthesize-stopped

Home Assistant 2025.8+ also sends the whole text as a `synthesize` inside a stream, for servers
that do not stream: it is ignored. Errors are `error` events with a one-line text. A request that
is refused or fails (unknown voice, empty text, a model failure) ends its connection after the
error, as wyoming-piper does: Home Assistant ignores `error` and waits for audio-stop,
synthesize-stopped or the end of the connection. A line that is not an event, or an event out of
place, is answered and the connection goes on. A client that goes away cancels its request.
"""

from __future__ import annotations

import asyncio
import json
import logging
import pathlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.server import AsyncEventHandler, AsyncServer
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from kazetts import __version__
from kazetts.request import Request, make_request
from kazetts.server.audio_formats import pcm16
from kazetts.server.errors import ApiError, bad_request
from kazetts.server.text_feed import TextFeed
from kazetts.server.voices import VoiceCatalog, VoiceFiles
from kazetts.server.worker import AUDIO, DONE, ERROR, Job, QueueFull, Worker

LOG = logging.getLogger("kazetts.wyoming")
QWEN_URL = "https://github.com/QwenLM/Qwen3-TTS"
# Home Assistant matches a pipeline's language (a BCP 47 tag such as "en" or "en-US") against the
# voices' languages, so these are advertised as ISO 639-1 codes; a request may name either.
LANGUAGE_CODES = {
    "chinese": "zh",
    "english": "en",
    "french": "fr",
    "german": "de",
    "italian": "it",
    "japanese": "ja",
    "korean": "ko",
    "portuguese": "pt",
    "russian": "ru",
    "spanish": "es",
}
SAMPLE_WIDTH, CHANNELS = 2, 1  # 16-bit mono PCM
MAX_EVENT_BYTES = 1 << 20  # an event's data or payload: a TTS request carries text only
NO_VOICE = {
    "base": "this base model speaks only with cloned voices: put .voice files (kazetts enroll) in the voice folder",
    "voice_design": "this voice_design model speaks only with a description of the voice: give presets "
    "(a JSON file of voice names to instructs)",
}


@dataclass
class WyomingOptions:
    model_name: str = "kazetts"
    default_voice: str | None = None  # default: the first voice
    language: str = "auto"  # when a request names none
    max_queue: int = 8
    text_timeout: float = 60.0  # a text stream without text for this long is given up
    # every request's seed, sampling, chunk_frames, max_frames (no event carries them); an event gives the voice and language
    request: Request = field(default_factory=Request)


def language_codes(languages: list[str]) -> list[str]:
    """What info advertises for the model's languages ("auto" is none)."""
    return [LANGUAGE_CODES.get(name, name) for name in languages if name != "auto"]


def model_language(requested: str, languages: list[str]) -> str:
    """The model's language for a Wyoming one: a code ("en", "en_US", "en-GB") or a name ("english", "auto")."""
    tag = requested.lower().replace("-", "_")
    if tag in languages:
        return tag
    by_code = {code: name for name, code in LANGUAGE_CODES.items() if name in languages}
    if tag.split("_")[0] in by_code:
        return by_code[tag.split("_")[0]]
    raise bad_request(
        f"unknown language {requested!r}; choose one of {language_codes(languages)} (or {languages})",
        "language",
        "invalid_value",
    )


def wyoming_info(voices: VoiceCatalog, options: WyomingOptions, model_type: str) -> Info:
    """One TTS program; every speaker, cloned voice and preset a voice of it (Home Assistant shows
    the description as the voice's name)."""
    qwen = Attribution(name="Alibaba Qwen (Qwen3-TTS)", url=QWEN_URL)
    suffix = {"speaker": "", "saved": " (cloned voice)", "preset": " (voice design)"}
    tts_voices = [
        TtsVoice(
            name=voice["id"],
            description=voice["name"] + suffix[voice["kind"]],
            attribution=qwen,
            installed=True,
            version=None,
            languages=language_codes(voice["languages"]),
        )
        for voice in voices.listing()
    ]
    program = TtsProgram(
        name="kazetts",
        description=f"Qwen3-TTS ({model_type} model {options.model_name}) run by kazetts",
        attribution=qwen,
        installed=True,
        version=__version__,
        voices=tts_voices,
        supports_synthesize_streaming=True,
    )
    return Info(tts=[program])


def _audio_events(chunks: Iterator) -> Iterator[tuple[str, Any]]:
    """The worker's events for a request: (AUDIO, (piece, 16-bit PCM)) as chunks come, then (DONE, None)."""
    for chunk in chunks:
        if len(chunk.audio):
            yield AUDIO, (chunk.piece, pcm16(chunk.audio))
    yield DONE, None


class WyomingService:
    """What every connection shares: the worker that owns the model, the voices, the info event."""

    def __init__(
        self, worker: Worker, voices: VoiceCatalog, options: WyomingOptions, sample_rate: int, model_type: str
    ):
        self.worker, self.voices, self.options, self.sample_rate = worker, voices, options, sample_rate
        self.info = wyoming_info(voices, options, model_type)

    @classmethod
    def start(
        cls,
        load: Callable[[], Any],
        options: WyomingOptions,
        voice_folder: str | pathlib.Path | None = None,
        presets: dict[str, str] | None = None,
    ) -> "WyomingService":
        """Loads the model (in the worker) and checks the voices, so that a server that listens can speak."""
        worker = Worker(load, options.max_queue)
        worker.ready.wait()
        if worker.tts is None:
            raise ValueError(f"the model did not load: {worker.load_error}")
        try:
            tts = worker.tts
            if voice_folder is not None and tts.model_type != "base":
                raise ValueError(
                    f"the voices in {voice_folder} are cloned voices, for base models; this is a {tts.model_type} model"
                )
            if presets and tts.model_type != "voice_design":
                raise ValueError(f"presets describe voices for voice_design models; this is a {tts.model_type} model")
            saved = VoiceFiles(voice_folder, tts.model_fingerprint) if voice_folder is not None else None
            voices = VoiceCatalog(tts.speakers, tts.languages, options.default_voice, saved, presets, aliases=())
            if voices.default is None:
                raise ValueError(NO_VOICE.get(tts.model_type, f"this {tts.model_type} model has no voice"))
            try:
                model_language(options.language, tts.languages)
            except ApiError as error:
                raise ValueError(f"default language: {error.message}") from None
            return cls(worker, voices, options, tts.sample_rate, tts.model_type)
        except BaseException:
            worker.stop()
            raise

    def close(self) -> None:
        self.worker.stop()

    def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> "WyomingHandler":
        return WyomingHandler(self, reader, writer)

    # -- requests (decided here, in the event loop, before the queue) ----------------------------
    def request(self, data: dict) -> Request:
        """The request of an event's voice {"name", "language"} (either may be absent: the defaults)."""
        voice = data.get("voice") or {}
        if not isinstance(voice, dict):
            raise bad_request('\'voice\' must be an object such as {"name": "vivian"}', "voice", "invalid_type")
        name, language = voice.get("name"), voice.get("language")
        for key, value in (("name", name), ("language", language)):
            if value is not None and not isinstance(value, str):
                raise bad_request(
                    f"the voice's '{key}' must be a string, got {type(value).__name__}", key, "invalid_type"
                )
        return make_request(
            self.options.request,
            {
                **self.voices.resolve(name),
                "language": model_language(language or self.options.language, self.voices.languages),
            },
        )

    def synthesis(self, data: dict) -> Callable[[Any], Iterator]:
        """A `synthesize` event's work for the worker: the whole text, spoken as it is decoded."""
        text = data.get("text")
        if not isinstance(text, str) or not text.strip():
            raise bad_request(
                "empty text: there is nothing to say"
                if isinstance(text, str)
                else "synthesize needs a 'text' string: the text to say",
                "text",
                "empty_text",
            )
        request = self.request(data)
        return lambda tts: _audio_events(tts.stream(text, request))

    def text_stream(self, data: dict, feed: TextFeed) -> Callable[[Any], Iterator]:
        """A `synthesize-start` event's work: the text of the chunks that follow, spoken as it arrives."""
        request = self.request(data)
        return lambda tts: _audio_events(tts.stream_text(feed.chunks(self.options.text_timeout), request))

    def submit(self, produce: Callable[[Any], Iterator]) -> Job:
        job = Job(produce)
        try:
            self.worker.submit(job)
        except QueueFull:
            raise ApiError(
                429, f"the server is busy: {self.worker.depth} requests are waiting; try again later", code="queue_full"
            ) from None
        return job


async def serve(service: WyomingService, uri: str) -> None:
    """Serves tcp://HOST:PORT or unix://PATH until SIGTERM."""
    await AsyncServer.from_uri(uri).run(service.connection)


# -- one connection ------------------------------------------------------------------------------------
class BadEvent(Exception):
    """A line that is not an event, or an event this connection cannot take now: answered with an
    `error`, and the connection goes on, unless `fatal` (the byte stream can no longer be followed)."""

    def __init__(self, text: str, fatal: bool = False):
        super().__init__(text)
        self.fatal = fatal


async def read_event(reader: asyncio.StreamReader) -> Event | None:
    """The next event; None at the end of the connection. wyoming's own async_read_event takes a
    line it cannot read for the end of the connection; here it is a BadEvent the handler answers."""
    try:
        line = await reader.readline()
    except ValueError:  # longer than the reader's limit (64 KiB): dropped
        raise BadEvent("an event line is too long") from None
    if not line:
        return None
    try:
        header = json.loads(line)
    except ValueError:
        header = None
    if not isinstance(header, dict) or not isinstance(header.get("type"), str):
        raise BadEvent('not a Wyoming event: a line must be a JSON object with a "type", e.g. {"type": "describe"}')
    data, sizes = header.get("data") or {}, (header.get("data_length") or 0, header.get("payload_length") or 0)
    if any(not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_EVENT_BYTES for size in sizes):
        raise BadEvent(f"data_length and payload_length must be integers in 0..{MAX_EVENT_BYTES}", fatal=True)
    if sizes[0]:
        try:
            more = json.loads(await reader.readexactly(sizes[0]))
        except ValueError:
            more = None
        if not isinstance(more, dict) or not isinstance(data, dict):
            raise BadEvent(f"the data of a {header['type']} event must be a JSON object")
        data = {**data, **more}
    if not isinstance(data, dict):
        raise BadEvent(f"the data of a {header['type']} event must be a JSON object")
    payload = await reader.readexactly(sizes[1]) if sizes[1] else None
    return Event(type=header["type"], data=data, payload=payload)


@dataclass
class _Request:
    """The request a connection runs: its job, its text feed if it is a text stream."""

    job: Job
    feed: TextFeed | None  # None: a one-shot synthesize
    text_open: bool  # a text stream that has not had its synthesize-stop
    speaking: asyncio.Task | None = None


class WyomingHandler(AsyncEventHandler):
    """One client connection: it goes on reading events while its request speaks (a task writes
    the audio), so that text chunks keep coming in and a client that leaves is noticed at once."""

    def __init__(self, service: WyomingService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        super().__init__(reader, writer)
        self.service = service
        self.request: _Request | None = None

    async def run(self) -> None:
        """wyoming's loop, reading with read_event: a malformed line is answered, not the end."""
        self._is_running = True
        try:
            while self._is_running:
                try:
                    event = await read_event(self.reader)
                except BadEvent as bad:
                    await self._send_error(str(bad), "invalid_event")
                    if bad.fatal:
                        break
                    continue
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                if event is None or not await self.handle_event(event):
                    break
        finally:
            await self.disconnect()
            self.writer.close()

    async def handle_event(self, event: Event) -> bool:
        """Answers an event; False ends the connection (a refused request)."""
        try:
            if Describe.is_type(event.type):
                await self.write_event(self.service.info.event())
            elif Synthesize.is_type(event.type):
                if self.request is not None and self.request.text_open:
                    return True  # the whole text again, which Home Assistant sends inside a stream for older servers
                self._begin(lambda: self.service.synthesis(event.data))
            elif SynthesizeStart.is_type(event.type):
                feed = TextFeed()
                self._begin(lambda: self.service.text_stream(event.data, feed), feed)
            elif SynthesizeChunk.is_type(event.type):
                text = event.data.get("text")
                if not isinstance(text, str):
                    raise BadEvent("synthesize-chunk needs a 'text' string")
                self._text_stream(event.type).feed.put(text)
            elif SynthesizeStop.is_type(event.type):
                request = self._text_stream(event.type)
                request.text_open = False
                request.feed.end()
            # any other event (ping, select-program ...) is not a TTS server's: dropped, as the protocol wants
            return True
        except BadEvent as bad:
            await self._send_error(str(bad), "invalid_event")
            return True
        except ApiError as refused:
            await self._send_error(refused.message, refused.code)
            return False
        except ConnectionError:
            return False
        except Exception as error:  # noqa: BLE001 - a kazetts bug: logged in full, the client gets one line
            LOG.exception("internal error on a %s event", event.type)
            await self._send_error(f"internal error: {type(error).__name__}: {error}", "internal_error")
            return False

    def _begin(self, work: Callable[[], Callable[[Any], Iterator]], feed: TextFeed | None = None) -> None:
        """Queues a request (work() checks it, raising ApiError) and starts writing its audio."""
        if self.request is not None:
            raise BadEvent(
                "a request is already running on this connection: wait for its audio-stop "
                "(synthesize-stopped for a text stream)"
            )
        request = self.request = _Request(self.service.submit(work()), feed, text_open=feed is not None)
        request.speaking = asyncio.create_task(self._speak(request))

    def _text_stream(self, kind: str) -> _Request:
        if self.request is None or not self.request.text_open:
            raise BadEvent(f"{kind} outside a text stream: send synthesize-start first")
        return self.request

    async def _speak(self, request: _Request) -> None:
        """Writes a request's audio as the worker makes it: one audio-start .. audio-stop for a
        synthesize (Home Assistant reads its audio up to the first audio-stop), one per piece of
        text for a text stream, then synthesize-stopped."""
        rate, streamed, piece = self.service.sample_rate, request.feed is not None, None
        try:
            while True:
                kind, value = await request.job.events.get()
                if kind != AUDIO:
                    if self.request is request:  # before the last events: a client that has them may send its next
                        self.request = None
                    break
                index, pcm = value
                if piece is None or (streamed and index != piece):
                    if piece is not None:
                        await self.write_event(AudioStop().event())
                    await self.write_event(AudioStart(rate=rate, width=SAMPLE_WIDTH, channels=CHANNELS).event())
                    piece = index
                await self.write_event(AudioChunk(rate=rate, width=SAMPLE_WIDTH, channels=CHANNELS, audio=pcm).event())
            if kind == ERROR:
                failure = value.message if isinstance(value, ApiError) else str(value)
                await self._send_error(failure, getattr(value, "code", None) or "invalid_request")
                await self.stop()
                return
            if piece is not None:
                await self.write_event(AudioStop().event())
            if streamed:
                await self.write_event(SynthesizeStopped().event())
        except ConnectionError:
            pass  # the client went away: the connection's end cancels the request

    async def disconnect(self) -> None:
        """The connection ends: its request stops, waiting in the queue or running."""
        request, self.request = self.request, None
        if request is None:
            return
        if request.feed is not None:
            request.feed.abandon()
        self.service.worker.cancel(request.job)
        request.speaking.cancel()
        LOG.info("a client went away: its request was cancelled")

    async def _send_error(self, text: str, code: str | None) -> None:
        text = " ".join(text.split())
        LOG.warning("error: %s", text)
        try:
            await self.write_event(Error(text=text, code=code).event())
        except ConnectionError:
            pass
