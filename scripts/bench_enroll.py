"""Benchmark enrolment's three stages: log-mel, speaker encoder, codec encoder; and peak RSS.

    .venv/bin/python scripts/bench_enroll.py MMPROJ [--seconds 10] [--threads 1 2] [--reps 5]
                                            [--libs OLD.so NEW.so ...]

MMPROJ is a Base mmproj made by `kazetts convert` (e.g. of the 0.6b synthetic checkpoint:
scripts/make_checkpoint.py 0.6b DIR --type base; kazetts convert DIR -o OUT --type f32). The
input is the committed espeak-ng reference (dumps/clone/clone_icl_long_ref/ref_pcm.npy, 24 kHz),
cut to --seconds. The thread counts take turns within every repetition (this machine is shared:
interleaved runs see the same load); prints the median and the range of each stage per thread
count (wall, and the median CPU time of the process), the load average, and the process's peak RSS.

With --libs, every repetition runs one process per library in turn (KAZETTS_NATIVE_LIB), so the
builds see the same load; each library gets its own rows and peak RSS, and every library after
the first its time over the first's, paired by repetition (median and range).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PCM = REPO / "dumps" / "clone" / "clone_icl_long_ref" / "ref_pcm.npy"
STAGES = ("mel", "speaker_encoder", "codec_encoder")


def timed(fn, *args):
    """fn(*args), its wall time and the process's CPU time over it (all threads: at 1 thread the
    work itself, whatever else the machine runs; at 2 the spinning at barriers too)."""
    start, cpu = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, (time.perf_counter() - start, time.process_time() - cpu)


def reference(seconds: float) -> np.ndarray:
    pcm = np.load(PCM)
    n = int(seconds * 24000)
    if n > len(pcm):  # the recording, repeated: still speech, as long as asked
        pcm = np.tile(pcm, -(-n // len(pcm)))
    return np.ascontiguousarray(pcm[:n], dtype=np.float32)


def measure(mmproj: str, seconds: float, thread_counts: list[int], reps: int) -> dict:
    """Runs the enrolment stages in this process: {"times": {"threads stage": [[wall, cpu], ...]},
    "loads": [...], "load_speaker", "load_codec", "mel_frames", "rss_mb"}."""
    from kazetts.stages import mel
    from kazetts.stages.codec_encoder import CodecEncoder
    from kazetts.stages.speaker_encoder import SpeakerEncoder

    pcm = reference(seconds)
    speaker, (load_speaker, _) = timed(SpeakerEncoder, mmproj)
    codec, (load_codec, _) = timed(CodecEncoder, mmproj)
    times = {f"{t} {stage}": [] for t in thread_counts for stage in STAGES}
    speaker.encode(mel.log_mel(pcm))  # warm-up, untimed: the first call touches the graph buffers
    codec.encode(pcm)
    loads = [os.getloadavg()[0]]
    for _ in range(reps):
        for threads in thread_counts:
            speaker.set_threads(threads)
            codec.set_threads(threads)
            log_mel, t_mel = timed(mel.log_mel, pcm)
            _, t_speaker = timed(speaker.encode, log_mel)
            _, t_codec = timed(codec.encode, pcm)
            for stage, t in zip(STAGES, (t_mel, t_speaker, t_codec)):
                times[f"{threads} {stage}"].append(list(t))
        loads.append(os.getloadavg()[0])
    return {
        "times": times,
        "loads": loads,
        "load_speaker": load_speaker,
        "load_codec": load_codec,
        "mel_frames": int(log_mel.shape[0]),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def measure_in_process(lib: str, args) -> dict:
    """measure() in a fresh process with KAZETTS_NATIVE_LIB=lib (one repetition)."""
    cmd = [
        sys.executable,
        __file__,
        args.mmproj,
        "--seconds",
        str(args.seconds),
        "--reps",
        "1",
        "--json",
        "--threads",
        *map(str, args.threads),
    ]
    out = subprocess.run(cmd, env={**os.environ, "KAZETTS_NATIVE_LIB": lib}, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.splitlines()[-1])


def stage_rows(times: dict, thread_counts: list[int]) -> list[str]:
    rows = []
    for threads in thread_counts:
        cells, total = [], 0.0
        for stage in STAGES:
            ms = [1000 * wall for wall, _ in times[f"{threads} {stage}"]]
            cpu = statistics.median(1000 * c for _, c in times[f"{threads} {stage}"])
            total += statistics.median(ms)
            cells.append(f"{stage} {statistics.median(ms):.0f} ms ({min(ms):.0f}-{max(ms):.0f}; cpu {cpu:.0f})")
        rows.append(f"  {threads} thread(s): " + ", ".join(cells) + f"; sum of medians {total:.0f} ms")
    return rows


def compare(args) -> None:
    runs = {lib: [] for lib in args.libs}
    for _ in range(args.reps):
        for lib in args.libs:
            runs[lib].append(measure_in_process(lib, args))
    loads = [x for lib in args.libs for r in runs[lib] for x in r["loads"]]
    first = runs[args.libs[0]]
    print(
        f"enrolment of {args.seconds:g} s ({first[0]['mel_frames']} mel frames), {args.reps} interleaved reps of "
        f"{len(args.libs)} libraries, load average {min(loads):.1f}-{max(loads):.1f}"
    )
    for lib in args.libs:
        times = {key: [r["times"][key][0] for r in runs[lib]] for key in first[0]["times"]}
        rss = max(r["rss_mb"] for r in runs[lib])
        print(f"{lib}: peak RSS {rss:.0f} MB")
        print("\n".join(stage_rows(times, args.threads)))
        if lib == args.libs[0]:
            continue
        for threads in args.threads:
            cells = []
            for stage in (*STAGES, None):

                def total(run):
                    keys = [f"{threads} {s}" for s in STAGES] if stage is None else [f"{threads} {stage}"]
                    return sum(run["times"][k][0][0] for k in keys)

                ratios = [total(new) / total(old) for new, old in zip(runs[lib], first)]
                cells.append(f"{stage or 'all'} {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
            print(f"  {threads} thread(s), time over the first library's: " + ", ".join(cells))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mmproj")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--libs", nargs="+", help="libkazetts builds to compare, one process each per repetition")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # measure_in_process's child
    args = parser.parse_args(argv)
    if args.libs:
        compare(args)
        return 0
    result = measure(args.mmproj, args.seconds, args.threads, args.reps)
    if args.json:
        print(json.dumps(result))
        return 0
    loads = result["loads"]
    print(
        f"enrolment of {args.seconds:g} s ({result['mel_frames']} mel frames), {args.reps} interleaved reps, "
        f"load average {min(loads):.1f}-{max(loads):.1f}; loads: speaker encoder {result['load_speaker']:.2f} s, "
        f"codec encoder {result['load_codec']:.2f} s; peak RSS {result['rss_mb']:.0f} MB"
    )
    print("\n".join(stage_rows(result["times"], args.threads)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
