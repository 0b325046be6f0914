#!/usr/bin/env python3
"""Write a synthetic Qwen3-TTS checkpoint (official HF layout) from a preset and a seed.

python scripts/make_checkpoint.py tiny models/tiny-cv
python scripts/make_checkpoint.py 0.6b models/0.6b-base --type base --seed 1
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from kazetts.synthetic import presets  # noqa: E402
from kazetts.synthetic.checkpoint import DTYPES, make_checkpoint  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("preset", help=f"one of {', '.join(presets.PRESETS)}")
    parser.add_argument("out_dir", type=pathlib.Path)
    parser.add_argument("--type", dest="model_type", default="custom_voice", help=", ".join(presets.MODEL_TYPES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--dtype",
        default=None,
        choices=list(DTYPES),
        help="storage type of the weights (default: the preset's; bfloat16 as official checkpoints but for tiny-f32)",
    )
    parser.add_argument("-q", "--quiet", action="store_true")
    args = parser.parse_args(argv)
    start = time.perf_counter()

    tty = sys.stderr.isatty()

    def progress(msg: str) -> None:
        done = msg.split(":")[-1].split("/")
        if not args.quiet and (tty or done[0].strip() == done[-1].split()[0]):
            print(
                f"\r[{time.perf_counter() - start:6.1f}s] {msg}", end="" if tty else "\n", file=sys.stderr, flush=True
            )

    try:
        files = make_checkpoint(args.preset, args.out_dir, args.model_type, args.seed, args.dtype, progress)
    except ValueError as err:
        parser.exit(2, f"\nmake_checkpoint: error: {err}\n")
    except OSError as err:
        parser.exit(1, f"\nmake_checkpoint: cannot write {err.filename or args.out_dir}: {err.strerror or err}\n")
    size = sum(f.stat().st_size for f in files)
    if not args.quiet:
        print(
            f"{chr(10) if tty else ''}wrote {len(files)} files, {size / 1e6:.1f} MB, to {args.out_dir} "
            f"in {time.perf_counter() - start:.1f}s",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
