"""Several listeners at once on one model (issue #30): an engine with max_batch requests said
together, each from its own thread.

    .venv/bin/python scripts/bench_concurrency.py [--engine native|python] [--preset 0.6b]
                     [--weights q8_0] [--threads 2] [--clients 1 2 4 8] [--frames 64] [--rounds 3]

Every request says the benchmark's 20-word paragraph (scripts/bench_common.TEXT) with the Base
model's x-vector (as `make bench`), sampled with its own seed, held to exactly --frames frames
(min_frames = max_frames) so that every run does the same work. A run of N clients starts them
together and ends when the last has ended. Prints, per N (median over rounds that rotate the
order of the N): aggregate audio seconds per wall second and its ratio to one client, each
request's ms per frame (its total time / its frames) and real-time factor, first audio p50/p95
over all requests of all rounds, the most requests that stepped together; then the process's
peak RSS after a first pass of increasing N, and per extra stream. One process, the machine's
load printed before and after (figures from a loaded machine are not comparable).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import threading
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_common import CACHE, TEXT, checkpoint, converted, peak_rss_mb  # noqa: E402

FRAME_SECONDS = 0.08  # 12.5 frames a second


def say(tts, xvector: np.ndarray, seed: int, frames: int) -> dict:
    """One request: its frames, total and first-audio ms (from the call), most stepping together."""
    options = dict(xvector=xvector, seed=seed, max_frames=frames, min_frames=frames)
    if not hasattr(tts, "stream"):  # the native engine (NativeTTS) times itself
        r = tts.synthesize(TEXT, **options)
        return {
            "frames": len(r.codes),
            "ms": r.timings["total_ms"],
            "first_ms": r.timings["first_audio_ms"],
            "batch_max": r.batch_max,
        }
    start, first, n = time.perf_counter(), None, 0
    stream = tts.stream(TEXT, **options)
    for chunk in stream:
        first = first or time.perf_counter()
        n += len(chunk.codes)
    end = time.perf_counter()
    return {
        "frames": n,
        "ms": 1000 * (end - start),
        "first_ms": 1000 * (first - start),
        "batch_max": stream.timings["batch_max"],
    }


def run_clients(tts, n: int, xvector: np.ndarray, frames: int) -> dict:
    """n requests at once: wall seconds and each request's figures (say)."""
    results: list = [None] * n
    start = threading.Barrier(n + 1)

    def client(i):
        start.wait()
        results[i] = say(tts, xvector, i, frames)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return {"wall": time.perf_counter() - t0, "results": results}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", choices=["native", "python"], default="native")
    ap.add_argument("--preset", default="0.6b")
    ap.add_argument("--weights", default="q8_0")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--frames", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    import bench
    from kazetts.engine.native_tts import NativeTTS
    from kazetts.engine.tts import TTS

    talker, mmproj = converted(a.preset, a.weights, "base")
    wav = bench.speaker_wav(CACHE / "bench-speaker.wav")
    xvector = np.load(bench.xvector(checkpoint(a.preset, "base"), wav)).astype(np.float32)
    print(f"load before: {os.getloadavg()[0]:.2f}", flush=True)
    engine = NativeTTS if a.engine == "native" else TTS
    tts = engine(talker, mmproj, threads=a.threads, max_batch=max(a.clients))
    say(tts, xvector, 0, 4)  # warm-up
    peaks = {}
    for n in sorted(a.clients):  # memory: the high-water mark after each N, N increasing
        run_clients(tts, n, xvector, a.frames)
        peaks[n] = peak_rss_mb()
    runs: dict[int, list] = {n: [] for n in a.clients}
    for r in range(a.rounds):
        order = a.clients[r % len(a.clients) :] + a.clients[: r % len(a.clients)]
        for n in order:
            runs[n].append(run_clients(tts, n, xvector, a.frames))
    print(f"load after: {os.getloadavg()[0]:.2f}", flush=True)
    rows = []
    base = None
    for n in a.clients:
        audio = [sum(s["frames"] for s in run["results"]) * FRAME_SECONDS / run["wall"] for run in runs[n]]
        per_frame = [s["ms"] / s["frames"] for run in runs[n] for s in run["results"]]
        first = [s["first_ms"] for run in runs[n] for s in run["results"]]
        row = {
            "clients": n,
            "aggregate_audio_s_per_s": float(np.median(audio)),
            "ms_per_frame": float(np.median(per_frame)),
            "rtf": float(np.median(per_frame)) / (1000 * FRAME_SECONDS),
            "first_audio_p50_ms": float(np.percentile(first, 50)),
            "first_audio_p95_ms": float(np.percentile(first, 95)),
            "batch_max": max(s["batch_max"] for run in runs[n] for s in run["results"]),
            "peak_rss_mb": peaks[n],
        }
        base = base or row["aggregate_audio_s_per_s"]
        row["aggregate_x"] = row["aggregate_audio_s_per_s"] / base
        rows.append(row)
    print(
        "| clients | aggregate audio s / s | x 1 client | ms/frame per request | RTF per request "
        "| first audio p50 / p95 ms | most stepping together | peak RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['clients']} | {r['aggregate_audio_s_per_s']:.2f} | {r['aggregate_x']:.2f} | {r['ms_per_frame']:.1f} "
            f"| {r['rtf']:.2f} | {r['first_audio_p50_ms']:.0f} / {r['first_audio_p95_ms']:.0f} | {r['batch_max']} "
            f"| {r['peak_rss_mb']:.0f} |"
        )
    ns = sorted(peaks)
    if len(ns) > 1:
        print(f"peak RSS per extra stream: {(peaks[ns[-1]] - peaks[ns[0]]) / (ns[-1] - ns[0]):.1f} MB")
    print(
        json.dumps(
            {
                "engine": a.engine,
                "preset": a.preset,
                "weights": a.weights,
                "threads": a.threads,
                "frames": a.frames,
                "rows": rows,
            }
        )
    )


if __name__ == "__main__":
    main()
