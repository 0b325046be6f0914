"""Loads libkazetts, the C++/ggml stages, beside the ggml that llama-cpp-python ships.

llama_cpp is imported first so that its libggml*.so are in the process; libkazetts links the
same files (by soname, RPATH to llama_cpp/lib), so the process holds one ggml.
"""

from __future__ import annotations

import ctypes
import os
import pathlib

import llama_cpp  # noqa: F401  (loads ggml into the process before libkazetts)

ABI_VERSION = 2
LIB_ENV = "KAZETTS_NATIVE_LIB"
_LIBRARY: ctypes.CDLL | None = None


class NativeError(RuntimeError):
    """A native call failed; `status` is the kz_status code."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def library_path() -> pathlib.Path:
    """$KAZETTS_NATIVE_LIB, else the library `make native` puts in the package."""
    return pathlib.Path(os.environ.get(LIB_ENV) or pathlib.Path(__file__).parents[1] / "lib" / "libkazetts.so")


def library() -> ctypes.CDLL:
    """The loaded library (loaded once per process), its ABI version checked."""
    global _LIBRARY
    if _LIBRARY is None:
        path = library_path()
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist: build it with `make native`")
        lib = ctypes.CDLL(str(path))
        lib.kz_abi_version.restype = ctypes.c_int
        lib.kz_status_name.restype = ctypes.c_char_p
        lib.kz_status_name.argtypes = [ctypes.c_int]
        if lib.kz_abi_version() != ABI_VERSION:
            raise ImportError(f"{path} has ABI {lib.kz_abi_version()}, kazetts needs {ABI_VERSION}: rebuild it")
        _LIBRARY = lib
    return _LIBRARY


def bind(signatures: dict[str, tuple]) -> ctypes.CDLL:
    """The library with these functions' (restype, argtypes) set."""
    lib = library()
    for name, (res, args) in signatures.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib


def check(status: int, message: bytes | str = b"") -> None:
    """Raises NativeError for a non-zero kz_status, with the native message."""
    if status != 0:
        text = message.decode("utf-8", "replace") if isinstance(message, bytes) else message
        name = library().kz_status_name(status).decode()
        raise NativeError(status, f"{name}: {text}" if text else name)


def error_buffer(size: int = 1024) -> ctypes.Array:
    """A buffer for the error message of a loader call."""
    return ctypes.create_string_buffer(size)


class NativeHandle:
    """Owns one native handle: frees it once (close, context manager, garbage collection) and
    turns a failed status into NativeError with the handle's last error message.

    Subclasses set `_handle`, and name their library's `_free` and `_last_error` functions."""

    _handle: ctypes.c_void_p | None = None
    _free_name = ""
    _last_error_name = ""

    def close(self) -> None:
        if getattr(self, "_handle", None):
            getattr(library(), self._free_name)(self._handle)
            self._handle = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _check(self, status: int) -> None:
        if status != 0:
            check(status, getattr(library(), self._last_error_name)(self._handle) or b"")
