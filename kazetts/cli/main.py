"""Command line: ``kazetts convert|quantize|info|say|voices|validate`` (``kazetts -h``)."""

from __future__ import annotations

import argparse
import sys

from kazetts.cli import say as cli_say


def _convert(args: argparse.Namespace) -> int:
    from kazetts.tools.convert import convert_checkpoint

    talker, mmproj = convert_checkpoint(args.checkpoint, args.out, args.type, name=args.name,
                                        verbose=not args.quiet)
    print(talker)
    print(mmproj)
    return 0


def _quantize(args: argparse.Namespace) -> int:
    from kazetts.tools.quantize import quantize_file

    result = quantize_file(args.input, args.output, args.type, nthread=args.threads,
                           allow_requantize=args.allow_requantize)
    print(result.summary())
    return 0


def _info(args: argparse.Namespace) -> int:
    from kazetts.tools.info import format_info, inspect_gguf

    for i, path in enumerate(args.files):
        print(("\n" if i else "") + format_info(inspect_gguf(path)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kazetts", description="Qwen3-TTS 12 Hz from GGUF files")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("convert", help="convert a Hugging Face checkpoint directory to talker + mmproj GGUF files")
    c.add_argument("checkpoint", help="checkpoint directory (config.json, model.safetensors, speech_tokenizer/, tokenizer)")
    c.add_argument("-o", "--out", required=True, help="output directory")
    c.add_argument("--type", default="q8_0", help="tensor type for weight matrices: f32, f16 or q8_0 (default q8_0)")
    c.add_argument("--name", default=None, help="file name prefix (default: the checkpoint directory's name)")
    c.add_argument("-q", "--quiet", action="store_true", help="no per-tensor progress")
    c.set_defaults(func=_convert)
    from kazetts.tools.quantize import TYPES
    q = sub.add_parser("quantize", help="requantize a talker (llama.cpp's quantizer) or mmproj GGUF")
    q.add_argument("input", help="talker or mmproj GGUF (best: an f16/f32 file from `kazetts convert --type f16`)")
    q.add_argument("output", help="output GGUF file")
    q.add_argument("--type", required=True, choices=TYPES, metavar="TYPE",
                   help=f"target type: {', '.join(TYPES)} (mmproj: code predictor matrices get q8_0 or q4_0)")
    q.add_argument("-t", "--threads", type=int, default=None, help="threads for llama.cpp's quantizer (default: all cores)")
    q.add_argument("--allow-requantize", action="store_true", help="accept an already quantized input")
    q.set_defaults(func=_quantize)
    i = sub.add_parser("info", help="show what a talker or mmproj GGUF holds")
    i.add_argument("files", nargs="+", help="GGUF file(s)")
    i.set_defaults(func=_info)
    cli_say.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"kazetts {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
