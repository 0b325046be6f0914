"""Shared fixtures: the repo paths, the reference environment, tiny synthetic checkpoints."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
DUMPS = REPO / "dumps"
REF_PYTHON = pathlib.Path(os.environ.get("KAZETTS_REF_PYTHON", REPO / ".venv-ref" / "bin" / "python"))
# What a whole run writes under pytest's base temporary directory at most (1.46 GB measured: tiny checkpoints and
# their GGUF files, the venvs of test_pip_install), with some room.
NEEDS_FREE_GB = 3


def pytest_sessionstart(session):
    """Stops the run in one line when the disk is too full for it: with no space left, a hundred
    tests fail or error far from the cause (and pytest itself crashes writing its captures)."""
    base = pathlib.Path(session.config.option.basetemp or tempfile.gettempdir())
    free = shutil.disk_usage(base).free / 2**30
    if free < NEEDS_FREE_GB:
        pytest.exit(
            f"only {free:.1f} GB free on the disk of {base}; the tests need about {NEEDS_FREE_GB} GB: "
            "free some space (old runs: rm -rf /tmp/pytest-of-$USER) and run again",
            returncode=2,
        )


@pytest.fixture(scope="session")
def ref_python() -> pathlib.Path:
    """The reference environment's interpreter; tests that need torch skip without it."""
    if not REF_PYTHON.exists():
        pytest.skip(f"reference environment missing ({REF_PYTHON}): run `make ref`")
    return REF_PYTHON


def run_script(
    python: pathlib.Path | str, script: str, *args: str, timeout: float = 1800
) -> subprocess.CompletedProcess:
    """Run scripts/<script> with the given interpreter; output is captured as text."""
    return subprocess.run(
        [str(python), str(REPO / "scripts" / script), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


@pytest.fixture(scope="session")
def native_tests(tmp_path_factory) -> pathlib.Path:
    """Builds (once per session) native/tests for this host, against the llama-cpp-python of this
    environment and the llama.cpp sources of its release (`make llama-src`): the build directory,
    whose tests/ holds golden_check and talker_slots."""
    import llama_cpp

    cache = pathlib.Path(os.environ.get("KAZETTS_CACHE", pathlib.Path.home() / ".cache" / "kazetts"))
    llama_src = cache / "src" / f"llama_cpp_python-{llama_cpp.__version__}" / "vendor" / "llama.cpp"
    if not (llama_src / "include" / "llama.h").exists():
        pytest.skip(f"llama.cpp sources missing ({llama_src}): run `make llama-src`")
    build = tmp_path_factory.mktemp("native-tests-build")
    lib_dir = pathlib.Path(llama_cpp.__file__).parent / "lib"
    subprocess.run(
        [
            "cmake",
            "-S",
            REPO / "native",
            "-B",
            build,
            "-DKAZETTS_GOLDEN_CHECK=ON",
            f"-DGGML_INCLUDE_DIR={llama_src / 'ggml' / 'include'}",
            f"-DLLAMA_INCLUDE_DIR={llama_src / 'include'}",
            f"-DGGML_LIB_DIR={lib_dir}",
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(["cmake", "--build", build, "-j2"], check=True, capture_output=True)
    return build


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """Builds (once per session) tiny synthetic checkpoints: tiny_checkpoint(preset, type, seed)."""
    from kazetts.synthetic.checkpoint import make_checkpoint

    built: dict = {}

    def get(preset: str = "tiny", model_type: str = "custom_voice", seed: int = 0) -> pathlib.Path:
        key = (preset, model_type, seed)
        if key not in built:
            out = tmp_path_factory.mktemp(f"{preset}-{model_type}-{seed}")
            make_checkpoint(preset, out, model_type, seed)
            built[key] = out
        return built[key]

    return get


@pytest.fixture(scope="session")
def tiny_gguf(tiny_checkpoint, tmp_path_factory):
    """Converts (once per session) a tiny checkpoint: tiny_gguf(preset, type, out_type) -> (talker, mmproj)."""
    from kazetts.tools.convert import convert_checkpoint

    built: dict = {}

    def get(preset: str = "tiny", model_type: str = "custom_voice", out_type: str = "f32", seed: int = 0):
        key = (preset, model_type, out_type, seed)
        if key not in built:
            out = tmp_path_factory.mktemp(f"gguf-{preset}-{model_type}-{out_type}")
            built[key] = convert_checkpoint(tiny_checkpoint(preset, model_type, seed), out, out_type, verbose=False)
        return built[key]

    return get


def kazetts_cli(*args, **run) -> subprocess.CompletedProcess:
    """`python -m kazetts ARGS` from the repository, output captured (run: subprocess.run's options)."""
    return subprocess.run(
        [sys.executable, "-m", "kazetts", *map(str, args)], capture_output=True, cwd=REPO, timeout=600, **run
    )


def one_line_error(result: subprocess.CompletedProcess, message: str) -> None:
    """The command failed as a bad input must: status 2, one line on stderr saying `message`."""
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert len(stderr.splitlines()) == 1 and "Traceback" not in stderr, stderr
    assert message in stderr, stderr


def free_port() -> int:
    """A TCP port of 127.0.0.1 that was free a moment ago (for a server a test starts)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rewrite_gguf(src, out, drop=lambda key: False, data=lambda tensor: tensor.data, arch: str | None = None) -> None:
    """Writes a copy of a GGUF file without the keys `drop` selects, each tensor's data from `data`
    (a file an older converter or llama.cpp's would write, or a doctored one), under `arch`."""
    import gguf
    import numpy as np

    reader = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(out, arch=arch or reader.fields["general.architecture"].contents())
    for name, f in reader.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.alignment") or drop(name):
            continue
        sub = f.types[1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, f.contents(), f.types[0], sub_type=sub)
    for t in reader.tensors:
        w.add_tensor(t.name, np.ascontiguousarray(data(t)), raw_dtype=t.tensor_type)
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()


def golden_request(manifest: dict, arrays: dict) -> dict:
    """The synthesis options (kazetts.Request fields) that reproduce a golden case greedily."""
    case = manifest["case"]
    return dict(
        speaker=case["speaker"],
        language=case["language"],
        instruct=case["instruct"],
        xvector=arrays.get("xvector"),
        text_streaming=not case["non_streaming"],
        greedy=True,
        max_frames=case["max_new_tokens"] - 1,
    )


@pytest.fixture(scope="session")
def mmproj_layout(tiny_gguf):
    """The tiny F32 mmproj as an editable GGUFLayout, for crafting bad files (see `edited`)."""
    from kazetts.validation.gguf_edit import GGUFLayout

    return GGUFLayout.read(tiny_gguf("tiny", "custom_voice", "f32", 0)[1])


def edited(layout, edit, path: pathlib.Path) -> pathlib.Path:
    """A copy of `layout` changed by edit(copy), written to path."""
    copy = layout.copy()
    edit(copy)
    return copy.write(path)


@pytest.fixture(scope="session")
def tiny_tts(tiny_gguf):
    """Loads (once per session) kazetts.TTS on a converted tiny checkpoint, F32 codec: tiny_tts(preset, type, seed)."""
    from kazetts.engine.tts import TTS

    built: dict = {}

    def get(preset: str = "tiny", model_type: str = "custom_voice", seed: int = 0):
        key = (preset, model_type, seed)
        if key not in built:
            talker, mmproj = tiny_gguf(preset, model_type, "f32", seed)
            built[key] = TTS(talker, mmproj, threads=2, codec_weights="f32")
        return built[key]

    return get
