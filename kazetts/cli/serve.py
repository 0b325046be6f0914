"""`kazetts serve`: the OpenAI-compatible speech server (kazetts.server) on one model."""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

from kazetts.cli.say import add_codec_argument, add_model_arguments, int_in
from kazetts.request import MAX_BATCH
from kazetts.server.speech_request import MAX_INPUT_CHARS


def _serve(args: argparse.Namespace) -> int:
    try:
        from aiohttp import web
    except ImportError:
        raise ValueError("the server needs aiohttp: pip install 'kazetts[server]'") from None
    from kazetts.engine.model_files import find_model_files
    from kazetts.engine.tts import TTS
    from kazetts.server.app import ServerOptions, handler_options, make_app

    talker, mmproj = find_model_files(pathlib.Path(args.model))  # a wrong directory fails here, not later

    def load() -> TTS:
        try:
            tts = TTS(
                str(talker),
                str(mmproj),
                threads=args.threads,
                codec_weights=args.codec,
                codec_threads=args.codec_threads,
                max_batch=args.max_batch,
            )
            if args.voice and args.voice.lower() not in tts.speakers:
                raise ValueError(f"unknown --voice {args.voice!r}; choose one of {tts.speakers}")
        except Exception as error:
            print(f"kazetts serve: error: the model did not load: {error}", file=sys.stderr, flush=True)
            raise
        print(
            f"kazetts serve: {talker.name} loaded ({tts.model_type}, speakers {tts.speakers or 'none'})",
            file=sys.stderr,
            flush=True,
        )
        return tts

    options = ServerOptions(
        model_name=args.name or pathlib.Path(args.model).resolve().name,
        api_key=args.api_key or os.environ.get("KAZETTS_API_KEY") or None,
        max_queue=args.queue,
        max_batch=args.max_batch,
        chunk_frames=args.chunk_frames,
        default_voice=args.voice,
        default_format=args.default_format,
        max_frames=args.max_frames,
        allow_origins=tuple(args.allow_origin),
        max_input_chars=args.max_input_chars,
    )
    app = make_app(load, options)
    if args.host not in ("127.0.0.1", "localhost", "::1") and options.api_key is None:
        print(
            f"kazetts serve: warning: listening on {args.host} without --api-key: anyone who can reach this "
            "port can use the model",
            file=sys.stderr,
        )
    try:
        web.run_app(
            app,
            host=args.host,
            port=args.port,
            print=lambda text: print(
                f"kazetts serve: listening on http://{args.host}:{args.port} (model loading; GET /health says when "
                "ready)",
                file=sys.stderr,
                flush=True,
            ),
            access_log=None,
            **handler_options(app),
        )
    except OSError as error:
        raise ValueError(f"cannot listen on {args.host}:{args.port}: {error.strerror or error}") from None
    return 0


def register(sub) -> None:
    s = sub.add_parser(
        "serve", help="OpenAI-compatible speech server (POST /v1/audio/speech, text streaming over a WebSocket)"
    )
    add_model_arguments(s)
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, default=8880, help="port (default 8880)")
    s.add_argument(
        "--api-key", default=None, help="require 'Authorization: Bearer KEY' (default: $KAZETTS_API_KEY, or no key)"
    )
    s.add_argument(
        "--max-batch",
        type=int_in(1, MAX_BATCH),
        default=1,
        metavar="N",
        help=f"requests said at once, their frames computed together (1..{MAX_BATCH}; default 1); "
        "each holds its own talker KV cache",
    )
    s.add_argument(
        "--queue", type=int, default=8, help="requests that may wait beyond --max-batch; more get 429 (default 8)"
    )
    s.add_argument(
        "--voice",
        default=None,
        help="default voice, also for OpenAI's names such as 'alloy' (default: the model's first speaker)",
    )
    s.add_argument(
        "--default-format",
        default=None,
        help="response_format when a request names none (default mp3 where it can be written, else wav)",
    )
    s.add_argument("--chunk-frames", type=int, default=4, help="frames per audio chunk after the first (default 4)")
    s.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a web page origin allowed besides loopback ones, e.g. http://192.168.1.5:8000 (repeatable; '*' for any)",
    )
    s.add_argument("--max-frames", type=int, default=None, help="frame cap per text piece (default: from its length)")
    s.add_argument(
        "--max-input-chars",
        type=int_in(1),
        default=MAX_INPUT_CHARS,
        metavar="N",
        help=f"characters a request's input, or a text stream's whole text, may have (default "
        f"{MAX_INPUT_CHARS}, OpenAI's limit)",
    )
    add_codec_argument(s)
    s.add_argument("--name", default=None, help="model id in /v1/models (default: the model directory's name)")
    s.set_defaults(func=_serve)
