"""Nothing lost: what `kazetts say -o` and `kazetts enroll -o` may write over (kazetts.engine.output_file).

Each case below once destroyed a file: a device node replaced by a WAV (as root), the recording
or the model's own GGUF replaced by a voice, a file chosen by whoever planted a symlink at the
fixed `<out>.part` name. Device nodes are made in tmp_path (mknod, as root), never /dev's own,
so that a regression cannot damage the machine that runs the test."""

from __future__ import annotations

import os
import pathlib
import shutil
import stat
import subprocess
import sys
import threading

import pytest

from conftest import DUMPS, REPO, kazetts_cli, one_line_error

SAY = ["Hello there.", "--speaker", "vivian", "--greedy", "--max-frames", "3"]
RECORDING = DUMPS / "recordings" / "ref_en_16k.wav"


@pytest.fixture(scope="module")
def model_dir(tiny_gguf, tmp_path_factory):
    """A copy of the tiny CustomVoice model's directory (tests try to overwrite its files)."""
    out = tmp_path_factory.mktemp("cv-model")
    for f in tiny_gguf("tiny", "custom_voice", "f32"):
        shutil.copy(f, out / f.name)
    return out


@pytest.fixture(scope="module")
def base_dir(tiny_gguf, tmp_path_factory):
    """A copy of the tiny Base model's directory (tests may try to overwrite its files)."""
    out = tmp_path_factory.mktemp("base-model")
    for f in tiny_gguf("tiny", "base", "f32"):
        shutil.copy(f, out / f.name)
    return out


def device(path: pathlib.Path, minor: int, kind: int = stat.S_IFCHR, major: int = 1) -> pathlib.Path:
    """A character device like /dev/null (minor 3) or /dev/full (minor 7), in the test's folder."""
    try:
        os.mknod(path, 0o666 | kind, os.makedev(major, minor))
    except PermissionError:
        pytest.skip("mknod needs root: the device-node cases run as root (CI does)")
    return path


def test_say_to_a_device_writes_through_it(model_dir, tmp_path):
    null = device(tmp_path / "null", 3)
    result = kazetts_cli("say", *SAY, "-o", null, "--model", model_dir)
    assert result.returncode == 0, result.stderr.decode()
    assert stat.S_ISCHR(os.stat(null).st_mode), "the device node was replaced by a regular file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


def test_say_to_a_full_device_says_no_space(model_dir, tmp_path):
    full = device(tmp_path / "full", 7)
    one_line_error(kazetts_cli("say", *SAY, "-o", full, "--model", model_dir), "no space left on device")
    assert stat.S_ISCHR(os.stat(full).st_mode)


def test_say_to_a_fifo_streams_the_wav_into_it(model_dir, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    result = kazetts_cli("say", *SAY, "-o", fifo, "--model", model_dir)
    reader.join(60)
    assert result.returncode == 0, result.stderr.decode()
    assert received and received[0][:4] == b"RIFF" and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_say_writes_through_its_own_stdout_by_name(model_dir, tmp_path):
    """-o /dev/fd/1 (or /dev/stdout) is this process's output stream, not a file to replace."""
    out = tmp_path / "redirected.wav"
    with open(out, "wb") as stdout:
        result = subprocess.run(
            [sys.executable, "-m", "kazetts", "say", *SAY, "-o", "/dev/fd/1", "--model", str(model_dir)],
            stdout=stdout,
            stderr=subprocess.PIPE,
            cwd=REPO,
            timeout=600,
        )
    assert result.returncode == 0, result.stderr.decode()
    assert out.read_bytes()[:4] == b"RIFF" and sorted(p.name for p in tmp_path.iterdir()) == ["redirected.wav"]


def test_say_keeps_a_symbolic_link_and_replaces_what_it_points_to(model_dir, tmp_path):
    real, link = tmp_path / "real.wav", tmp_path / "link.wav"
    real.write_bytes(b"old audio")
    link.symlink_to(real)
    result = kazetts_cli("say", *SAY, "-o", link, "--model", model_dir)
    assert result.returncode == 0, result.stderr.decode()
    assert link.is_symlink() and real.read_bytes()[:4] == b"RIFF"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.wav", "real.wav"]


def test_say_refuses_a_block_device(model_dir, tmp_path):
    block = device(tmp_path / "disk", 0, stat.S_IFBLK, major=240)  # a local-use major: no driver behind it
    one_line_error(kazetts_cli("say", *SAY, "-o", block, "--model", model_dir), "is a block device")


def test_long_output_names_are_written(model_dir, tmp_path):
    out = tmp_path / ("n" * 250 + ".wav")  # 254 bytes: a valid name, too long for a prefixed temporary one
    result = kazetts_cli("say", *SAY, "-o", out, "--model", model_dir)
    assert result.returncode == 0, result.stderr.decode()
    assert out.read_bytes()[:4] == b"RIFF"


def test_say_never_writes_over_its_own_input(model_dir, tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("Hello there.")
    one_line_error(
        kazetts_cli("say", "--text-file", text, *SAY[1:], "-o", text, "--model", model_dir),
        "is also an input of this command",
    )
    assert text.read_text() == "Hello there."
    talker = next(model_dir.glob("*-talker-*.gguf"))
    size = talker.stat().st_size
    one_line_error(kazetts_cli("say", *SAY, "-o", talker, "--model", model_dir), "is also an input of this command")
    assert talker.stat().st_size == size


def test_enroll_never_writes_over_its_inputs_even_with_force(base_dir, tmp_path):
    recording = shutil.copy(RECORDING, tmp_path / "me.wav")
    before = pathlib.Path(recording).read_bytes()
    one_line_error(
        kazetts_cli("enroll", recording, "-o", recording, "--force", "--model", base_dir),
        "is also an input of this command",
    )
    assert pathlib.Path(recording).read_bytes() == before
    talker = next(base_dir.glob("*-talker-*.gguf"))
    size = talker.stat().st_size
    one_line_error(
        kazetts_cli("enroll", recording, "-o", talker, "--force", "--model", base_dir),
        "is also an input of this command",
    )
    assert talker.stat().st_size == size
    assert sorted(p.name for p in tmp_path.iterdir()) == ["me.wav"]


def test_enroll_replaces_an_existing_file_only_with_force(base_dir, tmp_path):
    out = tmp_path / "me.voice"
    out.write_text("a file the user keeps")
    one_line_error(
        kazetts_cli("enroll", RECORDING, "-o", out, "--model", base_dir), "exists; give --force to replace it"
    )
    assert out.read_text() == "a file the user keeps"
    result = kazetts_cli("enroll", RECORDING, "-o", out, "--force", "--model", base_dir)
    assert result.returncode == 0, result.stderr.decode()
    assert out.read_bytes()[:4] == b"GGUF" and sorted(p.name for p in tmp_path.iterdir()) == ["me.voice"]


def test_enroll_follows_no_symlink_planted_at_a_temporary_name(base_dir, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "atk.voice.part").symlink_to(victim)
    result = kazetts_cli("enroll", RECORDING, "-o", tmp_path / "atk.voice", "--model", base_dir)
    assert result.returncode == 0, result.stderr.decode()
    assert victim.read_text() == "precious"
    assert (tmp_path / "atk.voice").read_bytes()[:4] == b"GGUF"


def test_enroll_into_a_directory_is_refused_and_leaves_nothing(base_dir, tmp_path):
    folder = tmp_path / "voices"
    folder.mkdir()
    one_line_error(kazetts_cli("enroll", RECORDING, "-o", folder, "--force", "--model", base_dir), "is a directory")
    assert list(folder.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["voices"]


def test_a_failed_save_leaves_the_previous_voice(tiny_tts, tmp_path, monkeypatch):
    from kazetts.engine.voice import NativeVoice

    voice = tiny_tts("tiny", "base").enroll(RECORDING)
    out = voice.save(tmp_path / "me.voice")
    before = out.read_bytes()

    def fail(self, path):
        pathlib.Path(path).write_bytes(b"half a file")  # the staging file, partly written
        raise OSError("disk went away")

    monkeypatch.setattr(NativeVoice, "write", fail)
    with pytest.raises(OSError, match="disk went away"):
        voice.save(out)
    assert out.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["me.voice"]
