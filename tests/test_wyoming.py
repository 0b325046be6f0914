"""`kazetts wyoming` driven by the wyoming package's own client (AsyncTcpClient) on 127.0.0.1: the
info Home Assistant reads, one-shot and streamed synthesis against TTS.synthesize for the same
seed, the event order Home Assistant 2025.8+ sends, errors, and clients that go away."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import subprocess
import sys
import time

import numpy as np
import pytest
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.event import Event, async_read_event, async_write_event
from wyoming.info import Describe, Info
from wyoming.server import AsyncTcpServer
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

import kazetts
from conftest import REPO, free_port
from kazetts.engine.tts import TTS
from kazetts.engine.voice import ModelFingerprint
from kazetts.errors import KazettsError
from kazetts.request import Request
from kazetts.server.audio_formats import pcm16
from kazetts.server.voices import load_presets
from kazetts.server.wyoming import WyomingOptions, WyomingService

SEED = 11  # every request's (Wyoming requests carry no seed): the audio is reproducible
READ_SECONDS = 120  # turns a server that never answers into a failure; no test measures time
TEXT = "Hello there, this is text streamed in word by word."
# cut anywhere, inside words too, as an LLM's deltas come
CUTS = ["Hel", "lo th", "ere, th", "is is t", "ext str", "eamed in wo", "rd by", " word", "."]
LONG = (
    "This first sentence is long enough to fill a whole piece of streamed text on its own, because the "
    "pieces end at the first sentence end after one hundred and fifty characters. Then a short one."
)


class Borrowed:
    """An engine the test keeps: a worker that stops (a service closed, or one refused at start)
    leaves it open."""

    close = None  # what the worker calls when it stops, if not None

    def __init__(self, tts):
        self._tts = tts

    def __getattr__(self, name):
        return getattr(self._tts, name)


class BreakableTTS(Borrowed):
    """The real engine; with `break_after` set, stream() fails as a native stage would after that
    many chunks."""

    def __init__(self, tts: TTS):
        super().__init__(tts)
        self.break_after: int | None = None

    def stream(self, *args, **kwargs):
        with contextlib.closing(self._tts.stream(*args, **kwargs)) as chunks:
            for count, chunk in enumerate(chunks):
                if count == self.break_after:
                    raise KazettsError("kz_codec_decode failed (status -3)")
                yield chunk


@pytest.fixture(scope="module")
def service(tiny_gguf):
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32")
    tts = TTS(talker, mmproj, threads=2, codec_weights="f32")
    engine = BreakableTTS(tts)
    # a text stream that is not cancelled holds the model for the hour: the next client would time out
    started = WyomingService.start(lambda: engine, WyomingOptions(request=Request(seed=SEED), text_timeout=3600))
    yield started
    started.close()
    tts.close()


def expected(service: WyomingService, text: str, **voice) -> bytes:
    """What the engine itself gives (the worker is idle between requests)."""
    return pcm16(service.worker.tts.synthesize(text, seed=SEED, **voice).audio)


def serve(service: WyomingService, scenario):
    """Runs scenario(port) against the service listening on a free port of 127.0.0.1."""

    async def main():
        port = free_port()
        server = AsyncTcpServer("127.0.0.1", port)
        await server.start(service.connection)
        try:
            return await scenario(port)
        finally:
            await server.stop()

    return asyncio.run(main())


def client(port: int) -> AsyncTcpClient:
    return AsyncTcpClient("127.0.0.1", port)


async def read(connection) -> Event | None:
    return await asyncio.wait_for(connection.read_event(), READ_SECONDS)


async def read_until(connection, last: str) -> list[Event]:
    """Events up to `last` (or an error) included."""
    events = []
    while True:
        event = await read(connection)
        assert event is not None, f"the connection ended after {[e.type for e in events]}"
        events.append(event)
        if event.type in (last, "error"):
            return events


async def describe_then_say(port: int, text: str, voice: str) -> tuple[Info, list[Event]]:
    """The info, then the events of a synthesize in `voice`."""
    async with client(port) as c:
        await c.write_event(Describe().event())
        info = Info.from_event(await read(c))
        await c.write_event(Synthesize(text=text, voice=SynthesizeVoice(name=voice)).event())
        return info, await read_until(c, "audio-stop")


def audio(events: list[Event]) -> bytes:
    return b"".join(event.payload for event in events if AudioChunk.is_type(event.type))


def shape(events: list[Event]) -> list[str]:
    """The event types with each run of audio-chunk counted once."""
    return [kind for kind, _ in itertools.groupby(event.type for event in events)]


# -- describe -------------------------------------------------------------------------------------------
def test_describe_gives_one_streaming_tts_program_with_the_speakers(service):
    async def scenario(port):
        async with client(port) as c:
            await c.write_event(Describe().event())
            return Info.from_event(await read(c))

    info = serve(service, scenario)
    assert len(info.tts) == 1 and not info.asr
    program = info.tts[0]
    assert program.name == "kazetts" and program.installed and program.version == kazetts.__version__
    assert program.supports_synthesize_streaming
    assert program.attribution.url == "https://github.com/QwenLM/Qwen3-TTS"
    assert [voice.name for voice in program.voices] == service.worker.tts.speakers
    assert all(voice.installed and voice.description == voice.name for voice in program.voices)
    # language codes, which Home Assistant matches with a pipeline's language; "auto" is none
    assert program.voices[0].languages == ["zh", "en", "fr", "de", "it", "ja", "ko", "pt", "ru", "es"]


# -- one-shot synthesis ---------------------------------------------------------------------------------
def test_synthesize_is_tts_synthesize_sent_as_frames_are_decoded(service):
    async def scenario(port):
        async with client(port) as c:
            await c.write_event(Synthesize(text=LONG, voice=SynthesizeVoice(name="ryan")).event())
            return await read_until(c, "audio-stop")

    events = serve(service, scenario)
    # one audio-start .. audio-stop for the whole text, though it is said in two pieces: Home
    # Assistant reads a synthesize's audio up to the first audio-stop
    assert shape(events) == ["audio-start", "audio-chunk", "audio-stop"]
    start = AudioStart.from_event(events[0])
    assert (start.rate, start.width, start.channels) == (24000, 2, 1)
    assert audio(events) == expected(service, LONG, speaker="ryan")
    chunks = [AudioChunk.from_event(e) for e in events if AudioChunk.is_type(e.type)]
    assert len(chunks[0].audio) == 1920 * 2, "the first chunk is the first frame alone"
    assert len(chunks) > 2 and all((c.rate, c.width, c.channels) == (24000, 2, 1) for c in chunks)


def test_a_request_without_a_voice_gets_the_defaults_and_a_language_code_is_understood(service):
    async def scenario(port):
        async with client(port) as c:
            await c.write_event(Synthesize(text="Bonjour.").event())
            default = await read_until(c, "audio-stop")
            await c.write_event(Synthesize(text="Bonjour.", voice=SynthesizeVoice(language="fr-FR")).event())
            return default, await read_until(c, "audio-stop")

    default, french = serve(service, scenario)
    assert service.voices.default == "aiden"
    assert audio(default) == expected(service, "Bonjour.", speaker="aiden", language="auto")
    assert audio(french) == expected(service, "Bonjour.", speaker="aiden", language="french")
    assert audio(french) != audio(default)


# -- text streamed in --------------------------------------------------------------------------------------
def test_home_assistant_stream_cut_mid_word_is_the_whole_text(service):
    """Home Assistant 2025.8+'s order: synthesize-start, synthesize-chunk ..., the whole text again
    as a synthesize (for servers that do not stream: ignored here), synthesize-stop."""
    voice = SynthesizeVoice(name="vivian")

    async def scenario(port):
        async with client(port) as c:
            await c.write_event(SynthesizeStart(voice=voice).event())
            for cut in CUTS:
                await c.write_event(SynthesizeChunk(text=cut).event())
            await c.write_event(Synthesize(text="".join(CUTS), voice=voice).event())
            await c.write_event(SynthesizeStop().event())
            events = await read_until(c, "synthesize-stopped")
            await c.write_event(Describe().event())  # nothing else was queued: the next event is the info
            return events, await read(c)

    events, after = serve(service, scenario)
    assert "".join(CUTS) == TEXT
    assert shape(events) == ["audio-start", "audio-chunk", "audio-stop", "synthesize-stopped"]
    assert audio(events) == expected(service, TEXT, speaker="vivian")
    assert Info.is_type(after.type)


def test_audio_starts_before_the_text_ends(service):
    words = TEXT.split(" ")

    async def scenario(port):
        async with client(port) as c:
            await c.write_event(SynthesizeStart(voice=SynthesizeVoice(name="vivian")).event())
            for word in words[:3]:
                await c.write_event(SynthesizeChunk(text=word + " ").event())
            early = []
            while not early or not AudioChunk.is_type(early[-1].type):  # no more text until audio came
                early.append(await read(c))
            await c.write_event(SynthesizeChunk(text=" ".join(words[3:])).event())
            await c.write_event(SynthesizeStop().event())
            return early + await read_until(c, "synthesize-stopped")

    events = serve(service, scenario)
    assert [e.type for e in events[:2]] == ["audio-start", "audio-chunk"]
    assert audio(events) == expected(service, TEXT, speaker="vivian")


def test_each_piece_of_a_long_stream_has_its_own_audio_start_and_stop(service):
    async def scenario(port):
        async with client(port) as c:
            await c.write_event(SynthesizeStart(voice=SynthesizeVoice(name="serena")).event())
            for word in LONG.split(" "):
                await c.write_event(SynthesizeChunk(text=word + " ").event())
            await c.write_event(SynthesizeStop().event())
            return await read_until(c, "synthesize-stopped")

    events = serve(service, scenario)
    assert shape(events) == ["audio-start", "audio-chunk", "audio-stop"] * 2 + ["synthesize-stopped"]


# -- errors ----------------------------------------------------------------------------------------------------
def test_a_refused_request_is_an_error_then_the_end_of_its_connection(service):
    """Home Assistant ignores `error` and waits for audio-stop or the end of the connection, so a
    refused request ends its connection (as wyoming-piper's does); the server goes on."""
    requests = [
        (
            [Synthesize(text="Hi.", voice=SynthesizeVoice(name="nobody"))],
            "unknown voice 'nobody'; choose one of ['aiden'",
        ),
        ([Synthesize(text="  \n")], "empty text: there is nothing to say"),
        (
            [Synthesize(text="Hi.", voice=SynthesizeVoice(language="tlh"))],
            "unknown language 'tlh'; choose one of ['zh'",
        ),
        ([SynthesizeStart(voice=SynthesizeVoice(name="nobody"))], "unknown voice 'nobody'"),
        ([SynthesizeStart(), SynthesizeChunk(text=" "), SynthesizeStop()], "empty text: there is nothing to say"),
    ]

    async def scenario(port):
        answers = []
        for events, _ in requests:
            async with client(port) as c:
                for event in events:
                    await c.write_event(event.event())
                answers.append((await read(c), await read(c)))
        async with client(port) as c:
            await c.write_event(Synthesize(text="Hi.").event())
            return answers, await read_until(c, "audio-stop")

    answers, served = serve(service, scenario)
    for (error, end), (_, message) in zip(answers, requests):
        assert error.type == "error" and error.data["text"].startswith(message), error
        assert "\n" not in error.data["text"] and "Traceback" not in error.data["text"]
        assert end is None, "the connection ends after the error"
    assert shape(served) == ["audio-start", "audio-chunk", "audio-stop"]


def test_lines_that_are_not_events_are_answered_and_the_connection_goes_on(service):
    async def scenario(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        errors = []
        for line in (b"hello\n", b"[1, 2]\n", b'{"type": 3}\n', b'{"type": "synthesize", "data": "x"}\n'):
            writer.write(line)
            errors.append(await asyncio.wait_for(async_read_event(reader), READ_SECONDS))
        for out_of_place in (SynthesizeChunk(text="x").event(), SynthesizeStop().event(), Event("synthesize-chunk")):
            await async_write_event(out_of_place, writer)
            errors.append(await asyncio.wait_for(async_read_event(reader), READ_SECONDS))
        await async_write_event(Event(type="ping"), writer)  # not a TTS event: dropped
        await async_write_event(Synthesize(text="Hi.").event(), writer)
        events = []
        while not events or events[-1].type != "audio-stop":
            events.append(await asyncio.wait_for(async_read_event(reader), READ_SECONDS))
        writer.close()
        return errors, events

    errors, events = serve(service, scenario)
    assert [e.type for e in errors] == ["error"] * 7
    texts = [e.data["text"] for e in errors]
    assert all(t.startswith("not a Wyoming event") for t in texts[:3])
    assert texts[3] == "the data of a synthesize event must be a JSON object"
    assert texts[4:6] == [
        f"{kind} outside a text stream: send synthesize-start first" for kind in ("synthesize-chunk", "synthesize-stop")
    ]
    assert texts[6] == "synthesize-chunk needs a 'text' string"
    assert shape(events) == ["audio-start", "audio-chunk", "audio-stop"]


def test_a_model_failure_is_an_error_and_the_next_client_is_served(service):
    engine = service.worker.tts
    engine.break_after = 2

    async def scenario(port):
        async with client(port) as c:
            await c.write_event(Synthesize(text=TEXT).event())
            failed = await read_until(c, "audio-stop")
            end = await read(c)
        engine.break_after = None
        async with client(port) as c:
            await c.write_event(Synthesize(text="Hi.").event())
            return failed, end, await read_until(c, "audio-stop")

    try:
        failed, end, served = serve(service, scenario)
    finally:
        engine.break_after = None
    assert shape(failed) == ["audio-start", "audio-chunk", "error"] and len(failed) == 4
    assert failed[-1].data == {
        "text": "synthesis failed: KazettsError: kz_codec_decode failed (status -3)",
        "code": "synthesis_failed",
    }
    assert end is None
    assert shape(served) == ["audio-start", "audio-chunk", "audio-stop"]


def test_a_client_that_leaves_mid_stream_frees_the_model(service):
    """The stream waits for text that never comes (for an hour, here), holding the model: only
    the cancel that its client's leaving makes lets the next client be served."""

    async def scenario(port):
        async with client(port) as c:
            await c.write_event(SynthesizeStart(voice=SynthesizeVoice(name="vivian")).event())
            await c.write_event(SynthesizeChunk(text="Hello there, this is").event())
            while not AudioChunk.is_type((await read(c)).type):
                pass
        async with client(port) as c:
            await c.write_event(Synthesize(text="Hi.").event())
            return await read_until(c, "audio-stop")

    assert shape(serve(service, scenario)) == ["audio-start", "audio-chunk", "audio-stop"]
    assert service.worker.depth == 0


# -- cloned voices and voice design presets -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def base_model(tiny_gguf, tmp_path_factory):
    """A Base model and a folder with one voice enrolled on it (from noise: the tiny model's
    speaker encoder takes any sound)."""
    talker, mmproj = tiny_gguf("tiny", "base", "f32")
    tts = TTS(talker, mmproj, threads=2, codec_weights="f32")
    folder = tmp_path_factory.mktemp("voices")
    noise = np.random.default_rng(3).standard_normal(24000).astype(np.float32) * 0.1
    tts.enroll((noise, 24000)).save(folder / "me.voice")
    return tts, folder


def test_every_voice_file_of_the_folder_is_a_voice(base_model):
    tts, folder = base_model
    cloned = WyomingService.start(
        lambda: Borrowed(tts), WyomingOptions(request=Request(seed=SEED)), voice_folder=folder
    )

    try:
        info, events = serve(cloned, lambda port: describe_then_say(port, "Hello.", "me"))
        voices = info.tts[0].voices
        assert [(v.name, v.description) for v in voices] == [("me", "me (cloned voice)")]
        voice = kazetts.Voice.load(folder / "me.voice")
        assert audio(events) == pcm16(tts.synthesize("Hello.", xvector=voice.x_vector, seed=SEED).audio)
    finally:
        cloned.close()


def test_voices_that_do_not_fit_the_model_are_refused_at_start(base_model, tmp_path):
    tts, folder = base_model
    other = kazetts.Voice.load(folder / "me.voice")
    dataclasses.replace(other, model=ModelFingerprint("base", 64, "0" * 64)).save(tmp_path / "other.voice")
    with pytest.raises(ValueError, match=r"other.voice was made for another speaker encoder \(000000000000"):
        WyomingService.start(lambda: Borrowed(tts), WyomingOptions(), voice_folder=tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"^this base model speaks only with cloned voices"):
        WyomingService.start(lambda: Borrowed(tts), WyomingOptions(), voice_folder=empty)


def test_presets_are_voices_of_a_voice_design_model(tiny_gguf, tmp_path):
    talker, mmproj = tiny_gguf("tiny", "voice_design", "f32")
    tts = TTS(talker, mmproj, threads=2, codec_weights="f32")
    path = tmp_path / "presets.json"
    path.write_text(json.dumps({"calm": "A calm, low voice.", "bright": "A bright and quick voice."}))
    designed = WyomingService.start(lambda: tts, WyomingOptions(request=Request(seed=SEED)), presets=load_presets(path))

    try:
        info, events = serve(designed, lambda port: describe_then_say(port, "Hello.", "bright"))
        assert [(v.name, v.description) for v in info.tts[0].voices] == [
            ("calm", "calm (voice design)"),
            ("bright", "bright (voice design)"),
        ]
        assert audio(events) == pcm16(tts.synthesize("Hello.", instruct="A bright and quick voice.", seed=SEED).audio)
    finally:
        designed.close()


def test_bad_presets_and_voices_for_the_wrong_model_are_one_line_errors(service, tmp_path):
    path = tmp_path / "presets.json"
    for content, message in (
        ("{nope", "is not valid JSON"),
        ('["calm"]', "must be a JSON object of voice names"),
        ('{"calm": ""}', "must be a JSON object of voice names"),
    ):
        path.write_text(content)
        with pytest.raises(ValueError, match=message):
            load_presets(path)
    engine = Borrowed(service.worker.tts)
    with pytest.raises(ValueError, match="^presets describe voices for voice_design models; this is a custom_voice"):
        WyomingService.start(lambda: engine, WyomingOptions(), presets={"calm": "A calm voice."})
    with pytest.raises(ValueError, match="are cloned voices, for base models; this is a custom_voice model"):
        WyomingService.start(lambda: engine, WyomingOptions(), voice_folder=tmp_path)
    with pytest.raises(ValueError, match="^unknown default voice 'nobody'"):
        WyomingService.start(lambda: engine, WyomingOptions(default_voice="nobody"))
    with pytest.raises(ValueError, match="^default language: unknown language 'xx'"):
        WyomingService.start(lambda: engine, WyomingOptions(language="xx"))


# -- the command ---------------------------------------------------------------------------------------------------
def test_kazetts_wyoming_command(tiny_gguf):
    """Loads, serves 127.0.0.1, speaks, stops on SIGTERM without a traceback."""
    talker, _ = tiny_gguf("tiny", "custom_voice", "f32")
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kazetts",
            "wyoming",
            "--model",
            str(talker.parent),
            "--uri",
            f"tcp://127.0.0.1:{port}",
            "--max-frames",
            "2",
            "--seed",
            "1",
            "--voice",
            "ryan",
        ],
        cwd=REPO,
        stderr=subprocess.PIPE,
    )

    async def scenario():
        deadline = time.monotonic() + READ_SECONDS
        while True:
            assert process.poll() is None, "the server exited"
            try:
                connection = client(port)
                await connection.connect()
                break
            except OSError:
                assert time.monotonic() < deadline, "the server never listened"
                await asyncio.sleep(0.2)
        async with connection as c:
            await c.write_event(Synthesize(text="Hi there.").event())
            return await read_until(c, "audio-stop")

    try:
        events = asyncio.run(scenario())
        assert shape(events) == ["audio-start", "audio-chunk", "audio-stop"] and len(audio(events)) == 2 * 1920 * 2
    finally:
        process.terminate()
        stderr = process.communicate(timeout=60)[1].decode()
    assert process.returncode == 0 and "Traceback" not in stderr, stderr
    assert f"serving tcp://127.0.0.1:{port}" in stderr and "default ryan" in stderr


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--model", "/nonexistent"], "model directory /nonexistent not found"),
        (["--uri", "http://127.0.0.1:10200"], "--uri 'http://127.0.0.1:10200': give tcp://HOST:PORT"),
    ],
)
def test_kazetts_wyoming_bad_arguments_are_one_line(arguments, message):
    run = subprocess.run(
        [sys.executable, "-m", "kazetts", "wyoming", *arguments], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 2 and message in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
