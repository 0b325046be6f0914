"""Text that arrives in pieces (an LLM's deltas), turned into text tokens that can no longer change.

The model's streaming-text mode feeds one text token per generated frame, so speech can start
as soon as the first token is known. But BPE tokens at the growing end of a text can still
change when more text arrives ("Hel" + "lo", "don" + "'t", "a " + " b"), and a token once fed
cannot be taken back. Tokens are therefore committed only up to a *final boundary*: a position
b inside the received text where the tokenizer must split whatever follows.

Qwen2's pre-tokenizer (llama.cpp's QWEN2 regex) splits text into words first and BPE never
merges across them; a split at b is final when the word containing text[b-1] cannot reach past
b, and comes out the same whether text[b] or the end of the text follows it. Whitespace runs
fail the second test (" " + " 1" splits "  " as " ", " "; at the end it is one word), so
text[b-1] is never whitespace, and one of:
  - text[b] is a space or tab (a space only ever starts a word; the only word that runs on
    through non-newline whitespace is a whitespace run);
  - text[b-1] is a letter and text[b] is not (letter runs stop at the first non-letter; a
    contraction such as 's ends at its letter);
  - text[b-1] or text[b] is an ASCII digit (digits are single-character words).
A newline is never a final boundary after punctuation (".\\n" is one word). The committed
tokens are those of text[:b] in its chat wrapping; since b is final they are a prefix of the
whole text's tokens, which `_commit` re-checks. tests/test_text_stream.py checks the rule
against llama.cpp's tokenizer on random texts and random chunkings. The rule (final boundaries
and where a piece ends) is libkazetts' kz_text_final_boundary and kz_text_piece_end (rules.h),
the one definition the native stream (kz_tts_stream_* in tts.h) uses too.

Text is said in pieces of at most `piece_chars` characters (one generation each, as
`TTS.stream` does): a piece ends at the first sentence end after `piece_chars // 2` characters,
or, when it grows past `piece_chars`, at its last clause boundary or space (never before a
committed token). A text shorter than `piece_chars // 2` is one piece, with exactly the tokens
`TTS.stream` gives the same text.
"""

from __future__ import annotations

import asyncio
import codecs
import threading
from typing import Any, AsyncIterator, Callable, Iterable, Iterator

import numpy as np

from kazetts.engine.text_split import final_boundary, piece_end
from kazetts.stages.prompt import ROLE_TOKENS, TAIL_TOKENS, Prompt, chat_text
from kazetts.stages.talker_file import TalkerFile


class TextPieces:
    """Pulls text from `chunks` (str, or UTF-8 bytes cut anywhere) only when a token is needed,
    and hands out the pieces to say and their committed tokens, in order, nothing dropped."""

    def __init__(self, chunks: Iterable[str | bytes], tokenize: Callable[[str], list[int]], piece_chars: int):
        self._chunks = iter(chunks)
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._tokenize = tokenize
        self.piece_chars = piece_chars
        self.ended = False  # the input is exhausted
        self.received = ""  # text of the current piece and after (earlier pieces are dropped)
        self.text = ""  # the current piece's text once closed
        self.tokens: list[int] = []  # committed text tokens of the current piece
        self.closed = False
        self._in_piece = False
        self._fed_chars = 0  # characters of `received` the committed tokens cover
        self.head: list[int] = []
        self.tail: list[int] = []

    # -- what the frame loop asks -----------------------------------------------------------------
    def next_piece(self) -> bool:
        """Moves to the next piece; blocks until it has a token. False when nothing is left to say."""
        if self._in_piece:
            while not self.closed:  # the frame loop may stop (a frame cap) before a piece's text has come
                self._advance()
            self.received = self.received[len(self.text) :]
        self._in_piece = True
        self.tokens, self.closed, self.text, self._fed_chars = [], False, "", 0
        while True:
            self._update()
            if self.tokens:
                return True
            if self.closed:  # a piece of whitespace only: skip it
                self.received = self.received[len(self.text) :]
                self.closed, self.text = False, ""
            if self.ended and not self.received.strip():
                return False
            if not self.ended:
                self._pull()

    def ready(self, index: int) -> bool:
        """Whether token(index) can answer without waiting for more text."""
        return index < len(self.tokens) or self.closed

    def token(self, index: int) -> int | None:
        """The current piece's text token `index`, waiting for text if needed; None past its end."""
        while not self.ready(index):
            self._advance()
        return self.tokens[index] if index < len(self.tokens) else None

    def chat_ids(self) -> list[int]:
        """The current piece's committed tokens in the chat wrapping (as build_prompt takes them)."""
        return self.head + self.tokens + self.tail

    # -- reading and committing -------------------------------------------------------------------
    def _advance(self) -> None:
        self._pull()
        self._update()

    def _pull(self) -> None:
        try:
            chunk = next(self._chunks)
        except StopIteration:
            self.received += self._decoder.decode(b"", final=True)
            self.ended = True
            return
        if isinstance(chunk, (bytes, bytearray)):
            chunk = self._decoder.decode(bytes(chunk))
        elif not isinstance(chunk, str):
            raise ValueError(f"text chunks must be str or bytes, got {type(chunk).__name__}")
        self.received += chunk

    def _update(self) -> None:
        if self.closed:
            return
        cut = self._piece_end()
        if cut is not None:
            self._close(cut)
            return
        b = final_boundary(self.received, self.piece_chars)
        if b > self._fed_chars and self.received[:b].strip():
            self._commit(self.received[:b], b)

    def _piece_end(self) -> int | None:
        """Where the current piece ends, once that can no longer change; None while it grows."""
        return piece_end(self.received, self.piece_chars, self._fed_chars, self.ended)

    def _body(self, text: str) -> list[int]:
        ids = self._tokenize(chat_text(text))
        self.head, self.tail = ids[:ROLE_TOKENS], ids[len(ids) - TAIL_TOKENS :]
        return ids[ROLE_TOKENS : len(ids) - TAIL_TOKENS]

    def _commit(self, text: str, chars: int) -> None:
        tokens = self._body(text)
        if tokens[: len(self.tokens)] != self.tokens:
            raise RuntimeError(f"kazetts bug: committed text tokens changed at {text!r}")
        self.tokens, self._fed_chars = tokens, chars

    def _close(self, cut: int) -> None:
        self.text = self.received[:cut]
        if self.text.strip():
            self._commit(self.text, cut)
        self.closed = True


class ArrivingPrompt:
    """What the frame loop reads as a `Prompt` while the text still arrives: the prefill holds
    the piece's first token; text_row(step) waits for token step + 1, then gives tts_eos once
    the piece has ended and tts_pad after it, exactly as `Prompt.text_row` for the whole piece."""

    def __init__(self, prompt: Prompt, pieces: TextPieces, rows: TalkerFile):
        self.prefill, self.tts_pad = prompt.prefill, prompt.tts_pad
        self.tts_eos = prompt.trailing_text[-1]
        self.pieces, self.rows = pieces, rows

    def text_row(self, step: int) -> np.ndarray:
        token = self.pieces.token(step + 1)
        if token is not None:
            return self.rows.text([token])[0]
        return self.tts_eos if step + 1 == len(self.pieces.tokens) else self.tts_pad


class _ConsumerLeft(Exception):
    """The async consumer stopped reading: the generation stops at its next text row."""


def run_with_async_chunks(run: Callable[[Iterator[Any]], Iterator[Any]], chunks: AsyncIterator) -> AsyncIterator:
    """`run(sync_chunks)` (a blocking generator) driven from asyncio: it runs in a thread of its
    own, pulls `chunks` through the event loop, and its items come back as an async iterator.
    Leaving the `async for` early stops the generator between two items."""
    stop = threading.Event()
    done = object()

    def worker(loop: asyncio.AbstractEventLoop, results: asyncio.Queue) -> None:
        def pull() -> Iterator[Any]:
            while not stop.is_set():
                try:
                    yield asyncio.run_coroutine_threadsafe(chunks.__anext__(), loop).result()
                except StopAsyncIteration:
                    return
            raise _ConsumerLeft

        outcome: Any = done
        try:
            generator = run(pull())
            for item in generator:
                loop.call_soon_threadsafe(results.put_nowait, item)
                if stop.is_set():
                    generator.close()
                    break
        except BaseException as error:  # handed to the consumer, raised there
            outcome = error
        loop.call_soon_threadsafe(results.put_nowait, outcome)

    async def items() -> AsyncIterator:
        results: asyncio.Queue = asyncio.Queue()
        thread = threading.Thread(
            target=worker, args=(asyncio.get_running_loop(), results), name="kazetts-stream-text", daemon=True
        )
        thread.start()
        try:
            while (item := await results.get()) is not done:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()

    return items()
