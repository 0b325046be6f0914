"""Benchmark the native codec decoder against the PyTorch reference decoder, ms per frame.

    .venv/bin/python scripts/bench_codec.py [--preset 0.6b] [--frames 48] [--threads 1 2]

Builds (once, cached under ~/.cache/kazetts/models) the synthetic checkpoint of the preset and
an F32 mmproj holding only the codec decoder tensors (the converter's rules: the vocoder conv
kernels are F16 in the file, as llama.cpp writes them), then times the native decoder with F32
and F16 conv weights at each thread count: full decode, and streaming 1 and 4 frames a push; and
the reference (``Qwen3TTSTokenizerV2Decoder.forward`` on all frames, float32) in the reference
environment on the same weights and thread counts, printing the ratios. Prints the max abs
difference to the reference waveform too.

``--ref-worker`` is the subprocess entry point (reference environment only).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_common import REF_PYTHON, REPO, checkpoint, stage_mmproj  # noqa: E402


def make_codes(frames: int, sizes=2048):
    import numpy as np

    rng = np.random.default_rng(0)
    return rng.integers(0, sizes, size=(frames, 16)).astype(np.int32)


def bench_native(mmproj, weights, threads, codes, reps):
    import numpy as np
    from kazetts.stages.codec import CodecDecoder

    dec = CodecDecoder(mmproj, threads=threads, weights=weights)
    T = len(codes)
    dec.decode(codes[:8])  # warm up
    res = {}
    best = None
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        wav = dec.decode(codes)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        if best is None or dt < best:
            best, best_cpu = dt, cpu
    res["full"] = 1000 * best / T
    res["full_cpu"] = 1000 * best_cpu / T
    for step in (1, 4):
        best = None
        for _ in range(reps):
            dec.reset()
            t0, c0 = time.perf_counter(), time.process_time()
            parts = [dec.stream(codes[i : i + step]) for i in range(0, T, step)]
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            if best is None or dt < best:
                best, best_cpu = dt, cpu
        res[f"stream{step}"] = 1000 * best / T
        res[f"stream{step}_cpu"] = 1000 * best_cpu / T
        res[f"stream{step}_diff"] = float(np.abs(np.concatenate(parts) - wav).max())
    return res, wav


def ref_worker(args):
    import numpy as np
    import torch
    from kazetts.validation.reference import load_strict

    torch.set_num_threads(args.threads)
    _, codec = load_strict(args.checkpoint)
    dec = codec.decoder
    codes = torch.from_numpy(np.load(args.codes).astype(np.int64)).T[None]  # [1, 16, T]
    T = codes.shape[-1]
    with torch.inference_mode():
        dec(codes[..., :8])
        best = None
        for _ in range(args.reps):
            t0, c0 = time.perf_counter(), time.process_time()
            wav = dec(codes)
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            if best is None or dt < best:
                best, best_cpu = dt, cpu
    np.save(args.out, wav[0, 0].numpy())
    print(json.dumps({"full": 1000 * best / T, "full_cpu": 1000 * best_cpu / T}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="0.6b")
    ap.add_argument("--frames", type=int, default=48)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--no-ref", action="store_true", help="skip the PyTorch reference")
    ap.add_argument("--ref-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--checkpoint", help=argparse.SUPPRESS)
    ap.add_argument("--codes", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ref_worker:
        args.threads = args.threads[0]
        return ref_worker(args)

    import tempfile

    import numpy as np

    ck = checkpoint(args.preset)
    mm = stage_mmproj(ck, args.preset, "codec")
    codes = make_codes(args.frames)
    print(
        f"codec decoder, preset {args.preset}, {args.frames} random frames, best of {args.reps}; "
        f"ms per frame (80 ms of audio); load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    )
    with tempfile.TemporaryDirectory() as tmp:
        codes_path = pathlib.Path(tmp) / "codes.npy"
        np.save(codes_path, codes)
        for threads in args.threads:
            ref = None
            ref_wav = None
            if not args.no_ref and REF_PYTHON.exists():
                out = pathlib.Path(tmp) / f"ref{threads}.npy"
                p = subprocess.run(
                    [
                        str(REF_PYTHON),
                        __file__,
                        "--ref-worker",
                        "--threads",
                        str(threads),
                        "--checkpoint",
                        str(ck),
                        "--codes",
                        str(codes_path),
                        "--out",
                        str(out),
                        "--reps",
                        str(args.reps),
                    ],
                    capture_output=True,
                    text=True,
                    cwd=REPO,
                )
                if p.returncode == 0:
                    ref = json.loads(p.stdout.strip().splitlines()[-1])
                    ref_wav = np.load(out)
                else:
                    print(f"reference failed:\n{p.stderr[-2000:]}")
            if ref:
                print(f"threads {threads}: reference full {ref['full']:.1f}  [cpu time {ref['full_cpu']:.1f}]")
            for weights in ("f32", "f16"):
                r, wav = bench_native(mm, weights, threads, codes, args.reps)
                line = (
                    f"threads {threads} {weights}: full {r['full']:.1f}  stream1 {r['stream1']:.1f}  "
                    f"stream4 {r['stream4']:.1f}  [cpu time: full {r['full_cpu']:.1f} stream1 {r['stream1_cpu']:.1f} "
                    f"stream4 {r['stream4_cpu']:.1f}]  (stream==full max diff {max(r['stream1_diff'], r['stream4_diff']):.1e})"
                )
                if ref:
                    line += f"  speedup vs ref: full x{ref['full'] / r['full']:.2f}, stream4 x{ref['full'] / r['stream4']:.2f}"
                if ref_wav is not None:
                    d = np.abs(wav - ref_wav).max()
                    corr = np.corrcoef(wav, ref_wav)[0, 1]
                    line += f"  vs ref: max diff {d:.1e}, corr {corr:.6f}"
                print(line, flush=True)


if __name__ == "__main__":
    main()
