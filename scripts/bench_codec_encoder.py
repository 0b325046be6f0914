"""Benchmark the native codec encoder: ms per second of reference audio, and peak RSS.

    .venv/bin/python scripts/bench_codec_encoder.py MMPROJ [--seconds 10] [--threads 2] [--reps 3]

MMPROJ is a Base mmproj made by `kazetts convert` (e.g. of the 0.6b synthetic checkpoint:
scripts/make_checkpoint.py 0.6b DIR --type base; kazetts convert DIR -o OUT --type f32). The
input is the committed espeak-ng reference (dumps/clone/clone_icl_long_ref/ref_pcm.npy, 24 kHz),
cut to --seconds. Prints load time, the best of --reps encodes, and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import pathlib
import resource
import sys
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kazetts.stages.codec_encoder import CodecEncoder  # noqa: E402

PCM = REPO / "dumps" / "clone" / "clone_icl_long_ref" / "ref_pcm.npy"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mmproj")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    pcm = np.load(PCM)
    n = int(args.seconds * 24000)
    if n > len(pcm):
        parser.error(f"--seconds: the reference holds {len(pcm) / 24000:.1f} s")
    start = time.perf_counter()
    enc = CodecEncoder(args.mmproj, threads=args.threads)
    load = time.perf_counter() - start
    times = []
    for _ in range(args.reps):
        start = time.perf_counter()
        codes = enc.encode(pcm[:n])
        times.append(time.perf_counter() - start)
    best = min(times)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"codec encoder, {args.seconds:g} s of audio, {args.threads} thread(s): load {load:.2f} s, "
          f"encode best {best * 1000:.0f} ms of {args.reps} ({best * 1000 / args.seconds:.1f} ms per second of audio), "
          f"{codes.shape[0]} frames, peak RSS {rss:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
