#!/usr/bin/env python3
"""Run llama.cpp's own converter (as vendored in the llama-cpp-python 0.3.36 sdist) on a Qwen3-TTS
checkpoint: writes OUT_DIR/talker-<type>.gguf and OUT_DIR/mmproj-<type>.gguf.

Run it with the reference environment's interpreter (needs torch, transformers, sentencepiece,
safetensors, numpy; the sdist's own gguf-py is put on sys.path by convert_hf_to_gguf.py).
The llama.cpp sources are the ones `make llama-src` unpacks (also used to build native/), or
$KAZETTS_LLAMA_CPP_SDIST (an unpacked sdist or its vendor/llama.cpp).

usage: llama_cpp_convert.py CHECKPOINT_DIR OUT_DIR [--type f32|f16|q8_0]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys

VERSION = "0.3.36"
SDIST = f"llama_cpp_python-{VERSION}"
DEFAULT_SRC = pathlib.Path.home() / ".cache" / "kazetts" / "src" / SDIST


def find_llama_cpp() -> pathlib.Path:
    """vendor/llama.cpp of the sdist, with its Qwen3-TTS converter."""
    root = pathlib.Path(os.environ.get("KAZETTS_LLAMA_CPP_SDIST", DEFAULT_SRC)).expanduser()
    for cand in (root, root / "vendor" / "llama.cpp"):
        if (cand / "convert_hf_to_gguf.py").is_file() and (cand / "conversion" / "qwen3tts.py").is_file():
            return cand
    sys.exit(f"no llama.cpp sources with a Qwen3-TTS converter at {root}: run `make llama-src`")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("out_dir")
    ap.add_argument("--type", default="f32", choices=["f32", "f16", "q8_0"])
    args = ap.parse_args()
    src = find_llama_cpp()
    out = pathlib.Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.pop("NO_LOCAL_GGUF", None)
    for kind, extra in (("talker", []), ("mmproj", ["--mmproj"])):
        dest = out / f"{kind}-{args.type}.gguf"
        cmd = [
            sys.executable,
            str(src / "convert_hf_to_gguf.py"),
            str(args.checkpoint),
            *extra,
            "--outtype",
            args.type,
            "--outfile",
            str(dest),
        ]
        r = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True)
        if r.returncode != 0 or not dest.is_file():
            sys.stderr.write(r.stdout[-4000:] + r.stderr[-8000:])
            sys.exit(f"llama.cpp converter failed for {kind} (rc {r.returncode})")
        print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
