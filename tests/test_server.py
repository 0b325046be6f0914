"""`kazetts serve` against real clients: the official `openai` package, Open WebUI's and
SillyTavern's request shapes, raw HTTP for bad requests, the WebSocket for text streamed in.
The server runs on 127.0.0.1 with an ephemeral port, on the tiny model, a few frames a request."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import io
import json
import pathlib
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import openai
import pytest
import soundfile

from conftest import REPO, free_port
from kazetts.engine.tts import TTS, Stream
from kazetts.request import Request
from kazetts.server.app import SERVER, ServerOptions, ServerThread, make_app
from kazetts.server.audio_formats import pcm16
from kazetts.server.errors import ApiError
from kazetts.server.speech_request import parse_speech

FRAMES = 3  # per request: the tiny model's frames are slow on 2 shared cores
FRAME_BYTES = 1920 * 2
FIXTURES = json.loads((pathlib.Path(__file__).parent / "fixtures" / "client_requests.json").read_text())


UNSEEDED = 11  # the seed of requests that carry none (as real clients send them): a sampled EOS
# after the minimum 2 frames must not end a test's request early by chance


class GatedTTS:
    """The real engine, with a gate the tests can close: stream() then waits after each chunk
    until released, and records the frame counts of the chunks it produced. Requests without a
    seed get UNSEEDED, so every test's audio is reproducible."""

    def __init__(self, tts: TTS):
        self._tts = tts
        self.gate: threading.Event | None = None
        self.runs: list[list[int]] = []  # per stream() call, the frame counts of its chunks

    def __getattr__(self, name):
        return getattr(self._tts, name)

    @property
    def produced(self) -> list[int]:
        return self.runs[-1]

    def stream(self, text, request, **options):
        self.runs.append([])
        stream = self._tts.stream(text, seeded(request), **options)
        return Stream(self._gated(stream), stream.timings, stream.stopped_by)

    def _gated(self, chunks):
        for chunk in chunks:
            self.runs[-1].append(chunk.frames)
            yield chunk
            if self.gate is not None and not self.gate.wait(60):
                raise RuntimeError("the test never opened the gate")

    def stream_text(self, chunks, request, **options):
        return self._tts.stream_text(chunks, seeded(request), **options)


def seeded(request: Request) -> Request:
    return request if request.seed is not None else dataclasses.replace(request, seed=UNSEEDED)


@pytest.fixture(scope="module")
def engine(tiny_gguf):
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32")
    return GatedTTS(TTS(talker, mmproj, threads=2, codec_weights="f32"))


@pytest.fixture(scope="module")
def server(engine):
    app = make_app(lambda: engine, ServerOptions(max_frames=FRAMES, chunk_frames=1, max_queue=1))
    with ServerThread(app) as url:
        assert wait_ready(url)
        yield url, app[SERVER]


LIMIT = 40  # the strict server's max_input_chars


@pytest.fixture(scope="module")
def strict(engine):
    """A second server on the same engine, with a short text limit and read timeout (a text
    timeout far beyond the tests' waits, so that a model held until it passes fails them)."""
    app = make_app(
        lambda: engine,
        ServerOptions(
            max_frames=FRAMES, chunk_frames=1, max_queue=1, max_input_chars=LIMIT, read_timeout=1.0, text_timeout=120
        ),
    )
    with ServerThread(app) as url:
        assert wait_ready(url)
        yield url, app[SERVER]


def wait_free(state, seconds: float = 30) -> bool:
    """The worker holds no request within `seconds` (a request left waiting for text holds it for
    the text timeout)."""
    end = time.time() + seconds
    while time.time() < end:
        if not state.worker.busy and state.worker.depth == 0:
            return True
        time.sleep(0.05)
    return False


def wait_ready(url: str, seconds: float = 60) -> bool:
    end = time.time() + seconds
    while time.time() < end:
        if http("GET", url + "/health")[0] == 200:
            return True
        time.sleep(0.1)
    return False


def http(method: str, url: str, body: bytes | None = None, headers: dict | None = None) -> tuple[int, bytes, dict]:
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=120) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)
    except urllib.error.URLError:  # not listening (yet)
        return 0, b"", {}


def client(url: str, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=120)


def speech(c: openai.OpenAI, fmt: str, **extra) -> bytes:
    return c.audio.speech.create(
        model="tts-1",
        voice="vivian",
        input="Hello there.",
        response_format=fmt,
        extra_body={"seed": 11, "language": "english", **extra},
    ).content


def decode(fmt: str, data: bytes) -> np.ndarray:
    if fmt == "pcm":
        return np.frombuffer(data, "<i2").astype(np.float32) / 32767
    audio, rate = soundfile.read(io.BytesIO(data), dtype="float32")
    assert rate == 24000
    return audio


def assert_openai_error(status: int, body: bytes, expected_status: int) -> dict:
    assert status == expected_status, body
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    return error


# -- the openai client ------------------------------------------------------------------------------
def test_every_format_through_the_openai_client(server, engine):
    url, state = server
    c = client(url)
    pcm = speech(c, "pcm")
    assert len(pcm) == FRAMES * FRAME_BYTES
    expected = engine._tts.synthesize(
        "Hello there.", speaker="vivian", language="english", seed=11, max_frames=FRAMES
    ).audio
    assert pcm == pcm16(expected), "the server says what the engine says for the same seed"
    reference = decode("pcm", pcm)
    for fmt in state.formats:
        audio = decode(fmt, speech(c, fmt))
        if fmt in ("wav", "flac"):  # lossless
            assert np.abs(audio - reference).max() <= 1.5 / 32767, fmt
        else:  # opus, mp3: lossy, with encoder delay and padding
            assert abs(len(audio) - len(reference)) <= 2400 and np.isfinite(audio).all(), fmt


def test_sampling_options_reach_the_engine(server, engine):
    """kazetts' sampling extensions (extra_body) are kazetts.Request's fields; the code
    predictor's old names (subtalker_*) are still taken."""
    url, _ = server
    sampling = {
        "temperature": 0.7,
        "top_k": 5,
        "top_p": 0.8,
        "repetition_penalty": 1.3,
        "cp_temperature": 1.3,
        "cp_top_k": 20,
        "cp_top_p": 0.9,
    }
    pcm = speech(client(url), "pcm", **sampling)
    expected = engine._tts.synthesize(
        "Hello there.", speaker="vivian", language="english", seed=11, max_frames=FRAMES, **sampling
    ).audio
    assert pcm == pcm16(expected) and pcm != speech(client(url), "pcm")
    old = {name.replace("cp_", "subtalker_"): value for name, value in sampling.items()}
    assert speech(client(url), "pcm", **old) == pcm


def test_streaming_response_equals_the_whole_response(server):
    url, _ = server
    c = client(url)
    whole = speech(c, "wav")
    with c.audio.speech.with_streaming_response.create(
        model="tts-1",
        voice="vivian",
        input="Hello there.",
        response_format="wav",
        extra_body={"seed": 11, "language": "english"},
    ) as r:
        assert r.headers["content-type"] == "audio/wav"
        streamed = list(r.iter_bytes())
    assert b"".join(streamed) == whole


def test_sse_deltas_then_done(server):
    url, _ = server
    status, body, headers = http(
        "POST",
        url + "/v1/audio/speech",
        json.dumps(
            {
                "model": "tts-1",
                "voice": "vivian",
                "input": "Hello there.",
                "response_format": "pcm",
                "stream_format": "sse",
                "seed": 11,
                "language": "english",
            }
        ).encode(),
    )
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    events = [json.loads(line[6:]) for line in body.decode().split("\n") if line.startswith("data: ")]
    assert [e["type"] for e in events] == ["speech.audio.delta"] * FRAMES + ["speech.audio.done"]
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert audio == speech(client(url), "pcm")
    assert events[-1]["usage"]["output_tokens"] == FRAMES and events[-1]["usage"]["input_tokens"] > 0


def test_first_audio_is_sent_after_the_first_frame(server, engine):
    """The engine is held after its first chunk (one frame): the client must already have that
    frame's audio while the rest of the utterance does not exist yet."""
    url, _ = server
    engine.gate = threading.Event()
    try:
        with client(url).audio.speech.with_streaming_response.create(
            model="tts-1", voice="vivian", input="Hello there.", response_format="pcm"
        ) as r:
            chunks, first = r.iter_bytes(), b""
            while len(first) < FRAME_BYTES:
                first += next(chunks)
            assert engine.produced == [1] and len(first) == FRAME_BYTES
            engine.gate.set()
            rest = b"".join(chunks)
        assert engine.produced == [1, 2, 3] and len(first + rest) == FRAMES * FRAME_BYTES
    finally:
        engine.gate.set()
        engine.gate = None


def test_queue_full_is_429_and_a_gone_client_frees_its_slot(server, engine):
    url, state = server
    engine.gate = threading.Event()
    body = json.dumps({"model": "tts-1", "input": "Hello there.", "voice": "vivian", "response_format": "pcm"}).encode()
    results = {}
    try:
        # A runs (held after its first frame) and then goes away; B waits in the queue (size 1)
        a = urllib.request.urlopen(
            urllib.request.Request(url + "/v1/audio/speech", data=body, method="POST"), timeout=60
        )
        assert len(a.read(FRAME_BYTES)) == FRAME_BYTES
        waiter = threading.Thread(target=lambda: results.update(b=http("POST", url + "/v1/audio/speech", body)))
        waiter.start()
        while state.worker.depth < 1:
            time.sleep(0.05)
        with pytest.raises(openai.RateLimitError) as full:
            speech(client(url), "pcm")
        assert int(full.value.response.headers["Retry-After"]) >= 1
        assert full.value.body["code"] == "queue_full"
        cancelled = state.metrics.cancelled
        a.close()  # the client of A goes away mid-stream
        while state.metrics.cancelled == cancelled:
            time.sleep(0.05)
        engine.gate.set()  # A's generator resumes once, sees the cancel and stops: no third frame
        waiter.join(120)
        assert engine.runs[-2] == [1, 2], "A stopped after the frame it was making when its client left"
        assert results["b"][0] == 200 and len(results["b"][1]) == FRAMES * FRAME_BYTES
    finally:
        engine.gate.set()
        engine.gate = None
    status, metrics, _ = http("GET", url + "/metrics")
    text = metrics.decode()
    assert status == 200 and "kazetts_queue_rejections_total 1" in text and "kazetts_cancelled_total 1" in text
    assert "kazetts_first_audio_seconds_count" in text and "kazetts_real_time_factor" in text


def test_max_batch_runs_requests_at_once_and_queues_beyond(tiny_gguf):
    """--max-batch 2: two requests run together (each the audio it gets alone), a third waits in
    the queue, a fourth gets 429 with Retry-After; /metrics and /health say so."""
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32")
    engine = GatedTTS(TTS(talker, mmproj, threads=2, codec_weights="f32", max_batch=2))
    app = make_app(lambda: engine, ServerOptions(max_frames=FRAMES, chunk_frames=1, max_queue=1, max_batch=2))
    body = json.dumps({"model": "tts-1", "input": "Hello there.", "voice": "vivian", "response_format": "pcm"}).encode()
    with ServerThread(app) as url:
        assert wait_ready(url)
        state = app[SERVER]
        status, alone, _ = http("POST", url + "/v1/audio/speech", body)
        assert status == 200 and len(alone) == FRAMES * FRAME_BYTES
        engine.gate = threading.Event()
        results: dict = {}
        try:
            running = [
                urllib.request.urlopen(
                    urllib.request.Request(url + "/v1/audio/speech", data=body, method="POST"), timeout=60
                )
                for _ in range(2)
            ]
            firsts = [r.read(FRAME_BYTES) for r in running]  # both hold a seat, each held after a frame
            assert state.worker.running == 2
            waiter = threading.Thread(target=lambda: results.update(c=http("POST", url + "/v1/audio/speech", body)))
            waiter.start()
            while state.worker.depth < 1:
                time.sleep(0.05)
            status, _, headers = http("POST", url + "/v1/audio/speech", body)
            assert status == 429 and int(headers["Retry-After"]) >= 1
            text = http("GET", url + "/metrics")[1].decode()
            assert "kazetts_batch_size 2" in text and "kazetts_max_batch 2" in text and "kazetts_queue_depth 1" in text
            health = json.loads(http("GET", url + "/health")[1])
            assert health["running"] == 2 and health["max_batch"] == 2 and health["queue"] == 1
            engine.gate.set()
            outs = [first + r.read() for first, r in zip(firsts, running)]
            waiter.join(120)
        finally:
            engine.gate.set()
            engine.gate = None
        assert outs == [alone, alone] and results["c"][0] == 200 and results["c"][1] == alone
        text = http("GET", url + "/metrics")[1].decode()
        assert "kazetts_request_real_time_factor_count 4" in text


# -- bad requests -------------------------------------------------------------------------------------
BAD = [
    (b"{not json", "invalid_json", None),
    (b"[1, 2]", "invalid_json", None),
    (json.dumps({"model": "tts-1", "voice": "vivian"}).encode(), "missing_required_parameter", "input"),
    (
        json.dumps({"model": "tts-1", "voice": "vivian", "input": "x" * 100_000}).encode(),
        "string_above_max_length",
        "input",
    ),
    (json.dumps({"model": "tts-1", "voice": "nobody", "input": "Hi."}).encode(), "voice_not_found", "voice"),
    (json.dumps({"model": "tts-1", "voice": 3, "input": "Hi."}).encode(), "invalid_type", "voice"),
    (json.dumps({"model": "tts-1", "voice": {"name": "x"}, "input": "Hi."}).encode(), "invalid_type", "voice"),
    (json.dumps({"model": "tts-1", "input": 5}).encode(), "invalid_type", "input"),
    (json.dumps({"model": "tts-1", "input": "Hi.", "speed": "fast"}).encode(), "invalid_type", "speed"),
    (json.dumps({"model": "tts-1", "input": "Hi.", "speed": True}).encode(), "invalid_type", "speed"),
    (json.dumps({"model": "tts-1", "input": "Hi.", "seed": "x"}).encode(), "invalid_type", "seed"),
    (json.dumps({"model": "tts-1", "input": "Hi.", "speed": 0}).encode(), "invalid_value", "speed"),
    (json.dumps({"model": "tts-1", "input": "Hi.", "speed": 10}).encode(), "invalid_value", "speed"),
    (
        json.dumps({"model": "tts-1", "input": "Hi.", "response_format": "ogg"}).encode(),
        "unsupported_format",
        "response_format",
    ),
    (
        json.dumps({"model": "tts-1", "input": "Hi.", "response_format": "aac"}).encode(),
        "unsupported_format",
        "response_format",
    ),
    (
        json.dumps({"model": "tts-1", "input": "Hi.", "stream_format": "chunks"}).encode(),
        "invalid_value",
        "stream_format",
    ),
    (json.dumps({"model": "tts-1", "input": "Hi.", "language": "klingon"}).encode(), "invalid_value", "language"),
    (json.dumps({"model": "tts-1", "input": "   "}).encode(), "empty_input", "input"),
    (json.dumps({"model": "tts-1", "input": "Hi.", "temperature": 0}).encode(), "invalid_value", "temperature"),
    (json.dumps({"model": "tts-1", "input": "Hi.", "temperature": "hot"}).encode(), "invalid_type", "temperature"),
    (json.dumps({"model": "tts-1", "input": "Hi.", "top_k": 2.5}).encode(), "invalid_type", "top_k"),
    (json.dumps({"model": "tts-1", "input": "Hi.", "top_p": 1.5}).encode(), "invalid_value", "top_p"),
    (
        json.dumps({"model": "tts-1", "input": "Hi.", "repetition_penalty": -1}).encode(),
        "invalid_value",
        "repetition_penalty",
    ),
    (
        json.dumps({"model": "tts-1", "input": "Hi.", "cp_top_k": -1}).encode(),
        "invalid_value",
        "cp_top_k",
    ),
    (  # an old name of a field is the field: the message names the field
        json.dumps({"model": "tts-1", "input": "Hi.", "subtalker_top_k": -1}).encode(),
        "invalid_value",
        "cp_top_k",
    ),
    # what Python's decoder and number conversions raise on must not be a 500
    (b"[" * 5000 + b"]" * 5000, "invalid_json", None),  # RecursionError
    (b'{"model": "tts-1", "input": "Hi.", "speed": 1' + b"0" * 400 + b"}", "invalid_value", "speed"),  # OverflowError
    (b'{"model": "tts-1", "input": "Hi.", "temperature": 1' + b"0" * 400 + b"}", "invalid_value", "temperature"),
    (b'{"model": "tts-1", "input": "Hi.", "seed": 1' + b"0" * 5000 + b"}", "invalid_value", "seed"),  # 4300 digits
    (b'{"model": "tts-1", "input": "Hi.", "top_p": -1' + b"0" * 5000 + b"}", "invalid_value", "top_p"),
    (json.dumps({"model": "tts-1", "input": "Hi.", "temperature": 1e308}).encode(), "invalid_value", "temperature"),
]


def test_bad_requests_are_4xx_in_openai_shape_and_the_server_keeps_serving(server):
    url, _ = server
    for body, code, param in BAD:
        status, answer, _ = http("POST", url + "/v1/audio/speech", body, {"Content-Type": "application/json"})
        error = assert_openai_error(status, answer, 400)
        assert (error["code"], error["param"]) == (code, param), (body[:60], error)
        assert error["type"] == "invalid_request_error"
        assert "\n" not in error["message"] and len(error["message"]) < 200, error["message"]
        assert param is None or param in error["message"], error["message"]
    assert_openai_error(*http("GET", url + "/v1/nothing")[:2], 404)
    page = {"Origin": "https://example.com", "Content-Type": "text/plain"}
    good = json.dumps({"model": "tts-1", "input": "Hi."}).encode()
    assert (
        assert_openai_error(*http("POST", url + "/v1/audio/speech", good, page)[:2], 403)["code"]
        == "origin_not_allowed"
    )
    assert http("GET", url + "/v1/audio/voices", None, {"Origin": "http://localhost:3000"})[0] == 200
    bad_origin = assert_openai_error(*http("POST", url + "/v1/audio/speech", good, {"Origin": "http://[::1"})[:2], 400)
    assert bad_origin["code"] == "invalid_origin" and "Origin" in bad_origin["message"]
    assert_openai_error(*http("GET", url + "/v1/audio/speech")[:2], 405)
    assert_openai_error(*http("POST", url + "/v1/audio/speech", b"x" * (2 << 20))[:2], 413)
    with pytest.raises(openai.BadRequestError) as bad:
        client(url).audio.speech.create(model="tts-1", voice="nobody", input="Hi.")
    assert bad.value.body["param"] == "voice" and "vivian" in bad.value.body["message"]
    assert len(speech(client(url), "pcm")) == FRAMES * FRAME_BYTES, "still serving"


def test_unwritable_format_lists_the_writable_ones():
    with pytest.raises(ApiError) as refused:
        parse_speech(
            {"input": "Hi.", "response_format": "mp3"},
            formats=["wav", "pcm", "flac", "opus"],
            default_format="wav",
            resolve_voice=lambda name: {},
            languages=["auto"],
            takes_instruct=False,
        )
    assert refused.value.status == 400 and "['wav', 'pcm', 'flac', 'opus']" in refused.value.message
    assert "libsndfile" in refused.value.message


# -- what the front-ends send -------------------------------------------------------------------------
def test_open_webui_and_sillytavern_requests(server):
    url, state = server
    for name in ("open_webui", "open_webui_wav", "sillytavern"):
        case = FIXTURES[name]
        status, data, headers = http(
            "POST", url + "/v1/audio/speech", json.dumps(case["body"]).encode(), case["headers"]
        )
        fmt = case["body"].get("response_format", state.default_format)
        assert status == 200 and headers["Content-Type"] == {"mp3": "audio/mpeg", "wav": "audio/wav"}[fmt], name
        audio = decode(fmt, data)
        expected = FRAMES * 1920 / case["body"].get("speed", 1.0)
        assert abs(len(audio) - expected) <= (2400 if fmt == "mp3" else 0), (name, len(audio), expected)
    voices = json.loads(http("GET", url + "/v1/audio/voices")[1])["voices"]
    assert {"id": "vivian", "name": "vivian"}.items() <= voices[[v["id"] for v in voices].index("vivian")].items()
    models = json.loads(http("GET", url + "/v1/audio/models")[1])["models"]
    assert "tts-1" in [m["id"] for m in models]
    listed = client(url).models.list()
    assert "tts-1" in [m.id for m in listed.data]


def test_speed_stretches_the_response(server):
    url, _ = server
    slow = decode("pcm", speech(client(url), "pcm", speed=0.5))
    fast = decode("pcm", speech(client(url), "pcm", speed=2.0))
    assert len(slow) == 2 * FRAMES * 1920 and len(fast) == FRAMES * 1920 // 2


# -- loading, keys --------------------------------------------------------------------------------------
def test_health_is_503_while_loading_and_the_key_is_checked():
    loaded = threading.Event()

    def load():
        loaded.wait(30)
        raise RuntimeError("no model here")

    app = make_app(load, ServerOptions(api_key="sk-secret"))
    with ServerThread(app) as url:
        status, body, headers = http("GET", url + "/health")
        assert status == 503 and json.loads(body)["status"] == "loading" and headers["Retry-After"]
        with pytest.raises(openai.AuthenticationError):
            client(url, "wrong").audio.speech.create(model="tts-1", voice="x", input="Hi.")
        with pytest.raises(openai.InternalServerError) as loading:
            client(url, "sk-secret").audio.speech.create(model="tts-1", voice="x", input="Hi.")
        assert loading.value.status_code == 503 and loading.value.body["code"] == "model_loading"
        loaded.set()
        while (
            http("GET", url + "/health")[0] == 503
            and json.loads(http("GET", url + "/health")[1])["status"] == "loading"
        ):
            time.sleep(0.05)
        status, body, _ = http("GET", url + "/health")
        assert status == 503 and "no model here" in json.loads(body)["error"]["message"]


# -- text streamed in -----------------------------------------------------------------------------------
TEXT = "Hello there, this is text streamed in word by word."


def test_websocket_text_stream_speaks_before_the_text_ends(server, engine):
    aiohttp = pytest.importorskip("aiohttp")
    url, _ = server
    words = TEXT.split(" ")
    start = {"type": "start", "voice": "vivian", "language": "english", "response_format": "pcm", "seed": 11}

    async def run():
        audio, sent = b"", 0
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(url.replace("http", "ws") + "/v1/audio/speech/stream") as ws:
                await ws.send_json(start)
                for word in words[:3]:
                    await ws.send_json({"type": "text", "text": word + " "})
                    sent += 1
                first = await ws.receive(timeout=120)  # no more text until audio came
                assert first.type == aiohttp.WSMsgType.BINARY and sent < len(words)
                audio += first.data
                await ws.send_json({"type": "text", "text": " ".join(words[3:])})
                await ws.send_json({"type": "end"})
                async for message in ws:
                    if message.type == aiohttp.WSMsgType.BINARY:
                        audio += message.data
                    else:
                        event = json.loads(message.data)
                        assert event["type"] == "speech.audio.done", event
                        break
        return audio, event["usage"]

    streamed, usage = asyncio.run(run())
    assert usage["input_tokens"] == len(engine.talker.tokenize(TEXT)) > 0, "the tokens of the text streamed in"
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    whole = (
        client(url)
        .audio.speech.create(
            model="tts-1",
            voice="vivian",
            input=TEXT,
            response_format="pcm",
            extra_body={"seed": 11, "language": "english"},
        )
        .content
    )
    assert streamed == whole, "same seed, same text: the same audio, streamed in or not"


def test_websocket_refuses_a_bad_start_and_the_example_client_works(server, tmp_path):
    aiohttp = pytest.importorskip("aiohttp")
    url, _ = server
    ws_url = url.replace("http", "ws") + "/v1/audio/speech/stream"

    async def bad():
        async with aiohttp.ClientSession() as session, session.ws_connect(ws_url) as ws:
            await ws.send_json({"type": "start", "voice": "nobody"})
            return json.loads((await ws.receive(timeout=30)).data)

    event = asyncio.run(bad())
    assert event["type"] == "error" and event["error"]["param"] == "voice"
    out = tmp_path / "client.wav"
    run = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "stream_text_client.py"),
            "--url",
            ws_url,
            "--text",
            "Bonjour, ceci est un test.",
            "--delay",
            "0",
            "--voice",
            "vivian",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    audio, rate = soundfile.read(out)
    assert rate == 24000 and len(audio) == FRAMES * 1920 and "first audio after" in run.stderr


def stream_session(url: str, messages: list) -> tuple[list[dict], int | None, int]:
    """Sends `messages` on the text-streaming WebSocket (a dict as JSON, bytes as a binary
    message, a str as it is), then reads until the server closes: its JSON events, its close
    code and the bytes of audio it sent."""
    aiohttp = pytest.importorskip("aiohttp")

    async def run():
        events, audio = [], 0
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(url.replace("http", "ws") + "/v1/audio/speech/stream") as ws:
                for message in messages:
                    if isinstance(message, dict):
                        await ws.send_json(message)
                    elif isinstance(message, bytes):
                        await ws.send_bytes(message)
                    else:
                        await ws.send_str(message)
                for _ in range(1000):
                    message = await ws.receive(timeout=120)
                    if message.type == aiohttp.WSMsgType.TEXT:
                        events.append(json.loads(message.data))
                    elif message.type == aiohttp.WSMsgType.BINARY:
                        audio += len(message.data)
                    else:
                        break
                return events, ws.close_code, audio

    return asyncio.run(run())


START = {"type": "start", "voice": "vivian", "language": "english", "response_format": "pcm", "seed": 11}


def test_websocket_error_is_followed_by_the_close_and_frees_the_model(server):
    """A message the protocol does not have (at the start or later) gets one error event, then
    the close (1008), and the model is free at once: nothing waits for the text timeout."""
    url, state = server
    for messages, param, code in [
        ([{"type": "text"}], "type", "invalid_message"),  # a first message that is not a start
        ([{"type": "text", "text": "Hello there."}], "type", "invalid_message"),
        ([b"\x00\x01"], None, "invalid_message"),  # binary, as the first message
        ([START, {"type": "start"}], "type", "invalid_message"),  # a second start
        ([START, {"type": "speak", "text": "Hi."}], "type", "invalid_message"),
        ([START, {"type": "text", "text": 5}], "text", "invalid_message"),
        ([START, {"type": "text", "text": "Hello"}, b"there"], None, "invalid_message"),  # binary mid-stream
        ([START, "{not json"], None, "invalid_json"),
        # what Python's decoder raises on: an error, not the end of the reader with the model held
        ([START, "[" * 5000 + "]" * 5000], None, "invalid_json"),  # RecursionError
        ([START, "1" * 5000], "type", "invalid_message"),  # ValueError: more than 4300 digits
        ([START, '{"type": "text", "text": ' + "1" * 5000 + "}"], "text", "invalid_message"),
    ]:
        events, close_code, _ = stream_session(url, messages)
        assert [e["type"] for e in events] == ["error"] and close_code == 1008, (messages, events, close_code)
        assert (events[0]["error"]["param"], events[0]["error"]["code"]) == (param, code), (messages, events)
        assert wait_free(state), f"the model is still held after {messages}"


def test_websocket_text_is_limited_in_all(strict):
    """max_input_chars bounds the whole text of a stream, the start's input counted."""
    url, state = strict
    start = {**START, "input": "x" * (LIMIT - 5)}
    for messages, param, code in [
        ([{**START, "input": "x" * (LIMIT + 1)}], "input", "string_above_max_length"),
        ([start, {"type": "text", "text": "123456"}], "text", "string_above_max_length"),
        ([start, {"type": "text", "text": "1234"}, {"type": "text", "text": "56"}], "text", "string_above_max_length"),
    ]:
        events, close_code, _ = stream_session(url, messages)
        errors = [e for e in events if e["type"] == "error"]
        assert len(errors) == 1 and events[-1] is errors[0] and close_code == 1008, (messages[-1], events)
        assert (errors[0]["error"]["param"], errors[0]["error"]["code"]) == (param, code), errors
        assert wait_free(state), f"the model is still held after {messages[-1]}"
    status, body, _ = http("POST", url + "/v1/audio/speech", json.dumps({"input": "x" * (LIMIT + 1)}).encode())
    error = assert_openai_error(status, body, 400)
    assert error["param"] == "input" and f"the limit is {LIMIT}" in error["message"]
    # the text up to the limit is spoken
    events, close_code, audio = stream_session(url, [start, {"type": "text", "text": "12345"}, {"type": "end"}])
    assert [e["type"] for e in events] == ["speech.audio.done"] and close_code == 1000 and audio > 0


def test_a_client_that_sends_half_a_request_is_disconnected(strict):
    """read_timeout (1 s here): half a header gets the connection closed, half a body a 408;
    each socket waits 30 s at the most."""
    url, _ = strict
    port = int(url.rsplit(":", 1)[1])
    head = b"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    sent = [head + b"Content-Ty"] * 3 + [head + b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"in']
    sockets = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in sent]
    try:
        for sock, data in zip(sockets, sent):
            sock.sendall(data)
        answers = []
        for sock in sockets:
            answer = b""
            for _ in range(100):
                data = sock.recv(65536)  # socket.timeout (a failure) after 30 s
                answer += data
                if not data or b"request_timeout" in answer:
                    break
            answers.append(answer)
    finally:
        for sock in sockets:
            sock.close()
    assert answers[:3] == [b""] * 3, "half a header: closed without an answer"
    assert answers[3].startswith(b"HTTP/1.1 408") and b"the request body did not arrive within 1 s" in answers[3]


def test_kazetts_serve_command(tiny_gguf):
    """The command: binds 127.0.0.1, answers /health once loaded, speaks, stops on SIGTERM."""
    talker, _ = tiny_gguf("tiny", "custom_voice", "f32")
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kazetts",
            "serve",
            "--model",
            str(talker.parent),
            "--port",
            str(port),
            "--max-frames",
            "2",
            "--api-key",
            "k",
            "--max-input-chars",
            "20",
            "--max-batch",
            "2",
        ],
        cwd=REPO,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        end = time.time() + 120
        while time.time() < end and http("GET", url + "/health")[0] != 200:
            assert process.poll() is None, process.stderr.read().decode()
            time.sleep(0.2)
        audio = (
            client(url, "k")
            .audio.speech.create(model="tts-1", voice="ryan", input="Hi there.", response_format="pcm")
            .content
        )
        assert len(audio) == 2 * FRAME_BYTES
        assert json.loads(http("GET", url + "/health")[1])["max_batch"] == 2
        with pytest.raises(openai.BadRequestError) as long:
            client(url, "k").audio.speech.create(model="tts-1", voice="ryan", input="x" * 21)
        assert long.value.body["param"] == "input" and "the limit is 20" in long.value.body["message"]
    finally:
        process.terminate()
        stderr = process.communicate(timeout=60)[1].decode()
    assert "listening on http://127.0.0.1:" in stderr and "Traceback" not in stderr


def test_kazetts_serve_bad_max_batch_is_one_line():
    run = subprocess.run(
        [sys.executable, "-m", "kazetts", "serve", "--model", "/nonexistent", "--max-batch", "17"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and "--max-batch: must be 1..16, got 17" in run.stderr and "Traceback" not in run.stderr


def test_kazetts_serve_bad_model_dir_is_one_line():
    run = subprocess.run(
        [sys.executable, "-m", "kazetts", "serve", "--model", "/nonexistent"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and "exactly one *-talker-*.gguf" in run.stderr and "Traceback" not in run.stderr


def test_load_test_script_runs_and_its_checks_fail_on_bad_audio(tiny_gguf, tmp_path):
    """scripts/load_test.py against kazetts serve --max-batch 2 (2 clients, a few seconds): every
    response complete, exit 0; its audio check refuses a cut FLAC and an odd PCM."""
    sys.path.insert(0, str(REPO / "scripts"))
    import load_test

    flac = io.BytesIO()
    soundfile.write(flac, np.sin(np.arange(4800) / 10).astype(np.float32), 24000, format="FLAC")
    assert load_test.audio_seconds("flac", False, flac.getvalue()) == pytest.approx(0.2)
    assert load_test.audio_seconds("flac", False, flac.getvalue()[:200]) == 0
    assert load_test.audio_seconds("pcm", False, b"\0" * 7) == 0
    talker, _ = tiny_gguf("tiny", "custom_voice", "f32")
    out = tmp_path / "load.json"
    run = subprocess.run(
        [sys.executable, "scripts/load_test.py", "--model", str(talker.parent), "--clients", "2", "--seconds", "6"]
        + [
            "--max-frames",
            "2",
            "--max-batch",
            "2",
            "--json",
            str(out),
            "--rss-growth-mb",
            "1e9",
        ],  # (a 6 s run's RSS says nothing)
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    figures = json.loads(out.read_text())
    assert figures["max_batch"] == 2 and figures["served_complete"] >= 1 and figures["bad_audio"] == 0
