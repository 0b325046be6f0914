"""libkazetts loads beside llama-cpp-python's ggml and speaks its C ABI conventions."""

from __future__ import annotations

import pytest

from kazetts.stages import native


def test_library_loads_with_matching_abi():
    lib = native.library()
    assert lib.kz_abi_version() == native.ABI_VERSION
    assert native.library() is lib, "loaded once per process"


@pytest.mark.parametrize("status, name", [(0, "ok"), (1, "invalid argument"), (3, "bad model file"), (99, "unknown status")])
def test_status_names(status, name):
    assert native.library().kz_status_name(status).decode() == name


def test_check_raises_with_status_and_message():
    native.check(0)
    with pytest.raises(native.NativeError, match="bad model file: missing tensor x") as info:
        native.check(3, b"missing tensor x")
    assert info.value.status == 3


def test_missing_library_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv(native.LIB_ENV, str(tmp_path / "nope.so"))
    monkeypatch.setattr(native, "_LIBRARY", None)
    with pytest.raises(FileNotFoundError, match="make native"):
        native.library()
