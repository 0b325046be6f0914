"""`kazetts wyoming`: the Wyoming server (kazetts.server.wyoming) for Home Assistant, on one model."""

from __future__ import annotations

import argparse
import asyncio
import logging
import pathlib
import sys
from urllib.parse import urlparse

from kazetts.cli.say import (
    add_codec_argument,
    add_model_arguments,
    add_sampling_arguments,
    engine,
    int_in,
    sampling_options,
)
from kazetts.request import MAX_SEED, Request

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _wyoming(args: argparse.Namespace) -> int:
    try:
        from kazetts.server.wyoming import WyomingOptions, WyomingService, serve
    except ImportError:
        raise ValueError("the Wyoming server needs the wyoming package: pip install 'kazetts[wyoming]'") from None
    from kazetts.server.voices import load_presets

    address = urlparse(args.uri)
    if address.scheme not in ("tcp", "unix") or (address.scheme == "tcp" and not (address.hostname and address.port)):
        raise ValueError(f"--uri {args.uri!r}: give tcp://HOST:PORT (e.g. tcp://127.0.0.1:10200) or unix://PATH")
    presets = load_presets(args.presets) if args.presets else None
    logging.basicConfig(level=logging.INFO, format="kazetts wyoming: %(message)s", stream=sys.stderr)
    options = WyomingOptions(
        model_name=pathlib.Path(args.model).resolve().name,
        default_voice=args.voice,
        language=args.language,
        max_queue=args.queue,
        request=Request(
            seed=args.seed,
            greedy=args.greedy,
            chunk_frames=args.chunk_frames,
            max_frames=args.max_frames,
            **sampling_options(args),
        ),
    )
    tts = engine(args, args.codec)  # here, so that a bad model is a one-line error before anything listens
    service = WyomingService.start(lambda: tts, options, args.voices, presets)
    try:
        names = ", ".join(voice["id"] for voice in service.voices.listing())
        print(
            f"kazetts wyoming: {options.model_name} loaded ({tts.model_type}; voices {names}; default "
            f"{service.voices.default})",
            file=sys.stderr,
            flush=True,
        )
        if address.scheme == "tcp" and address.hostname not in LOOPBACK:
            print(
                f"kazetts wyoming: warning: listening on {address.hostname}: Wyoming has no authentication, anyone "
                "who can reach this port can use the model",
                file=sys.stderr,
            )
        print(f"kazetts wyoming: serving {args.uri}", file=sys.stderr, flush=True)
        try:
            asyncio.run(serve(service, args.uri))
        except OSError as error:
            raise ValueError(f"cannot listen on {args.uri}: {error.strerror or error}") from None
    finally:
        service.close()
    return 0


def register(sub) -> None:
    w = sub.add_parser("wyoming", help="Wyoming server for Home Assistant (streamed synthesis, cloned voices)")
    add_model_arguments(w)
    w.add_argument(
        "--uri",
        default="tcp://127.0.0.1:10200",
        help="where to listen: tcp://HOST:PORT or unix://PATH (default tcp://127.0.0.1:10200: this "
        "machine only; tcp://0.0.0.0:10200 for Home Assistant on another machine)",
    )
    w.add_argument(
        "--voices",
        type=pathlib.Path,
        default=None,
        metavar="DIR",
        help="folder of cloned voices (kazetts enroll), each FILE.voice a voice named FILE (Base models)",
    )
    w.add_argument(
        "--presets",
        default=None,
        metavar="FILE.json",
        help='voice design presets, {"name": "instruct describing the voice", ...} (VoiceDesign models)',
    )
    w.add_argument("--voice", default=None, help="voice of requests that name none (default: the first voice)")
    w.add_argument(
        "--language",
        default="auto",
        help="language of requests that name none: auto (the model decides), a code (en) or a name "
        "(english) (default auto)",
    )
    w.add_argument("--queue", type=int_in(1), default=8, help="requests that may wait for the model (default 8)")
    w.add_argument(
        "--chunk-frames", type=int_in(1), default=4, help="frames per audio chunk after the first (default 4)"
    )
    w.add_argument(
        "--max-frames", type=int_in(1), default=None, help="frame cap per text piece (default: from its length)"
    )
    w.add_argument(
        "--seed",
        type=int_in(0, MAX_SEED),
        default=None,
        help="sampling seed of every request: the same text and voice give the same audio (default: a new "
        "random stream each request)",
    )
    w.add_argument("--greedy", action="store_true", help="argmax decoding")
    add_sampling_arguments(w)
    add_codec_argument(w)
    w.set_defaults(func=_wyoming)
