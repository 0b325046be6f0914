"""Serial against overlapped codec (codec_threads), both kazetts engines, interleaved.

    .venv/bin/python scripts/bench_overlap.py [--configs 2:0 2:1 1:1 1:0 4:0 2:2] [--reps 3] [--frames 64]
                                              [--engines kazetts kazetts-native] [--text-streaming]

A config is TALKER_THREADS:CODEC_THREADS (codec 0: serial, the codec on the talker's threads).
Each round runs every engine and config once, in its own process (scripts/bench_kazetts.py,
scripts/bench_native.py: load and warm-up, then the timed request of --frames frames, greedy,
0.6b synthetic Base Q8_0, the benchmark's paragraph and voice), the order rotated each round;
OMP_THREAD_LIMIT is the config's talker + codec threads (a limit of the talker's count alone
would starve the codec's OpenMP team: libgomp counts the threads of every team in the process).
Prints per engine and config the median and range of end-to-end ms/frame (the request's wall
time over its frames), first audio and the per-stage ms/frame, and the load average before and
after. Run it on a quiet machine, under nice.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench import WORKERS, speaker_wav, xvector  # noqa: E402
from bench_common import CACHE, REPO, TEXT, checkpoint, converted, run_measured  # noqa: E402


def config(text: str) -> tuple[int, int]:
    talker, codec = text.split(":")
    return int(talker), int(codec)


def run(engine: str, talker: int, codec: int, a, files: tuple, xvec: pathlib.Path) -> dict:
    cmd = [
        sys.executable,
        WORKERS[engine],
        *map(str, files),
        "--xvector",
        str(xvec),
        "--text",
        TEXT,
        "--language",
        "french",
        "--frames",
        str(a.frames),
        "--threads",
        str(talker),
        "--codec-threads",
        str(codec),
    ]
    cmd += ["--text-streaming"] if a.text_streaming else []
    r = run_measured(cmd, env={"OMP_THREAD_LIMIT": str(talker + codec)})
    if r.returncode != 0:
        sys.exit(f"{engine} {talker}:{codec} failed:\n{(r.stdout + r.stderr)[-3000:]}")
    row = r.result()
    n = row["frames"]
    return {
        "e2e": 1000 * row["request_s"] / n,
        "first_audio": 1000 * row["first_audio_s"],
        "talker": 1000 * row["talker_s"] / n,
        "code_predictor": 1000 * row["code_predictor_s"] / n,
        "codec": 1000 * row["codec_s"] / n,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", nargs="+", type=config, default=[config(c) for c in "2:0 2:1 1:1 1:0 4:0 2:2".split()])
    ap.add_argument("--engines", nargs="+", default=list(WORKERS), choices=list(WORKERS))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--frames", type=int, default=64)
    ap.add_argument("--text-streaming", action="store_true", help="the streaming-text prompt")
    a = ap.parse_args()
    os.chdir(REPO)
    # bench.py's model and speaker: the 0.6b synthetic Base at Q8_0 and its fixed reference clip
    files = converted("0.6b", "q8_0", "base")
    xvec = xvector(checkpoint("0.6b", "base"), speaker_wav(CACHE / "bench-overlap-speaker.wav"))
    runs = [(e, t, c) for e in a.engines for t, c in a.configs]
    results: dict = {run_: [] for run_ in runs}
    load_before = os.getloadavg()
    for rep in range(a.reps):
        for engine, talker, codec in runs[rep % len(runs) :] + runs[: rep % len(runs)]:
            row = run(engine, talker, codec, a, files, xvec)
            results[engine, talker, codec].append(row)
            print(json.dumps({"rep": rep, "engine": engine, "config": f"{talker}:{codec}", **row}), flush=True)
    load_after = os.getloadavg()
    print(
        f"\nload average before {load_before[0]:.2f} / {load_before[1]:.2f}, after {load_after[0]:.2f} / "
        f"{load_after[1]:.2f} (1 / 5 min); {os.cpu_count()} cores; {a.reps} interleaved rounds, {a.frames} frames"
    )
    print(
        f"{'engine':15s} {'talker:codec':>12s} {'e2e ms/frame':>22s} {'first audio ms':>22s} "
        f"{'talker':>7s} {'CP':>6s} {'codec':>6s}"
    )
    for engine, talker, codec in runs:
        rows = results[engine, talker, codec]

        def spread(key: str) -> str:
            values = [r[key] for r in rows]
            return f"{statistics.median(values):7.1f} [{min(values):.0f}-{max(values):.0f}]"

        med = {k: statistics.median(r[k] for r in rows) for k in ("talker", "code_predictor", "codec")}
        print(
            f"{engine:15s} {f'{talker}:{codec}':>12s} {spread('e2e'):>22s} {spread('first_audio'):>22s} "
            f"{med['talker']:7.1f} {med['code_predictor']:6.1f} {med['codec']:6.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
