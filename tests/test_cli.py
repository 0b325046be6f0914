"""The command line: say (WAV and raw PCM), voices, validate (passing and failing gates), errors."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import soundfile

from conftest import DUMPS
from conftest import kazetts_cli as kazetts


@pytest.fixture(scope="module")
def model_dir(tiny_gguf):
    talker, _ = tiny_gguf("tiny", "custom_voice", "f32")
    return talker.parent


def test_say_writes_a_wav_and_reports_timings(model_dir, tmp_path):
    out = tmp_path / "fr.wav"
    result = kazetts(
        "say",
        "Bonjour ! Le 14 juillet 1789, à Paris.",
        "-o",
        out,
        "--model",
        model_dir,
        "--speaker",
        "vivian",
        "--language",
        "french",
        "--greedy",
        "--max-frames",
        "20",
        "-v",
    )
    assert result.returncode == 0, result.stderr.decode()
    audio, rate = soundfile.read(out)
    stdout = result.stdout.decode()
    assert rate == 24000 and len(audio) % 1920 == 0 and 2 * 1920 <= len(audio) <= 20 * 1920
    assert "first audio after" in stdout and "code_predictor" in stdout and "real-time factor" in stdout


def test_say_to_stdout_is_raw_pcm(model_dir):
    result = kazetts(
        "say",
        "Hello there.",
        "-o",
        "-",
        "--model",
        model_dir,
        "--speaker",
        "ryan",
        "--greedy",
        "--max-frames",
        "6",
        "--stream",
    )
    assert result.returncode == 0, result.stderr.decode()
    pcm = np.frombuffer(result.stdout, dtype="<i2")
    assert len(pcm) % 1920 == 0 and 2 <= len(pcm) // 1920 <= 6 and np.abs(pcm).max() > 0
    assert b"first audio after" in result.stderr


def test_warnings_are_one_line_naming_the_command(model_dir, tmp_path):
    """A piece cut at its budget is a warning in the errors' form, not Python's file:line and source."""
    result = kazetts("say", "Hi.", "-o", tmp_path / "hi.wav", "--model", model_dir, "--speaker", "vivian", "--greedy")
    assert result.returncode == 0, result.stderr.decode()
    assert result.stderr.decode().splitlines() == [
        "kazetts say: warning: piece 1/1 reached its budget of 104 frames without end-of-speech; it was cut there"
    ]


def test_voices_lists_speakers_and_languages(model_dir):
    result = kazetts("voices", model_dir)
    text = result.stdout.decode()
    assert result.returncode == 0 and "vivian" in text and "french" in text and "sichuan" in text


def test_validate_passes_on_exact_model_and_fails_on_a_bad_golden(model_dir, tmp_path):
    good = kazetts("validate", model_dir, DUMPS / "cv_english_stream")
    assert good.returncode == 0, good.stdout.decode() + good.stderr.decode()
    assert b"all gates passed" in good.stdout and b"end-to-end" in good.stdout
    bad_case = tmp_path / "cv_english_stream"
    shutil.copytree(DUMPS / "cv_english_stream", bad_case)
    wave = np.load(bad_case / "waveform.npy")
    np.save(bad_case / "waveform.npy", wave + 1e-2)
    bad = kazetts("validate", model_dir, bad_case)
    assert bad.returncode == 1 and b"FAIL" in bad.stdout and b"gate(s) failed" in bad.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["say", "x", "--model", "/nonexistent"], b"model directory /nonexistent not found: give a directory with one"),
        (["say", "x", "--speaker", "bob"], b"unknown speaker 'bob'"),
        (["say", "   "], b"empty text"),
    ],
)
def test_errors_are_one_line_and_exit_2(model_dir, tmp_path, args, message):
    out = tmp_path / "x.wav"
    args = [*args, "-o", out] + ([] if "--model" in args else ["--model", model_dir])
    result = kazetts(*args)
    assert result.returncode == 2 and message in result.stderr and b"Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1 and not list(tmp_path.iterdir())


def test_say_takes_the_sampling_options(model_dir, tmp_path):
    """--temperature ... --cp-top-p reach the engine: the same seed with other options says
    something else (the old names --subtalker-* the same); a value out of range is refused by
    argparse, naming the option."""
    said = []
    sampling = ["--temperature", "0.7", "--top-k", "5", "--top-p", "0.8", "--repetition-penalty", "1.3"]
    for options in (
        [],
        [*sampling, "--cp-temperature", "1.3", "--cp-top-k", "20", "--cp-top-p", "0.9"],
        [*sampling, "--subtalker-temperature", "1.3", "--subtalker-top-k", "20", "--subtalker-top-p", "0.9"],
    ):
        result = kazetts(
            "say",
            "Hello there.",
            "-o",
            "-",
            "--model",
            model_dir,
            "--speaker",
            "ryan",
            "--seed",
            "3",
            "--max-frames",
            "4",
            *options,
        )
        assert result.returncode == 0, result.stderr.decode()
        said.append(result.stdout)
    assert said[0] != said[1] == said[2]
    for option, value, message in [
        ("--top-p", "1.5", b"top_p must be a number in (0, 1], got 1.5"),
        ("--top-k", "2.5", b"top_k must be an integer >= 0 (0: off), got '2.5'"),
    ]:
        result = kazetts("say", "x", "-o", tmp_path / "x.wav", "--model", model_dir, option, value)
        assert result.returncode == 2 and b"argument " + option.encode() + b": " + message in result.stderr
        assert b"Traceback" not in result.stderr and not list(tmp_path.iterdir())


@pytest.fixture(scope="module")
def base_dir(tiny_gguf):
    return tiny_gguf("tiny", "base", "f32")[0].parent


def test_enroll_then_say_with_the_voice_equals_say_with_the_recording(base_dir, tmp_path):
    from kazetts.validation import goldens

    ref = goldens.recording_path(DUMPS, "en_16k")
    voice = tmp_path / "me.voice"
    result = kazetts("enroll", ref, "-o", voice, "--model", base_dir, "-v")
    assert result.returncode == 0, result.stderr.decode()
    assert b"4.69 s reference, x-vector only, for a base model of hidden size 64" in result.stdout
    assert b"speaker_encoder" in result.stdout and voice.is_file()
    outs = []
    for how in (["--voice", voice], ["--ref-audio", ref]):
        out = tmp_path / f"{how[0][2:]}.wav"
        said = kazetts("say", "Hello there.", "-o", out, "--model", base_dir, "--greedy", "--max-frames", "6", *how)
        assert said.returncode == 0, said.stderr.decode()
        outs.append(soundfile.read(out)[0])
    assert len(outs[0]) >= 1920 and np.array_equal(outs[0], outs[1])


@pytest.mark.parametrize(
    "args, message",
    [
        (["enroll", "REF", "-o", "OUT.voice"], b"needs a Base model; this is a custom_voice model"),
        (["say", "x", "-o", "OUT.wav", "--voice", "/nonexistent.voice"], b"voice file not found"),
        (["say", "x", "-o", "OUT.wav", "--ref-audio", "REF"], b"voice cloning needs a Base model"),
    ],
)
def test_cloning_errors_are_one_line_and_exit_2(model_dir, tmp_path, args, message):
    from kazetts.validation import goldens

    args = [
        str(goldens.recording_path(DUMPS, "en_24k")) if a == "REF" else str(tmp_path / a) if a.startswith("OUT.") else a
        for a in args
    ]
    result = kazetts(*args, "--model", model_dir)
    assert result.returncode == 2 and message in result.stderr and b"Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1 and not list(tmp_path.iterdir())


@pytest.fixture(scope="module")
def other_model_voice(tiny_tts, tmp_path_factory):
    from kazetts.validation import goldens

    path = tmp_path_factory.mktemp("voices") / "proj.voice"
    return tiny_tts("tiny-proj", "base").enroll(goldens.recording_path(DUMPS, "en_24k")).save(path)


@pytest.mark.parametrize(
    "args, message",
    [
        (["enroll", "SILENT", "-o", "OUT.voice"], b"ref_audio: the audio is silent"),
        (["enroll", "EMPTY", "-o", "OUT.voice"], b"ref_audio: the audio is empty"),
        (
            ["enroll", "SHORT", "-o", "OUT.voice"],
            b"ref_audio: the audio is 42 ms long; the speaker encoder needs at least 53 ms",
        ),
        (
            ["enroll", "REF", "-o", "OUT.voice", "--ref-silence", "3"],
            b"ref_silence must be a number of seconds in 0..2",
        ),
        (["say", "x", "-o", "OUT.wav", "--ref-audio", "REF", "--ref-silence", "nan"], b"ref_silence must be"),
        (
            ["say", "x", "-o", "OUT.wav", "--voice", "OTHER"],
            b"made for a base model of hidden size 96, this is a base model of hidden size 64",
        ),
    ],
)
def test_bad_references_are_one_line_errors_on_a_base_model(base_dir, other_model_voice, tmp_path, args, message):
    from kazetts.validation import goldens

    refs = tmp_path / "refs"
    refs.mkdir()
    files = {
        "SILENT": np.zeros(24000, np.float32),
        "EMPTY": np.zeros(0, np.float32),
        "SHORT": np.full(1000, 0.1, np.float32),
    }
    for name, audio in files.items():
        soundfile.write(refs / f"{name}.wav", audio, 24000)
    args = [
        str(refs / f"{a}.wav")
        if a in files
        else str(goldens.recording_path(DUMPS, "en_24k"))
        if a == "REF"
        else str(other_model_voice)
        if a == "OTHER"
        else str(tmp_path / a)
        if a.startswith("OUT.")
        else a
        for a in args
    ]
    result = kazetts(*args, "--model", base_dir)
    assert result.returncode == 2 and message in result.stderr and b"Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["refs"]


def test_enroll_with_ref_silence_says_so_and_keeps_it(base_dir, tmp_path):
    from kazetts.engine.voice import Voice
    from kazetts.validation import goldens

    voice = tmp_path / "me.voice"
    text = goldens.RECORDINGS["en_24k"].text
    result = kazetts(
        "enroll",
        goldens.recording_path(DUMPS, "en_24k"),
        "-o",
        voice,
        "--model",
        base_dir,
        "--ref-text",
        text,
        "--ref-silence",
        "0.5",
    )
    assert result.returncode == 0, result.stderr.decode()
    samples = len(soundfile.read(goldens.recording_path(DUMPS, "en_24k"))[0])
    assert f"{samples / 24000:.2f} s reference + 0.5 s of silence, with reference codes (ICL)".encode() in result.stdout
    saved = Voice.load(voice)
    assert saved.ref_silence == 0.5 and saved.has_icl and len(saved.ref_codes) == -(-(samples + 12000) // 1920)
