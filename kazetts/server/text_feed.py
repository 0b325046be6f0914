"""Text a client streams in (an LLM's deltas), handed from the event loop to TTS.stream_text in
the worker thread. Both servers feed it (the HTTP WebSocket, Wyoming's synthesize-chunk), so it
lives apart from either protocol and needs neither aiohttp nor wyoming."""

from __future__ import annotations

import queue
from typing import Iterator

from kazetts.server.errors import bad_request


def no_text(timeout: float):
    """The error of a stream that waited `timeout` seconds for text (the first message included)."""
    return bad_request(f"no text for {timeout:g} s: the text stream was given up", None, "text_timeout")


class ClientGone(Exception):
    """The client went away: the generation stops at its next text read."""


class TextFeed:
    """put() text as it arrives, end() when it is complete, abandon() when the client is gone;
    the worker reads chunks(), which blocks until text comes."""

    def __init__(self) -> None:
        self._texts: queue.Queue = queue.Queue()

    def put(self, text: str) -> None:
        self._texts.put(text)

    def end(self) -> None:
        self._texts.put(None)

    def abandon(self) -> None:
        self._texts.put(ClientGone)

    def chunks(self, timeout: float) -> Iterator[str]:
        """The text for stream_text; no text for `timeout` seconds gives the stream up (the
        model is held while it waits)."""
        while True:
            try:
                item = self._texts.get(timeout=timeout)
            except queue.Empty:
                raise no_text(timeout) from None
            if item is None:
                return
            if item is ClientGone:
                raise ClientGone
            yield item
