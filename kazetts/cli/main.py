"""Command line: ``kazetts convert|quantize|info|say|voices|validate|serve|wyoming|enroll`` (``kazetts -h``)."""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from kazetts import __version__
from kazetts.cli import enroll as cli_enroll
from kazetts.cli import say as cli_say
from kazetts.cli import serve as cli_serve
from kazetts.cli import wyoming as cli_wyoming
from kazetts.errors import KazettsError

DEBUG_ENV = "KAZETTS_DEBUG"  # set to 1 for tracebacks instead of one-line errors


def _convert(args: argparse.Namespace) -> int:
    from kazetts.tools.convert import convert_checkpoint

    talker, mmproj = convert_checkpoint(args.checkpoint, args.out, args.type, name=args.name, verbose=not args.quiet)
    print(talker)
    print(mmproj)
    return 0


def _quantize(args: argparse.Namespace) -> int:
    from kazetts.tools.quantize import quantize_file

    result = quantize_file(
        args.input, args.output, args.type, nthread=args.threads, allow_requantize=args.allow_requantize
    )
    print(result.summary())
    return 0


def _info(args: argparse.Namespace) -> int:
    from kazetts.tools.info import format_info, inspect_gguf

    for i, path in enumerate(args.files):
        print(("\n" if i else "") + format_info(inspect_gguf(path)))
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (its own print the usage first)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kazetts", description="Qwen3-TTS 12 Hz from GGUF files")
    p.add_argument("--version", action="version", version=f"kazetts {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("convert", help="convert a Hugging Face checkpoint directory to talker + mmproj GGUF files")
    c.add_argument(
        "checkpoint", help="checkpoint directory (config.json, model.safetensors, speech_tokenizer/, tokenizer)"
    )
    c.add_argument("-o", "--out", required=True, help="output directory")
    c.add_argument("--type", default="q8_0", help="tensor type for weight matrices: f32, f16 or q8_0 (default q8_0)")
    c.add_argument("--name", default=None, help="file name prefix (default: the checkpoint directory's name)")
    c.add_argument("-q", "--quiet", action="store_true", help="no per-tensor progress")
    c.set_defaults(func=_convert)
    from kazetts.tools.quantize import TYPES

    q = sub.add_parser("quantize", help="requantize a talker (llama.cpp's quantizer) or mmproj GGUF")
    q.add_argument("input", help="talker or mmproj GGUF (best: an f16/f32 file from `kazetts convert --type f16`)")
    q.add_argument("output", help="output GGUF file")
    q.add_argument(
        "--type",
        required=True,
        choices=TYPES,
        metavar="TYPE",
        help=f"target type: {', '.join(TYPES)} (mmproj: code predictor matrices get q8_0 or q4_0)",
    )
    q.add_argument(
        "-t",
        "--threads",
        type=cli_say.int_in(1, cli_say.MAX_THREADS),
        default=None,
        help="threads for llama.cpp's quantizer (default: all cores)",
    )
    q.add_argument("--allow-requantize", action="store_true", help="accept an already quantized input")
    q.set_defaults(func=_quantize)
    i = sub.add_parser("info", help="show what a talker or mmproj GGUF holds")
    i.add_argument("files", nargs="+", help="GGUF file(s)")
    i.set_defaults(func=_info)
    cli_say.register(sub)
    cli_serve.register(sub)
    cli_wyoming.register(sub)
    cli_enroll.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Runs a command; any error is one line on stderr and a non-zero status (2: bad request,
    bad file or failed native stage; 1: a kazetts bug, shown in full with KAZETTS_DEBUG=1)."""
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            if not os.environ.get(DEBUG_ENV):
                warnings.showwarning = _warning_in_one_line(args.command)
            return args.func(args)
    except (ValueError, OSError, KazettsError, ImportError) as e:
        if os.environ.get(DEBUG_ENV):
            raise
        if isinstance(e, BrokenPipeError):  # `kazetts say ... -o - | head`: the reader left
            return 1
        print(f"kazetts {args.command}: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"kazetts {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug: still one line, unless asked for the traceback
        if os.environ.get(DEBUG_ENV):
            raise
        print(
            f"kazetts {args.command}: internal error: {type(e).__name__}: {_one_line(e)} "
            f"(set {DEBUG_ENV}=1 for the traceback)",
            file=sys.stderr,
        )
        return 1


def _warning_in_one_line(command: str):
    """A warning as the errors are shown: one line naming the command, not the library's file and line."""

    def show(message, category, filename, lineno, file=None, line=None):
        print(f"kazetts {command}: warning: {_one_line(message)}", file=sys.stderr if file is None else file)

    return show


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


if __name__ == "__main__":
    sys.exit(main())
