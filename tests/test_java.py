"""org.kazetts.KazeTts on a desktop JVM: the JNI bridge against the Python engine.

The Python engine answers a few requests (greedy golden cases, sampled ones with the defaults and
with every sampling option changed, emoji text); the Java test
(native/java/test/org/kazetts/KazeTtsTest.java) makes the same requests through KazeTts (whose
Options defaults come from libkazetts) and compares codes and samples exactly, then streams,
cancels from another thread (inside a callback, and from a thread that does not wait for it:
within one frame), synthesizes again, checks that bad arguments are exceptions and closes twice. Needs the JNI
library and jars that `make native` builds when CMake finds a JDK.
"""

from __future__ import annotations

import base64
import shutil
import subprocess

import numpy as np
import pytest

from conftest import DUMPS, REPO, golden_request
from kazetts.engine.tts import TTS
from kazetts.request import OPTIONS
from kazetts.validation import goldens

BUILD = REPO / "build" / "editable"  # the build directory of `make setup` (Makefile: .venv/.native)
GOLDEN_CASES = ["cv_english_stream", "cv_english_nonstream", "cv_dialect_speaker", "fr_accents_digits"]


def _java_build():
    java = shutil.which("java")
    parts = [BUILD / "kazetts.jar", BUILD / "kazetts-tests.jar", BUILD / "libkazetts_jni.so"]
    if java is None:
        pytest.skip("no JVM (java not on PATH): install a JDK (make jdk) and run make native")
    missing = [str(p) for p in parts if not p.exists()]
    assert not missing, f"a JVM is installed but the JNI build is missing {missing}: did CMake find the JDK?"
    return java


def _requests():
    """(name, text, options) of every request the Java test repeats."""
    out = []
    for name in GOLDEN_CASES:
        manifest, arrays = goldens.load_case(DUMPS / name)
        out.append((name, manifest["case"]["text"], golden_request(manifest, arrays)))
    out.append(
        (
            "sampled_seed3",
            "Bonjour ! Le 14 juillet 1789, à Paris.",
            dict(speaker="vivian", language="french", greedy=False, seed=3, max_frames=10),
        )
    )
    out.append(
        (
            "sampled_non_default",
            "Bonjour ! Le 14 juillet 1789, à Paris.",
            dict(
                speaker="vivian",
                language="french",
                greedy=False,
                seed=3,
                max_frames=10,
                temperature=0.7,
                top_k=5,
                top_p=0.8,
                repetition_penalty=1.3,
                cp_temperature=1.3,
                cp_top_k=20,
                cp_top_p=0.9,
            ),
        )
    )
    out.append(("emoji", "Emoji 🙂🎉 ok, 你好！", dict(speaker="ryan", language="auto", greedy=True, max_frames=4)))
    out.append(
        (
            "speed",
            "Bonjour ! Une phrase un peu plus longue.",
            dict(speaker="vivian", language="french", greedy=False, seed=3, max_frames=10, speed=1.6),
        )
    )
    return out


def test_kazetts_java_class_matches_the_python_engine(tiny_gguf, tmp_path):
    java = _java_build()
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32")
    tts = TTS(talker, mmproj, threads=2, codec_weights="f32")
    lines = []
    for name, text, options in _requests():
        result = tts.synthesize(text, **options)
        if name in GOLDEN_CASES:
            assert np.array_equal(result.codes, goldens.load_case(DUMPS / name)[1]["codes"]), name
        result.codes.astype("<i4").tofile(tmp_path / f"{name}.codes")
        result.audio.astype("<f4").tofile(tmp_path / f"{name}.pcm")
        lines.append(
            "\t".join(
                [
                    name,
                    base64.b64encode(text.encode()).decode(),
                    options["speaker"] or "-",
                    options["language"],
                    str(int(options["greedy"])),
                    str(options.get("seed", -1)),
                    str(options["max_frames"]),
                    str(int(options.get("text_streaming", True))),
                    *(str(options.get(name, "-")) for name in (*OPTIONS, "speed")),
                ]
            )
        )
    tts.talker.close()
    (tmp_path / "cases.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    classpath = f"{BUILD / 'kazetts.jar'}:{BUILD / 'kazetts-tests.jar'}"
    run = subprocess.run(
        [
            java,
            f"-Djava.library.path={BUILD}",
            "-cp",
            classpath,
            "org.kazetts.KazeTtsTest",
            str(talker),
            str(mmproj),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    print(run.stdout, run.stderr)
    assert run.returncode == 0 and "ALL PASSED" in run.stdout
    for name, _, _ in _requests():
        assert f"PASS {name} codes" in run.stdout and f"PASS {name} samples" in run.stdout
    for check in (
        "cancel from another thread",
        "synthesize again after cancel",
        "stream equals generate",
        "cancel mid-utterance returns within one frame",
        "synthesize again after an asynchronous cancel",
        "unknown speaker",
        "temperature 0 even when greedy",
        "topP 1.5",
        "x-vector of the wrong length",
        "threads 0",
        "usable after bad requests",
        "close twice",
        "use after close",
        "callback exception propagates",
        "sampled_seed3 text stream codes",
        "sampled_seed3 text stream samples",
        "emoji text stream codes",
        "emoji text stream samples",
        "push after finish",
        "finish twice",
        "generate while a text stream runs",
        "push after close",
        "usable after a closed text stream",
        "empty text stream",
        "text stream with an unknown speaker",
        "text stream cancel",
    ):
        assert f"PASS {check}" in run.stdout


def test_java_voice_reads_and_writes_the_python_voice_files(tmp_path):
    """org.kazetts.Voice over kazetts/voice.h: a file Python wrote loads in Java with the same
    parts and seal, the file Java saves loads in Python, a tampered one is a one-line exception."""
    from kazetts.engine.voice import ModelFingerprint, Voice

    java = _java_build()
    rng = np.random.default_rng(5)
    voice = Voice(
        x_vector=rng.standard_normal(64).astype(np.float32),
        model=ModelFingerprint("base", 64, "e" * 64),
        ref_text="Une référence 🙂.",
        ref_codes=rng.integers(0, 2048, (4, 16), dtype=np.int32),
        ref_seconds=0.32,
    )
    data = voice.save(tmp_path / "python.voice").read_bytes()
    (tmp_path / "python.seal").write_text(voice.payload_sha256())
    voice.x_vector.astype("<f4").tofile(tmp_path / "python.xvector")
    voice.ref_codes.astype("<i4").tofile(tmp_path / "python.codes")
    (tmp_path / "python.text").write_text(voice.ref_text, encoding="utf-8")
    at = data.index(voice.x_vector.astype("<f4").tobytes()[:4])
    (tmp_path / "tampered.voice").write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :])
    classpath = f"{BUILD / 'kazetts.jar'}:{BUILD / 'kazetts-tests.jar'}"
    run = subprocess.run(
        [java, f"-Djava.library.path={BUILD}", "-cp", classpath, "org.kazetts.VoiceTest", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(run.stdout, run.stderr)
    assert run.returncode == 0 and "ALL PASSED" in run.stdout
    back = Voice.load(tmp_path / "java.voice")
    assert back.payload_sha256() == voice.payload_sha256() and back.ref_text == voice.ref_text
    assert (tmp_path / "java.voice").read_bytes() == data, "one writer: the same bytes on both sides"


def test_java_enroll_is_the_python_engines_voice(tiny_gguf, tmp_path):
    """KazeTts.enroll (kz_tts_enroll through JNI) from the 16 kHz recording (ICL) and from 44.1 kHz
    made of the 24 kHz one (x-vector): the voice files Java saves are the Python engine's enroll's,
    byte for byte, and Java's request with the voice gives the Python engine's codes."""
    import soundfile
    import soxr

    from kazetts.engine.voice import ModelFingerprint, Voice

    java = _java_build()
    talker, mmproj = tiny_gguf("tiny", "base", "f32")
    pcm16, _ = soundfile.read(goldens.recording_path(DUMPS, "en_16k"), dtype="float32")
    pcm24, _ = soundfile.read(goldens.recording_path(DUMPS, "en_24k"), dtype="float32")
    pcm44 = np.asarray(soxr.resample(pcm24, 24000, 44100, quality="soxr_hq"), np.float32)
    text = goldens.RECORDINGS["en_16k"].text
    pcm16.astype("<f4").tofile(tmp_path / "pcm16k.f32")
    pcm44.astype("<f4").tofile(tmp_path / "pcm44k.f32")
    (tmp_path / "ref.text").write_text(text, encoding="utf-8")
    foreign = Voice(np.ones(64, np.float32), ModelFingerprint("base", 64, "f" * 64))  # another speaker encoder's
    foreign.save(tmp_path / "foreign.voice")
    classpath = f"{BUILD / 'kazetts.jar'}:{BUILD / 'kazetts-tests.jar'}"
    run = subprocess.run(
        [java, f"-Djava.library.path={BUILD}", "-cp", classpath, "org.kazetts.EnrollTest", talker, mmproj, tmp_path],
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(run.stdout, run.stderr)
    assert run.returncode == 0 and "ALL PASSED" in run.stdout
    assert "PASS a voice of another model" in run.stdout
    tts = TTS(talker, mmproj, threads=2)
    icl, xv = tts.enroll((pcm16, 16000), text), tts.enroll((pcm44, 44100))
    assert (tmp_path / "java_icl.voice").read_bytes() == icl.save(tmp_path / "python_icl.voice").read_bytes()
    assert (tmp_path / "java_xv.voice").read_bytes() == xv.save(tmp_path / "python_xv.voice").read_bytes()
    codes = np.fromfile(tmp_path / "java_icl.codes", "<i4").reshape(-1, 16)
    loaded = Voice.load(tmp_path / "java_icl.voice")
    want = tts.synthesize("Hello there.", voice=loaded, language="english", greedy=True, max_frames=6)
    assert np.array_equal(codes, want.codes)
