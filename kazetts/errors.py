"""kazetts' error types. A bad request is a `ValueError` naming the argument and its valid
choices; everything else kazetts raises on purpose is a `KazettsError`, so a caller (the
command line, a server) can tell "you asked for something wrong" from "this file or this
native call failed" and report either in one line."""

from __future__ import annotations


class KazettsError(RuntimeError):
    """A model file kazetts cannot use, or a native stage (libkazetts, llama.cpp) that failed."""


class ModelFileError(KazettsError, ValueError):
    """A model file that is missing a part, of the wrong kind, or that a loader rejected.

    Also a ValueError, which is what kazetts raised for bad files before this type existed."""


class BusyError(KazettsError):
    """A `TTS` asked for a second request while one is running (one request at a time)."""
