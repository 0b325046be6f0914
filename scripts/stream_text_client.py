#!/usr/bin/env python3
"""Speak text while it is still being written: the example client of `kazetts serve`'s
text-streaming WebSocket (GET /v1/audio/speech/stream, protocol in docs/server.md).

    # an LLM's answer piped in, said as it arrives (stdin is read line by line)
    my_llm | python scripts/stream_text_client.py -o answer.wav
    # or words sent one by one, as an LLM would, every 0.1 s
    python scripts/stream_text_client.py --text "Bonjour, ceci est un test." --delay 0.1 -o out.wav

It sends {"type": "start", voice options...}, then {"type": "text", "text": ...} per piece and
{"type": "end"}; it writes the binary messages (24 kHz s16le PCM) to a WAV file as they come.
Needs aiohttp (pip install 'kazetts[server]').
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import wave

import aiohttp


async def speak(url: str, pieces, output: str, start: dict, api_key: str | None = None) -> dict:
    """Sends `pieces` (an async iterator of str), writes the audio to `output`; returns figures."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    t0, first_audio, sent, done = time.perf_counter(), None, 0, None
    with wave.open(output, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(24000)
        async with aiohttp.ClientSession() as session, session.ws_connect(url, headers=headers) as ws:
            await ws.send_json({"type": "start", "response_format": "pcm", **start})

            async def send():
                nonlocal sent
                async for piece in pieces:
                    await ws.send_json({"type": "text", "text": piece})
                    sent += 1
                await ws.send_json({"type": "end"})

            sender = asyncio.ensure_future(send())
            async for message in ws:
                if message.type == aiohttp.WSMsgType.BINARY:
                    if first_audio is None:
                        first_audio = {"seconds": time.perf_counter() - t0, "pieces_sent": sent}
                    wav.writeframes(message.data)
                elif message.type == aiohttp.WSMsgType.TEXT:
                    event = json.loads(message.data)
                    if event["type"] == "error":
                        sender.cancel()
                        raise SystemExit(f"server error: {event['error']['message']}")
                    if event["type"] == "speech.audio.done":
                        done = event
                        break
            await sender
    return {"first_audio": first_audio, "pieces_sent": sent, "seconds": time.perf_counter() - t0, "done": done}


async def words(text: str, delay: float):
    for i, word in enumerate(text.split(" ")):
        await asyncio.sleep(delay)
        yield word if i == 0 else " " + word


async def stdin_lines():
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        yield line


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="ws://127.0.0.1:8880/v1/audio/speech/stream")
    p.add_argument("--text", default=None, help="text to send word by word (default: stdin, line by line)")
    p.add_argument("--delay", type=float, default=0.05, help="seconds between words with --text (default 0.05)")
    p.add_argument("-o", "--output", required=True, help="WAV file to write")
    p.add_argument("--voice", default=None)
    p.add_argument("--language", default="auto")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--api-key", default=None)
    args = p.parse_args()
    start = {
        k: v for k, v in (("voice", args.voice), ("language", args.language), ("seed", args.seed)) if v is not None
    }
    pieces = words(args.text, args.delay) if args.text is not None else stdin_lines()
    figures = asyncio.run(speak(args.url, pieces, args.output, start, args.api_key))
    first = figures["first_audio"]
    print(
        f"{args.output}: first audio after {first['seconds']:.2f} s, when {first['pieces_sent']} of "
        f"{figures['pieces_sent']} pieces were sent; done in {figures['seconds']:.2f} s"
        if first
        else f"{args.output}: no audio",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
