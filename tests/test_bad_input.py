"""Bad input, through the API and the command line: each request gives correct audio, or one
clear error (a ValueError naming the argument, a kazetts error type naming the file) and, on
the command line, one line on stderr, a non-zero status and nothing written or overwritten."""

from __future__ import annotations

import shutil
import threading

import numpy as np
import pytest

import kazetts
from conftest import REPO, kazetts_cli, one_line_error, rewrite_gguf
from kazetts.engine.tts import TTS

ONE_TOKEN_TEXTS = ["Hello", "你好", "!", "🙂"]


@pytest.fixture(scope="module")
def models(tiny_gguf):
    """models(model_type) -> (talker, mmproj) of the tiny F32 conversion."""
    return lambda model_type="custom_voice": tiny_gguf("tiny", model_type, "f32")


@pytest.fixture(scope="module")
def engines(models):
    cache = {}

    def get(model_type="custom_voice"):
        if model_type not in cache:
            cache[model_type] = TTS(*models(model_type), threads=1, codec_weights="f32")
        return cache[model_type]

    return get


def _audio(result) -> None:
    assert result.codes.ndim == 2 and result.codes.shape[1] == 16 and len(result.codes) >= 1
    assert len(result.audio) == len(result.codes) * 1920 and np.isfinite(result.audio).all()


# -- API ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("out_type", ["f32", "f16", "q8_0"])
def test_rows_of_no_ids_is_an_empty_table(tiny_gguf, out_type):
    """A one-token text in streaming mode asks for the rows of no text ids."""
    from kazetts.stages.talker_file import TalkerFile

    talker = TalkerFile(tiny_gguf("tiny", "custom_voice", out_type)[0])
    assert talker.text([]).shape == (0, talker.hidden_size) and talker.text([]).dtype == np.float32


@pytest.mark.parametrize("streaming", [True, False], ids=["text-streaming", "non-streaming"])
@pytest.mark.parametrize("text", ONE_TOKEN_TEXTS)
def test_one_token_texts_give_audio_in_both_text_modes(engines, text, streaming):
    tts = engines()
    assert len(tts.talker.tokenize(text)) == 1, "the point: a text of one token"
    _audio(tts.synthesize(text, speaker="vivian", greedy=True, max_frames=3, text_streaming=streaming))


def test_control_characters_and_long_text_give_audio(engines):
    tts = engines()
    _audio(tts.synthesize("Hello\x00 there\x07\x1b[31m\r\n\tfriend\x7f.", speaker="vivian", greedy=True, max_frames=3))
    text = "Bonjour tout le monde, voici une phrase. " * 2400  # 98,400 characters (at most MAX_TEXT_CHARS)
    stream = tts.stream(text, speaker="vivian", greedy=True, max_frames=1)
    first = next(stream)  # every piece was checked and prompted before this first frame
    stream.close()
    # a piece of a long text holds its last 10 ms back for the crossfade into the next
    assert first.frames == 1 and len(first.audio) == 1920 - 240 and np.isfinite(first.audio).all()


@pytest.mark.parametrize(
    "model_type, request_, message",
    [
        ("custom_voice", {"text": ""}, "empty text"),
        ("custom_voice", {"text": " \n\t "}, "empty text"),
        ("custom_voice", {"text": None}, "text must be a string"),
        ("custom_voice", {"speaker": "nobody"}, r"unknown speaker 'nobody'; choose one of \['aiden'"),
        (
            "custom_voice",
            {"speaker": "vivian", "language": "klingon"},
            r"unknown language 'klingon'; choose one of \['auto'",
        ),
        ("custom_voice", {}, r"needs a speaker; choose one of \['aiden'"),
        ("custom_voice", {"speaker": "vivian", "max_frames": 0}, "max_frames must be >= 1, got 0"),
        ("custom_voice", {"speaker": "vivian", "seed": -1}, r"seed must be 0\.\.9223372036854775807, got -1"),
        ("custom_voice", {"speaker": "vivian", "chunk_frames": 0}, "chunk_frames must be >= 1"),
        ("voice_design", {}, "needs an instruct"),
        ("voice_design", {"instruct": "calm", "speaker": "vivian"}, "unknown speaker .vivian.; choose one of none"),
        ("voice_design", {"instruct": "calm", "xvector": np.ones(64, np.float32)}, "takes no speaker"),
        ("base", {}, "needs a speaker_embedding"),
        ("base", {"xvector": np.ones(64, np.float32), "instruct": "calm"}, "does not take an instruct"),
        ("base", {"xvector": np.full(64, np.nan, np.float32)}, "NaN or infinite"),
        (
            "base",
            {"xvector": np.ones((1, 64), np.float32)},
            r"has shape \[1, 64\]; this model needs 64 values",
        ),
        ("base", {"xvector": np.ones(63, np.float32)}, "has 63 values; this model needs 64"),
    ],
)
def test_bad_requests_are_value_errors_before_any_compute(engines, model_type, request_, message):
    tts = engines(model_type)
    request_ = {"text": "Hello there.", **request_}
    position = tts.talker.position
    with pytest.raises(ValueError, match=message):
        tts.synthesize(request_.pop("text"), **request_)
    assert tts.talker.position == position


@pytest.mark.parametrize("threads", [0, 10000, 2.5])
def test_threads_out_of_range(models, threads):
    with pytest.raises(ValueError, match=r"threads must be (an integer )?1\.\.512"):
        TTS(*models(), threads=threads)


@pytest.fixture(scope="module")
def bad_files(models, tmp_path_factory):
    """Broken copies of the tiny model's files: name -> (talker, mmproj)."""
    talker, mmproj = models()
    out = tmp_path_factory.mktemp("bad-files")

    def truncated(src, name):
        path = out / name
        path.write_bytes(src.read_bytes()[: src.stat().st_size * 2 // 3])
        return path

    def corrupted(src, name):  # an unknown GGUF version, as a flipped byte of the header gives
        path = out / name
        data = bytearray(src.read_bytes())
        data[4:8] = (999).to_bytes(4, "little")
        path.write_bytes(bytes(data))
        return path

    llama = out / "llama.gguf"
    rewrite_gguf(talker, llama, arch="llama")
    return {
        "token twice in talker": (_token_twice(talker, out / "d-talker-f32.gguf"), mmproj),
        "truncated talker": (truncated(talker, "t-talker-f32.gguf"), mmproj),
        "truncated mmproj": (talker, truncated(mmproj, "t-mmproj-f32.gguf")),
        "corrupted talker": (corrupted(talker, "c-talker-f32.gguf"), mmproj),
        "corrupted mmproj": (talker, corrupted(mmproj, "c-mmproj-f32.gguf")),
        "mmproj as talker": (mmproj, mmproj),
        "talker as mmproj": (talker, talker),
        "llama model as talker": (llama, mmproj),
        "not a GGUF": (talker, REPO / "README.md"),
    }


def _token_twice(talker, path):
    """A copy of a talker GGUF where the first token after token 100 of its length takes token
    100's text, in place (bytes changed as a flipped byte would): llama.cpp's vocabulary loader
    asserts on a token twice, aborting the process unless kazetts refuses the file first."""
    from kazetts.validation.gguf_edit import ARRAY, GGUFLayout, string_places

    kv = GGUFLayout.read(talker).kv("tokenizer.ggml.tokens")
    assert kv.type == ARRAY
    data = bytearray(talker.read_bytes())
    places = string_places(data, kv)
    (a, n) = places[100]
    b = next(at for at, m in places[101:] if m == n)
    data[b : b + n] = data[a : a + n]
    path.write_bytes(bytes(data))
    return path


BAD_FILES = [
    "truncated talker",
    "truncated mmproj",
    "corrupted talker",
    "corrupted mmproj",
    "mmproj as talker",
    "talker as mmproj",
    "llama model as talker",
    "not a GGUF",
    "token twice in talker",
]


@pytest.mark.parametrize("case", BAD_FILES)
def test_bad_files_are_kazetts_errors(bad_files, case):
    talker, mmproj = bad_files[case]
    with pytest.raises(kazetts.KazettsError) as error:
        TTS(str(talker), str(mmproj), threads=1)
    assert str(talker) in str(error.value) or str(mmproj) in str(error.value), str(error.value)


@pytest.mark.parametrize("case", BAD_FILES)
def test_bad_files_are_native_engine_errors(bad_files, case):
    """kz_tts_load returns an error naming the file where llama.cpp would abort the host app."""
    from kazetts.engine.native_tts import NativeTTS

    talker, mmproj = bad_files[case]
    with pytest.raises(kazetts.KazettsError) as error:
        NativeTTS(talker, mmproj, threads=1)
    assert str(talker) in str(error.value) or str(mmproj) in str(error.value), str(error.value)


def test_a_token_twice_is_named(bad_files):
    talker, mmproj = bad_files["token twice in talker"]
    with pytest.raises(kazetts.KazettsError, match=r"vocabulary is damaged: token \d+ repeats token 100 "):
        TTS(str(talker), str(mmproj), threads=1)


def test_files_of_two_checkpoints_are_refused(tiny_gguf):
    """Every model of one size has the same shapes: a CustomVoice talker with a Base mmproj (or
    another seed's) would run. Both engines refuse the pair, naming both files and what differs."""
    from kazetts.engine.native_tts import NativeTTS

    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32")
    pairs = {
        "model type": (talker, tiny_gguf("tiny", "base", "f32")[1]),
        "seed": (talker, tiny_gguf("tiny", "custom_voice", "f32", 1)[1]),
    }
    for what, (t, m) in pairs.items():
        for engine in (TTS, NativeTTS):
            with pytest.raises(kazetts.KazettsError, match="come from two different checkpoints") as error:
                engine(str(t), str(m), threads=1)
            message = str(error.value)
            assert str(t) in message and str(m) in message and "custom_voice model" in message, (what, message)
            if what == "model type":
                assert "base model" in message, message


def test_converted_pairs_carry_one_fingerprint(tiny_gguf):
    from kazetts.gguf.header import GGUFHeader

    def fingerprints(*key):
        return [GGUFHeader(f).kv["kazetts.checkpoint_sha256"] for f in tiny_gguf(*key)]

    a, b = fingerprints("tiny", "custom_voice", "f32"), fingerprints("tiny", "custom_voice", "q8_0")
    assert len(set(a + b)) == 1 and len(a[0]) == 64, "one checkpoint: one fingerprint in every file and type"
    assert fingerprints("tiny", "custom_voice", "f32", 1)[0] != a[0]


def test_files_of_two_models_are_refused_by_width_without_fingerprints(tiny_gguf, tmp_path):
    """Files that say nothing of their checkpoint (llama.cpp's converter) keep the width check."""
    talker, _ = tiny_gguf("tiny", "custom_voice", "f32")
    _, other = tiny_gguf("tiny-proj", "custom_voice", "f32")  # its code predictor takes 96-wide states
    anonymous = tmp_path / "anonymous-mmproj-f32.gguf"
    rewrite_gguf(
        other,
        anonymous,
        drop=lambda key: (
            key in ("kazetts.checkpoint_sha256", "kazetts.model_type") or key.startswith("kazetts.source_sha256.")
        ),
    )
    with pytest.raises(kazetts.ModelFileError, match="does not belong to the talker"):
        TTS(str(talker), str(anonymous), threads=1)


# -- one request at a time, deterministic release ------------------------------------------------


def test_a_second_concurrent_stream_is_refused(engines):
    tts = engines()
    first = tts.stream("Hello there.", speaker="vivian", greedy=True, max_frames=3)
    next(first)
    second = tts.stream("Another request.", speaker="ryan", greedy=True, max_frames=3)
    with pytest.raises(kazetts.BusyError, match="one at a time"):
        next(second)
    errors = []
    thread = threading.Thread(target=lambda: errors.extend(_busy(tts)))
    thread.start()
    thread.join()
    assert len(errors) == 1 and isinstance(errors[0], kazetts.BusyError)
    words = tts.stream_text(iter(["Text ", "streamed ", "in."]), speaker="ryan", greedy=True, max_frames=2)
    with pytest.raises(kazetts.BusyError, match="one at a time"):
        next(words)  # text streamed in is a request like any other
    rest = list(first)  # the first request is not disturbed, and frees the engine when done
    assert rest and rest[-1].frames == 3
    _audio(tts.synthesize("Another request.", speaker="ryan", greedy=True, max_frames=2))


def _busy(tts) -> list:
    try:
        next(tts.stream("From another thread.", speaker="ryan", max_frames=2))
    except kazetts.BusyError as e:
        return [e]
    return []


def test_close_and_with_free_native_memory(models):
    with TTS(*models(), threads=1) as tts:
        _audio(tts.synthesize("Hello", speaker="vivian", greedy=True, max_frames=2))
        stages = (tts.talker, tts.code_predictor, tts.codec)
    assert stages[0]._handle is None and stages[1]._handle is None and stages[2]._handle is None
    with pytest.raises(kazetts.KazettsError, match="closed"):
        next(tts.stream("Hello", speaker="vivian"))
    tts.close()  # idempotent

    tts = TTS(*models(), threads=1)
    running = tts.stream("Hello there, a longer request.", speaker="vivian", greedy=True, max_frames=6, chunk_frames=1)
    next(running)
    tts.close()  # while a request runs: it stops at its next chunk, then frees
    assert tts.codec._handle is not None
    with pytest.raises(kazetts.KazettsError, match="closed during the request"):
        next(running)
    assert tts.codec._handle is None and tts.talker._handle is None


# -- command line ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_dirs(models, bad_files, tmp_path_factory):
    """Model directories for --model: the good one, and one per broken file."""
    root = tmp_path_factory.mktemp("model-dirs")
    dirs = {"good": models()[0].parent}
    for case in (
        "truncated talker",
        "truncated mmproj",
        "corrupted talker",
        "corrupted mmproj",
        "token twice in talker",
    ):
        d = root / case.replace(" ", "-")
        d.mkdir()
        for kind, path in zip(("talker", "mmproj"), bad_files[case]):
            shutil.copy(path, d / f"m-{kind}-f32.gguf")
        dirs[case] = d
    misnamed = root / "misnamed"
    misnamed.mkdir()
    shutil.copy(models()[0], misnamed / "m-talker-f32.gguf")
    shutil.copy(models()[1], misnamed / "m-projector.gguf")
    dirs["misnamed mmproj"] = misnamed
    return dirs


SAY = ["Hello there.", "--speaker", "vivian", "--greedy", "--max-frames", "3"]


@pytest.mark.parametrize(
    "args, message",
    [
        ([*SAY, "--threads", "0"], "argument --threads: must be 1..512, got 0"),
        ([*SAY, "--threads", "10000"], "argument --threads: must be 1..512, got 10000"),
        ([*SAY, "--threads", "two"], "argument --threads: must be an integer 1..512, got 'two'"),
        ([*SAY, "--seed", "-3"], "argument --seed: must be 0..9223372036854775807, got -3"),
        ([*SAY[:-1], "0"], "argument --max-frames: must be >= 1, got 0"),
        (["", "--speaker", "vivian"], "empty text"),
        (["Hello", "--speaker", "nobody"], "unknown speaker 'nobody'; choose one of ['aiden'"),
        (["Hello", "--speaker", "vivian", "--language", "klingon"], "unknown language 'klingon'"),
        (["Hello"], "needs a speaker; choose one of"),
        (["Hello", "--text-file", "x.txt", "--speaker", "vivian"], "not both"),
        (["--speaker", "vivian"], "no text"),
        (["Hello", "--xvector", "README.md"], "--xvector README.md: not a .npy array"),
        (["Hello", "--speaker-embedding", "README.md"], "--xvector README.md: not a .npy array"),  # its old name
        (["Hello", "--no-such-option"], "unrecognized arguments: --no-such-option"),
        (["--text-file", "missing.txt", "--speaker", "vivian"], "--text-file missing.txt: No such file or directory"),
        (
            ["--text-file", "tests/fixtures/latin1.txt", "--speaker", "vivian"],
            "--text-file tests/fixtures/latin1.txt is not UTF-8 text (byte 0xe9 at position 3); save it as UTF-8",
        ),
    ],
)
def test_cli_bad_requests_are_one_line_and_write_nothing(model_dirs, tmp_path, args, message):
    out = tmp_path / "out.wav"
    out.write_bytes(b"previous output")
    result = kazetts_cli("say", *args, "-o", out, "--model", model_dirs["good"])
    one_line_error(result, message)
    assert out.read_bytes() == b"previous output" and sorted(tmp_path.iterdir()) == [out]


@pytest.mark.parametrize(
    "case, message",
    [
        ("truncated talker", "t-talker"),
        ("truncated mmproj", "mmproj"),
        ("corrupted talker", "talker"),
        ("corrupted mmproj", "mmproj"),
        ("misnamed mmproj", "exactly one *-mmproj-*.gguf"),
        ("token twice in talker", "the vocabulary is damaged"),
    ],
)
def test_cli_bad_files_are_one_line_and_write_nothing(model_dirs, tmp_path, case, message):
    out = tmp_path / "out.wav"
    out.write_bytes(b"previous output")
    result = kazetts_cli("say", *SAY, "-o", out, "--model", model_dirs[case])
    one_line_error(result, message.replace("t-talker", "talker"))
    assert out.read_bytes() == b"previous output" and sorted(tmp_path.iterdir()) == [out]


def test_cli_unwritable_output_fails_before_compute(model_dirs, tmp_path):
    (tmp_path / "a-file").write_bytes(b"")
    result = kazetts_cli("say", *SAY, "-o", tmp_path / "a-file" / "out.wav", "--model", model_dirs["good"])
    one_line_error(result, "is not a directory")
    result = kazetts_cli("say", *SAY, "-o", tmp_path, "--model", model_dirs["good"])
    one_line_error(result, "is a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_cli_reads_text_from_stdin_and_file_and_replaces_the_output(model_dirs, tmp_path):
    out = tmp_path / "out.wav"
    out.write_bytes(b"previous output")
    result = kazetts_cli("say", "-", *SAY[1:], "-o", out, "--model", model_dirs["good"], input="你好".encode())
    assert result.returncode == 0, result.stderr.decode()
    from_stdin = out.read_bytes()
    assert from_stdin.startswith(b"RIFF") and sorted(tmp_path.iterdir()) == [out]
    (tmp_path / "text.txt").write_text("你好", encoding="utf-8")
    result = kazetts_cli(
        "say", "--text-file", tmp_path / "text.txt", *SAY[1:], "-o", out, "--model", model_dirs["good"]
    )
    assert result.returncode == 0, result.stderr.decode()
    assert out.read_bytes() == from_stdin, "the same text the same way gives the same greedy audio"
