"""Where the llama-cpp-python of this interpreter keeps its ggml, printed as CMake set() commands.

Run by cmake/ggml.cmake at configure time with the build's Python (the isolated build
environment of `pip install`, or the venv of an editable build). The headers come from the same
installed distribution as the libraries (its wheel ships them in <site-packages>/include, put
there by ggml's own install rules), so they always describe the ggml that libkazetts links.
KZ_BUILT_WITH names that ggml the way kazetts.native names the one it finds at run time.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import pathlib
import sys

DIST = "llama_cpp_python"
LIB_NAMES = ("libggml-base.so", "libggml-base.dylib")


def fail(message: str) -> None:
    print(message, file=sys.stderr)
    sys.exit(1)


def owned_file(dist: importlib.metadata.Distribution, name: str) -> pathlib.Path | None:
    """The installed file `name` (a path relative to site-packages) if the distribution owns it."""
    for f in dist.files or ():
        if f.as_posix() == name:
            return pathlib.Path(dist.locate_file(f))
    return None


def ggml_build(lib_dir: pathlib.Path) -> str:
    """'ggml <version> (<commit>)', as the library reports it."""
    for name in LIB_NAMES:
        if (lib_dir / name).exists():
            ggml = ctypes.CDLL(str(lib_dir / name))
            for fn in (ggml.ggml_version, ggml.ggml_commit):
                fn.restype = ctypes.c_char_p
            return f"ggml {ggml.ggml_version().decode()} ({ggml.ggml_commit().decode()})"
    fail(f"no libggml-base in {lib_dir}: is llama-cpp-python built with shared libraries?")
    return ""


def main() -> None:
    try:
        dist = importlib.metadata.distribution(DIST)
    except importlib.metadata.PackageNotFoundError:
        fail(
            f"llama-cpp-python is not installed for {sys.executable}: kazetts builds against its ggml "
            "(pip installs it as a build requirement; with --no-build-isolation install it first)"
        )
    package = owned_file(dist, "llama_cpp/__init__.py")
    header = owned_file(dist, "include/ggml.h")
    if package is None or header is None:
        fail(
            f"llama-cpp-python {dist.version} at {dist.locate_file('')} has no llama_cpp/__init__.py or "
            "include/ggml.h in its file list: reinstall it from PyPI, or configure kazetts with "
            "-DGGML_INCLUDE_DIR=<ggml/include of the same llama.cpp> -DGGML_LIB_DIR=<llama_cpp/lib>"
        )
    lib_dir = package.parent / "lib"
    built_with = f"llama-cpp-python {dist.version}, {ggml_build(lib_dir)}"
    values = {
        "GGML_INCLUDE_DIR": header.parent.as_posix(),
        "GGML_LIB_DIR": lib_dir.as_posix(),
        "KZ_BUILT_WITH": built_with,
    }
    for name, value in values.items():
        print(f'set({name} "{value}")')


if __name__ == "__main__":
    main()
