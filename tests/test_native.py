"""libkazetts loads beside llama-cpp-python's ggml and speaks its C ABI conventions."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import llama_cpp
import pytest

from kazetts import native


def test_library_loads_with_matching_abi():
    lib = native.library()
    assert lib.kz_abi_version() == native.ABI_VERSION
    assert native.library() is lib, "loaded once per process"


@pytest.mark.parametrize(
    "status, name", [(0, "ok"), (1, "invalid argument"), (3, "bad model file"), (99, "unknown status")]
)
def test_status_names(status, name):
    assert native.library().kz_status_name(status).decode() == name


def test_check_raises_with_status_and_message():
    native.check(0)
    with pytest.raises(native.NativeError, match="bad model file: missing tensor x") as info:
        native.check(3, b"missing tensor x")
    assert info.value.status == 3


def test_library_records_the_ggml_it_runs_with():
    lib = native.library()
    assert native.built_with(lib) == native.running_with(lib)
    assert native.built_with(lib).startswith(f"llama-cpp-python {llama_cpp.__version__}, ggml ")


def test_missing_library_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv(native.LIB_ENV, str(tmp_path / "nope.so"))
    monkeypatch.setattr(native, "_LIBRARY", None)
    with pytest.raises(native.NativeLibraryError, match="does not exist.*pip install --force-reinstall"):
        native.library()


def test_another_llama_cpp_python_is_refused_with_what_to_reinstall(monkeypatch):
    """llama-cpp-python upgraded after kazetts was built (simulated: the process reports another
    version), so the ggml in the process is not the one libkazetts was compiled against."""
    monkeypatch.setattr(native, "_LIBRARY", None)
    monkeypatch.setattr(llama_cpp, "__version__", "0.3.99")
    with pytest.raises(native.NativeLibraryError) as info:
        native.library()
    message = str(info.value)
    assert f"built against {native.built_with(ctypes.CDLL(str(native.library_path())))}, but" in message
    assert "this process runs llama-cpp-python 0.3.99, ggml " in message
    assert "pip install --force-reinstall" in message and "make setup" in message


def test_mismatch_is_a_one_line_cli_error(tiny_gguf, tmp_path):
    model = tiny_gguf()[0].parent
    code = (
        "import sys, llama_cpp; llama_cpp.__version__ = '0.3.99'; from kazetts.cli.main import main; "
        f"sys.exit(main(['say', 'Bonjour.', '-o', {str(tmp_path / 'out.wav')!r}, '--model', {str(model)!r}]))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1 and "kazetts say: error:" in run.stderr and "0.3.99" in run.stderr
    assert not (tmp_path / "out.wav").exists()
