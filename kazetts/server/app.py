"""The HTTP face: aiohttp routes around the worker that owns the model.

    POST /v1/audio/speech            OpenAI's speech endpoint (stream_format audio or sse)
    GET  /v1/audio/speech/stream     WebSocket: text streamed in (an LLM's deltas), audio out
    GET  /v1/models, /v1/audio/models, /v1/audio/voices, /health, /metrics

Every refusal is decided before the first audio byte and answered in OpenAI's error shape; a
client that goes away cancels its request (it leaves the queue, or its generation stops between
two audio chunks). aiohttp, not the standard library: it streams responses, reads WebSockets
and notices closed connections, and it installs with pip on Termux (Android wheels, pure-Python
dependencies), where FastAPI cannot (pydantic-core has no Android wheel).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import hmac
import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import yarl
from aiohttp import WSCloseCode, WSMessage, WSMsgType, web

from kazetts.server.audio_formats import CONTENT_TYPES, SAMPLE_RATE, Encoder, available_formats
from kazetts.server.errors import ApiError, bad_request
from kazetts.server.metrics import Metrics
from kazetts.server.speech_request import MAX_INPUT_CHARS, SpeechRequest, parse_speech, read_json
from kazetts.server.text_feed import TextFeed, no_text
from kazetts.server.voices import SavedVoices, VoiceCatalog
from kazetts.server.worker import AUDIO, DONE, ERROR, Job, QueueFull, Worker

MODEL_ALIASES = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
SERVER = web.AppKey("server", object)  # the Server of an app
POLL_SECONDS = 0.2  # how often a waiting request checks that its client is still there


@dataclass
class ServerOptions:
    model_name: str = "kazetts"
    api_key: str | None = None
    max_queue: int = 8
    max_batch: int = 1  # requests running at once (the TTS must take as many: TTS(max_batch=...))
    chunk_frames: int = 4
    max_input_chars: int = MAX_INPUT_CHARS  # characters of a request's input, or of all a text stream's text
    default_voice: str | None = None
    default_format: str | None = None  # mp3 (OpenAI's default) where it can be written, else wav
    max_frames: int | None = None  # frame cap per text piece (default: from the text's length)
    text_timeout: float = 60.0  # WebSocket: seconds without text before the stream is given up
    read_timeout: float = 30.0  # seconds a client may take to send a request's header, or its body (408)
    saved_voices: SavedVoices | None = None  # hook for saved (cloned) voices
    allow_origins: tuple[str, ...] = ()  # browser origins besides loopback ones ("*": any)


class Server:
    """State shared by the handlers: the worker, the voices and formats, the counters."""

    def __init__(self, load: Callable[[], Any], options: ServerOptions):
        self.options = options
        self.metrics = Metrics()
        self.formats = available_formats()
        self.default_format = options.default_format or ("mp3" if "mp3" in self.formats else "wav")
        if self.default_format not in self.formats:
            raise ValueError(
                f"default format {self.default_format!r} cannot be written here; choose one of {self.formats}"
            )
        self.worker = Worker(load, options.max_queue, options.max_batch)
        self._catalog: VoiceCatalog | None = None

    # -- the model ------------------------------------------------------------------------------
    def tts(self):
        """The loaded engine, or the 503 a request gets while it loads (or if it failed to)."""
        if not self.worker.ready.is_set():
            raise ApiError(503, "the model is still loading", code="model_loading", headers={"Retry-After": "5"})
        if self.worker.tts is None:
            raise ApiError(503, f"the model failed to load: {self.worker.load_error}", code="model_load_failed")
        return self.worker.tts

    def catalog(self) -> VoiceCatalog:
        if self._catalog is None:
            tts = self.tts()
            self._catalog = VoiceCatalog(
                tts.speakers, tts.languages, self.options.default_voice, self.options.saved_voices
            )
        return self._catalog

    def parse(self, body: Any, text_required: bool = True) -> SpeechRequest:
        tts, catalog = self.tts(), self.catalog()
        return parse_speech(
            body,
            formats=self.formats,
            default_format=self.default_format,
            resolve_voice=catalog.resolve,
            languages=tts.languages,
            takes_instruct=tts.voices.supports_instruct,
            max_input_chars=self.options.max_input_chars,
            text_required=text_required,
        )

    def submit(self, produce: Callable[[Any], Iterator]) -> Job:
        job = Job(produce)
        try:
            self.worker.submit(job)
        except QueueFull as full:
            self.metrics.rejected += 1
            raise ApiError(
                429,
                f"the server is busy: {self.worker.depth} requests are waiting; retry later",
                code="queue_full",
                type="rate_limit_error",
                headers={"Retry-After": str(full.retry_after)},
            ) from None
        return job

    async def next_event(self, job: Job, alive: Callable[[], bool]) -> tuple[str, Any]:
        """The job's next event; cancels the job (ConnectionResetError) once the client is gone."""
        while True:
            try:
                return await asyncio.wait_for(job.events.get(), POLL_SECONDS)
            except asyncio.TimeoutError:
                if not alive():
                    raise ConnectionResetError("the client went away") from None


# -- producing audio (runs in the worker thread) ----------------------------------------------------
def _audio_events(request: SpeechRequest, chunks, tts, text: Callable[[], str]) -> Iterator[tuple[str, Any]]:
    """A Stream's AudioChunks (already at the request's speed: the engine stretches them) ->
    (AUDIO, encoded bytes) as they come, then (DONE, stats); the input tokens are those of
    `text()`, the text said."""
    encoder, samples = Encoder(request.response_format, tts.sample_rate), 0
    for chunk in chunks:
        samples += len(chunk.audio)
        data = encoder.push(chunk.audio)
        if data:
            yield AUDIO, data
    data = encoder.finish()
    if data:
        yield AUDIO, data
    yield (
        DONE,
        {
            "input_tokens": len(tts.talker.tokenize(text())),
            "output_tokens": chunks.timings.get("frames", 0),
            "audio_seconds": samples / tts.sample_rate,
            "wall_seconds": chunks.timings.get("wall", 0.0),
        },
    )


def speech_producer(request: SpeechRequest, options: ServerOptions) -> Callable[[Any], Iterator]:
    def produce(tts) -> Iterator[tuple[str, Any]]:
        chunks = tts.stream(
            request.input, request.engine_request, chunk_frames=options.chunk_frames, max_frames=options.max_frames
        )
        yield from _audio_events(request, chunks, tts, lambda: request.input)

    return produce


def text_stream_producer(request: SpeechRequest, texts: TextFeed, options: ServerOptions) -> Callable[[Any], Iterator]:
    """The text stream's work: the text arrives in `texts`, each piece also kept in `said` (usage)."""

    def produce(tts) -> Iterator[tuple[str, Any]]:
        said: list[str] = []

        def recorded(chunks: Iterator[str]) -> Iterator[str]:
            for chunk in chunks:
                said.append(chunk)
                yield chunk

        audio = tts.stream_text(
            recorded(texts.chunks(options.text_timeout)),
            request.engine_request,
            chunk_frames=options.chunk_frames,
            max_frames=options.max_frames,
        )
        yield from _audio_events(request, audio, tts, lambda: "".join(said))

    return produce


def _usage(stats: dict) -> dict:
    return {
        "input_tokens": stats["input_tokens"],
        "output_tokens": stats["output_tokens"],
        "total_tokens": stats["input_tokens"] + stats["output_tokens"],
    }


def _engine_error(error: Exception) -> ApiError:
    """An engine ValueError (bad request found before compute) as a 400 naming the field."""
    if isinstance(error, ApiError):
        return error
    message = str(error)
    param = next(
        (
            field
            for word, field in (
                ("speaker", "voice"),
                ("language", "language"),
                ("instruct", "instructions"),
                ("text", "input"),
            )
            if word in message
        ),
        None,
    )
    return bad_request(message, param, "invalid_request")


# -- handlers -------------------------------------------------------------------------------------
def _error_response(error: ApiError) -> web.Response:
    return web.json_response(error.body(), status=error.status, headers=error.headers)


async def _json_body(request: web.Request, timeout: float) -> Any:
    try:
        data = await asyncio.wait_for(request.read(), timeout)
    except asyncio.TimeoutError:
        raise ApiError(408, f"the request body did not arrive within {timeout:g} s", code="request_timeout") from None
    return read_json(data, "the request body")


def _alive(request: web.Request) -> Callable[[], bool]:
    return lambda: request.transport is not None and not request.transport.is_closing()


async def speech(request: web.Request) -> web.StreamResponse:
    server: Server = request.app[SERVER]
    spoken = server.parse(await _json_body(request, server.options.read_timeout))
    job = server.submit(speech_producer(spoken, server.options))
    response = None
    try:
        kind, value = await server.next_event(job, _alive(request))
        if kind == ERROR:
            raise _engine_error(value)
        sse = spoken.stream_format == "sse"
        server.metrics.first_audio_after(time.perf_counter() - job.submitted)
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream" if sse else CONTENT_TYPES[spoken.response_format],
                "Cache-Control": "no-cache",
                "X-Sample-Rate": str(SAMPLE_RATE),
            }
        )
        if spoken.response_format == "pcm":
            response.headers.update({"X-Sample-Format": "s16le", "X-Channels": "1"})
        await response.prepare(request)
        while kind == AUDIO:
            if sse:
                await response.write(_sse({"type": "speech.audio.delta", "audio": base64.b64encode(value).decode()}))
            else:
                await response.write(value)
            kind, value = await server.next_event(job, _alive(request))
        if kind == ERROR:  # after the first byte only a broken stream can tell it
            server.metrics.error("synthesis_failed")
            if sse:
                await response.write(_sse({"type": "speech.audio.error", **_engine_error(value).body()}))
            request.transport.close()
            return response
        server.metrics.generated(value["audio_seconds"], value["wall_seconds"])
        if sse:
            await response.write(_sse({"type": "speech.audio.done", "usage": _usage(value)}))
        await response.write_eof()
        return response
    except ConnectionResetError:  # the client went away: its job is cancelled below
        server.metrics.cancelled += 1
        return response if response is not None else web.Response(status=499)  # nginx's "client closed"
    finally:
        server.worker.cancel(job)


def _sse(event: dict) -> bytes:
    return f"data: {json.dumps(event)}\n\n".encode()


def _message_json(message: WSMessage, what: str) -> Any:
    """A WebSocket message's JSON; a 400 if it is not a JSON text message, ConnectionResetError
    if it is the close."""
    if message.type == WSMsgType.TEXT:
        return read_json(message.data, what)
    if message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED):
        raise ConnectionResetError("the client closed the stream")
    reason = f" ({message.data})" if message.type == WSMsgType.ERROR else ""
    raise bad_request(
        f"{what} must be a JSON text message, not a {message.type.name.lower()} one{reason}", None, "invalid_message"
    )


async def speech_stream(request: web.Request) -> web.WebSocketResponse:
    """Text in, audio out over one WebSocket (see docs/server.md for the protocol). An error is
    sent as an event, then the socket is closed and the model freed."""
    server: Server = request.app[SERVER]
    options = server.options
    ws = web.WebSocketResponse()
    await ws.prepare(request)
    texts = TextFeed()
    job = reader = None
    close_code = WSCloseCode.OK
    try:
        try:
            start = await ws.receive(timeout=options.text_timeout)
        except asyncio.TimeoutError:
            raise no_text(options.text_timeout) from None
        body = _message_json(start, "the first message")
        if not isinstance(body, dict) or body.get("type") != "start":
            raise bad_request('the first message must be {"type": "start", ...}', "type", "invalid_message")
        spoken = server.parse(body, text_required=False)
        if spoken.input:
            texts.put(spoken.input)
        job = server.submit(text_stream_producer(spoken, texts, options))
        reader = asyncio.ensure_future(_read_text(ws, texts, len(spoken.input), options.max_input_chars))
        reader.add_done_callback(functools.partial(_reader_ended, job))
        while True:
            kind, value = await server.next_event(job, lambda: not ws.closed)
            if kind == AUDIO:
                await ws.send_bytes(value)
            elif kind == DONE:
                server.metrics.generated(value["audio_seconds"], value["wall_seconds"])
                await ws.send_json({"type": "speech.audio.done", "usage": _usage(value)})
                break
            elif isinstance(value, ConnectionResetError):  # from the reader: the client closed before the end
                raise value
            else:
                raise _engine_error(value)
    except ApiError as error:
        server.metrics.error(error.code or error.type)
        close_code = WSCloseCode.POLICY_VIOLATION if error.status < 500 else WSCloseCode.INTERNAL_ERROR
        with contextlib.suppress(ConnectionResetError):  # unless the client is gone already
            await ws.send_json({"type": "error", **error.body()})
    except (ConnectionResetError, asyncio.CancelledError):
        server.metrics.cancelled += 1
    finally:
        texts.abandon()  # frees the model if it waits for text
        if job is not None:
            server.worker.cancel(job)
        if reader is not None:
            reader.cancel()
        await ws.close(code=close_code)
    return ws


async def _read_text(ws: web.WebSocketResponse, texts: TextFeed, received: int, limit: int) -> None:
    """{"type": "text", "text": "..."} messages into the feed until {"type": "end"}.
    Raises the 400 of any other message, or of text beyond `limit` characters with the
    `received` ones; ConnectionResetError if the client closes before the end."""
    async for message in ws:
        data = _message_json(message, "a message")
        kind = data.get("type") if isinstance(data, dict) else None
        if kind == "end":
            texts.end()
            return
        if kind != "text":
            got = f"type {kind!r}" if isinstance(data, dict) else f"a JSON {type(data).__name__}"
            raise bad_request(
                f'after the start a message must be {{"type": "text", "text": "..."}} or {{"type": "end"}}, got {got}',
                "type",
                "invalid_message",
            )
        if not isinstance(data.get("text"), str):
            raise bad_request(
                f"'text' must be a string, got {type(data.get('text')).__name__}", "text", "invalid_message"
            )
        received += len(data["text"])
        if received > limit:
            raise bad_request(
                f"the text streamed in has {received} characters; the limit is {limit}",
                "text",
                "string_above_max_length",
            )
        if data["text"]:
            texts.put(data["text"])
    raise ConnectionResetError("the client closed the stream before its end")


def _reader_ended(job: Job, reader: asyncio.Task) -> None:
    """The reader's failure (a bad message, the client gone) as the stream's next event."""
    if not reader.cancelled() and reader.exception() is not None:
        error = reader.exception()
        job.emit(ERROR, error if isinstance(error, (ApiError, ConnectionResetError)) else _internal_error(error))


async def models(request: web.Request) -> web.Response:
    server: Server = request.app[SERVER]
    created = int(server_started)
    ids = [server.options.model_name, *MODEL_ALIASES]
    return web.json_response(
        {
            "object": "list",
            "data": [{"id": name, "object": "model", "created": created, "owned_by": "kazetts"} for name in ids],
        }
    )


async def audio_models(request: web.Request) -> web.Response:
    server: Server = request.app[SERVER]
    return web.json_response(
        {"models": [{"id": name, "name": name} for name in (server.options.model_name, *MODEL_ALIASES)]}
    )


async def voices(request: web.Request) -> web.Response:
    listing = request.app[SERVER].catalog().listing()
    return web.json_response({"voices": listing, "object": "list", "data": listing})


async def health(request: web.Request) -> web.Response:
    server: Server = request.app[SERVER]
    try:
        tts = server.tts()
    except ApiError as error:
        return web.json_response(
            {"status": "loading" if error.code == "model_loading" else "error", **error.body()},
            status=503,
            headers=error.headers,
        )
    return web.json_response(
        {
            "status": "ok",
            "model": server.options.model_name,
            "model_type": tts.model_type,
            "formats": server.formats,
            "queue": server.worker.depth,
            "running": server.worker.running,
            "max_batch": server.worker.max_batch,
        }
    )


async def metrics(request: web.Request) -> web.Response:
    server: Server = request.app[SERVER]
    worker = server.worker
    text = server.metrics.render(worker.depth, worker.running, worker.max_batch, worker.tts is not None)
    return web.Response(text=text, content_type="text/plain", charset="utf-8", headers={"X-Content-Version": "0.0.4"})


server_started = time.time()


# -- middleware: key, errors in OpenAI's shape, counters ----------------------------------------------
@web.middleware
async def openai_errors(request: web.Request, handler) -> web.StreamResponse:
    server: Server = request.app[SERVER]
    endpoint = request.match_info.route.resource.canonical if request.match_info.route.resource else "unmatched"
    try:
        _check_origin(request, server.options.allow_origins)
        _check_key(request, server.options.api_key)
        response = await handler(request)
    except ApiError as error:
        response = _error_response(error)
        server.metrics.error(error.code or error.type)
    except web.HTTPException as error:  # aiohttp's own: 404, 405, 413 ...
        if error.status < 400:
            raise
        api = ApiError(error.status, error.reason, code=error.reason.lower().replace(" ", "_"))
        response = _error_response(api)
        server.metrics.error(api.code)
    except Exception as error:  # noqa: BLE001 - a bug answers this request, in OpenAI's shape
        response = _error_response(_internal_error(error))
        server.metrics.error("internal_error")
    server.metrics.request(endpoint, response.status)
    return response


def _internal_error(error: Exception) -> ApiError:
    """A bug, as the 500 that answers its request."""
    return ApiError(500, f"{type(error).__name__}: {error}", code="internal_error")


def _check_origin(request: web.Request, allowed: tuple[str, ...]) -> None:
    """A web page elsewhere must not drive this machine's model through the visitor's browser
    (browsers send any page's POSTs and WebSockets to 127.0.0.1): requests that carry an Origin
    must come from a loopback page or an allowed origin. Programs send no Origin."""
    origin = request.headers.get("Origin")
    if origin is None or "*" in allowed or origin in allowed:
        return
    try:
        host = yarl.URL(origin).host
    except ValueError as error:
        raise bad_request(f"the Origin header {origin!r} is not a URL ({error})", "Origin", "invalid_origin") from None
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ApiError(
            403,
            f"requests from web pages at {origin} are not allowed; start the server with --allow-origin {origin}",
            code="origin_not_allowed",
        )


def _check_key(request: web.Request, key: str | None) -> None:
    if key is None or request.path == "/health":
        return
    given = request.headers.get("Authorization", "")
    token = given[7:] if given.startswith("Bearer ") else request.query.get("api_key", "")
    if not hmac.compare_digest(token.encode(), key.encode()):
        raise ApiError(401, "missing or wrong API key: send 'Authorization: Bearer <key>'", code="invalid_api_key")


def handler_options(app: web.Application) -> dict:
    """aiohttp's connection options for serving `app` (keywords of web.run_app and AppRunner): a
    client that has not sent a whole request header read_timeout s after it connected, or after
    its last request, is disconnected."""
    return {"keepalive_timeout": app[SERVER].options.read_timeout}


def make_app(load: Callable[[], Any], options: ServerOptions | None = None) -> web.Application:
    """The application; `load()` builds the TTS in the worker thread (the server answers /health
    with 503 meanwhile)."""
    app = web.Application(middlewares=[openai_errors])
    server = app[SERVER] = Server(load, options or ServerOptions())
    app.router.add_post("/v1/audio/speech", speech)
    app.router.add_get("/v1/audio/speech/stream", speech_stream)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/v1/audio/models", audio_models)
    app.router.add_get("/v1/audio/voices", voices)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)

    async def stop_worker(_app: web.Application) -> None:
        await asyncio.get_running_loop().run_in_executor(None, server.worker.stop)

    app.on_cleanup.append(stop_worker)
    return app


class ServerThread:
    """The app served from a thread of its own (tests, the load test, embedding):
    `with ServerThread(app) as url: ...`, on an ephemeral port of 127.0.0.1 by default."""

    def __init__(self, app: web.Application, host: str = "127.0.0.1", port: int = 0):
        self.app, self.host, self.port = app, host, port
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="kazetts-server", daemon=True)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._runner = web.AppRunner(self.app, **handler_options(self.app))
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, self.host, self.port)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]
        self.url = f"http://{self.host}:{self.port}"
        self._started.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._runner.cleanup())

    def __enter__(self) -> str:
        self._thread.start()
        self._started.wait(30)
        return self.url

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
