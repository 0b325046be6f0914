"""Loads libkazetts, the C++/ggml stages, beside the ggml that llama-cpp-python ships.

pip builds libkazetts into the package (kazetts/lib) against the ggml of the llama-cpp-python
installed beside it. llama_cpp is imported first so that its libggml*.so are in the process;
libkazetts links the same files by soname (RUNPATH: the llama_cpp/lib next to kazetts/lib), so
the process holds one ggml. libkazetts records which ggml it was built against; another one (an
upgrade or rebuild of llama-cpp-python after kazetts) is refused before anything crosses the
boundary, with what to reinstall, since ggml's structures and enums change between releases.
"""

from __future__ import annotations

import ctypes
import importlib.resources
import os
import pathlib

from kazetts.errors import KazettsError

ABI_VERSION = 10
LIB_ENV = "KAZETTS_NATIVE_LIB"
LIB_NAME = "libkazetts.so"
REINSTALL = (
    "reinstall kazetts so that pip rebuilds it against the llama-cpp-python installed now "
    "(pip install --force-reinstall --no-deps --no-cache-dir <kazetts sdist, git URL or source "
    "directory>; in a clone: make setup)"
)
_LIBRARY: ctypes.CDLL | None = None
# Every module binds the libkazetts functions it calls the same way: one table at module level,
# {name: (restype, argtypes)} (argtypes None: ctypes' default, unchecked), declared on the library
# by bind(table) where the module needs it (as llama-cpp-python binds each function alike).
# This module's own: the library's identity, declared on a library before it is accepted ...
_ABI = {"kz_abi_version": (ctypes.c_int, None)}
_BUILD = {
    "kz_built_with": (ctypes.c_char_p, None),
    "ggml_version": (ctypes.c_char_p, None),
    "ggml_commit": (ctypes.c_char_p, None),
}
# ... and the functions it calls on the accepted one
_SIGNATURES = {
    "kz_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "kz_rng_uniform": (ctypes.c_double, [ctypes.POINTER(ctypes.c_uint64)]),
    "kz_release_file_pages": (ctypes.c_int64, [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64]),
    "kz_talker_backend_setup": (ctypes.c_int, []),
}


class TtsRequest(ctypes.Structure):
    """kz_tts_request (kazetts/tts.h): a native request, and the sampling fields of kz_talker_choose."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("speaker", ctypes.c_char_p),
        ("language", ctypes.c_char_p),
        ("instruct", ctypes.c_char_p),
        ("xvector", ctypes.POINTER(ctypes.c_float)),
        ("xvector_len", ctypes.c_int32),
        ("text_streaming", ctypes.c_int32),
        ("greedy", ctypes.c_int32),
        ("temperature", ctypes.c_float),
        ("top_k", ctypes.c_int32),
        ("top_p", ctypes.c_float),
        ("repetition_penalty", ctypes.c_float),
        ("cp_temperature", ctypes.c_float),
        ("cp_top_k", ctypes.c_int32),
        ("cp_top_p", ctypes.c_float),
        ("seed", ctypes.c_int64),
        ("max_frames", ctypes.c_int32),
        ("chunk_frames", ctypes.c_int32),
        ("min_frames", ctypes.c_int32),
        ("voice", ctypes.c_void_p),
        ("xvector_only", ctypes.c_int32),
        ("speed", ctypes.c_float),
    ]


class NativeError(KazettsError):
    """A native call failed; `status` is the kz_status code."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class NativeLibraryError(ImportError):
    """libkazetts cannot be used: missing, not loadable, or built for another ABI or ggml."""


def library_path() -> pathlib.Path:
    """$KAZETTS_NATIVE_LIB, else the library pip's build installed in the package."""
    override = os.environ.get(LIB_ENV)
    return pathlib.Path(override or str(importlib.resources.files("kazetts") / "lib" / LIB_NAME))


def built_with(lib: ctypes.CDLL) -> str:
    """The llama-cpp-python and ggml the library was built against (recorded by its build)."""
    return declare(lib, _BUILD).kz_built_with().decode()


def running_with(lib: ctypes.CDLL) -> str:
    """The llama-cpp-python and ggml of this process, named as built_with names them; ggml
    answers through the library's own link, so this is the ggml it is bound to."""
    import llama_cpp

    declare(lib, _BUILD)
    return (
        f"llama-cpp-python {llama_cpp.__version__}, ggml {lib.ggml_version().decode()} ({lib.ggml_commit().decode()})"
    )


def _load(path: pathlib.Path) -> ctypes.CDLL:
    if not path.exists():
        raise NativeLibraryError(
            f"{path} does not exist: kazetts was installed without its native library; {REINSTALL}"
        )
    import llama_cpp  # noqa: F401  (loads ggml into the process before libkazetts)

    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        raise NativeLibraryError(f"cannot load {path} ({e}); {REINSTALL}") from None
    declare(lib, _ABI)
    if lib.kz_abi_version() != ABI_VERSION:
        raise NativeLibraryError(f"{path} has ABI {lib.kz_abi_version()}, kazetts needs {ABI_VERSION}; {REINSTALL}")
    built, running = built_with(lib), running_with(lib)
    if built != running:
        raise NativeLibraryError(
            f"{path} was built against {built}, but this process runs {running}; {REINSTALL}, "
            "or reinstall the llama-cpp-python it was built against"
        )
    return declare(lib, _SIGNATURES)


def library() -> ctypes.CDLL:
    """The loaded library (loaded once per process), its ABI and ggml checked."""
    global _LIBRARY
    if _LIBRARY is None:
        _LIBRARY = _load(library_path())
    return _LIBRARY


def declare(lib: ctypes.CDLL, signatures: dict) -> ctypes.CDLL:
    """lib with these functions' result and argument types declared: {name: (restype, argtypes)}."""
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def bind(signatures: dict) -> ctypes.CDLL:
    """The loaded library with a module's table of functions declared (see _SIGNATURES): how
    every module binds libkazetts. Cheap (microseconds), so a module binds where it needs it."""
    return declare(library(), signatures)


def ptr(array, ctype=ctypes.c_float):
    """A numpy array's data as a ctypes pointer to `ctype`, for a native call; None (an optional
    output left out) stays None."""
    return None if array is None else array.ctypes.data_as(ctypes.POINTER(ctype))


def release_file_pages(path: str | os.PathLike, offset: int, length: int) -> int:
    """Drops this process's resident pages of bytes [offset, offset + length) of a file it maps
    read-only (kz_release_file_pages): they stay in the page cache, out of the RSS, until read
    again. Returns the bytes released (-1: cannot tell, e.g. not Linux)."""
    return library().kz_release_file_pages(os.fsencode(str(path)), int(offset), int(length))


def use_talker_backend() -> bool:
    """Hands llama.cpp libkazetts' Q8_0 matrix kernels (one column: the steps, except on AMD CPUs;
    many: the prefill) for the contexts created from now on (kz_talker_backend_setup: a ggml ACCEL
    backend, process-wide; its products equal ggml's bit for bit). KAZETTS_TALKER_BACKEND=0 keeps
    ggml's own, =prefill / =all claim the prefill's / both. True when a kernel is in use."""
    return bool(library().kz_talker_backend_setup())


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


class Rng:
    """The random stream of both engines (kz_rng_uniform: splitmix64 in libkazetts).

    The Python engine draws CB0's uniform with `random()` and hands `pointer` to the native code
    predictor, which draws its 15 from the same state: the native engine (kazetts/tts.h) does
    the same, so one seed gives both engines the same codes. `seed=None` picks a random seed."""

    def __init__(self, seed: int | None = None):
        if seed is None:
            seed = int.from_bytes(os.urandom(8), "little")
        self.state = ctypes.c_uint64(int(seed) & (2**64 - 1))
        self.pointer = ctypes.pointer(self.state)

    def random(self) -> float:
        """One uniform double in [0, 1)."""
        return library().kz_rng_uniform(self.pointer)
