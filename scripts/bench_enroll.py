"""Benchmark enrolment's three stages: log-mel, speaker encoder, codec encoder; and peak RSS.

    .venv/bin/python scripts/bench_enroll.py MMPROJ [--seconds 10] [--threads 1 2] [--reps 5]

MMPROJ is a Base mmproj made by `kazetts convert` (e.g. of the 0.6b synthetic checkpoint:
scripts/make_checkpoint.py 0.6b DIR --type base; kazetts convert DIR -o OUT --type f32). The
input is the committed espeak-ng reference (dumps/clone/clone_icl_long_ref/ref_pcm.npy, 24 kHz),
cut to --seconds. The thread counts take turns within every repetition (this machine is shared:
interleaved runs see the same load); prints the median and the range of each stage per thread
count (wall, and the median CPU time of the process), the load average, and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import resource
import statistics
import sys
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kazetts.stages import mel  # noqa: E402
from kazetts.stages.codec_encoder import CodecEncoder  # noqa: E402
from kazetts.stages.speaker_encoder import SpeakerEncoder  # noqa: E402

PCM = REPO / "dumps" / "clone" / "clone_icl_long_ref" / "ref_pcm.npy"


def timed(fn, *args):
    """fn(*args), its wall time and the process's CPU time over it (all threads: at 1 thread the
    work itself, whatever else the machine runs; at 2 the spinning at barriers too)."""
    start, cpu = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, (time.perf_counter() - start, time.process_time() - cpu)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mmproj")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)
    pcm = np.load(PCM)
    n = int(args.seconds * 24000)
    if n > len(pcm):  # the recording, repeated: still speech, as long as asked
        pcm = np.tile(pcm, -(-n // len(pcm)))
    pcm = np.ascontiguousarray(pcm[:n], dtype=np.float32)
    speaker, (load_speaker, _) = timed(SpeakerEncoder, args.mmproj)
    codec, (load_codec, _) = timed(CodecEncoder, args.mmproj)
    times = {(t, stage): [] for t in args.threads for stage in ("mel", "speaker_encoder", "codec_encoder")}
    loads = [os.getloadavg()[0]]
    for _ in range(args.reps):
        for threads in args.threads:
            speaker.set_threads(threads)
            codec.set_threads(threads)
            log_mel, t_mel = timed(mel.log_mel, pcm)
            _, t_speaker = timed(speaker.encode, log_mel)
            _, t_codec = timed(codec.encode, pcm)
            for stage, t in (("mel", t_mel), ("speaker_encoder", t_speaker), ("codec_encoder", t_codec)):
                times[threads, stage].append(t)
        loads.append(os.getloadavg()[0])
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"enrolment of {args.seconds:g} s ({log_mel.shape[0]} mel frames), {args.reps} interleaved reps, "
          f"load average {min(loads):.1f}-{max(loads):.1f}; loads: speaker encoder {load_speaker:.2f} s, "
          f"codec encoder {load_codec:.2f} s; peak RSS {rss:.0f} MB")
    for threads in args.threads:
        cells = []
        total = 0.0
        for stage in ("mel", "speaker_encoder", "codec_encoder"):
            ms = [1000 * wall for wall, _ in times[threads, stage]]
            cpu = statistics.median(1000 * c for _, c in times[threads, stage])
            total += statistics.median(ms)
            cells.append(f"{stage} {statistics.median(ms):.0f} ms ({min(ms):.0f}-{max(ms):.0f}; cpu {cpu:.0f})")
        print(f"  {threads} thread(s): " + ", ".join(cells) + f"; sum of medians {total:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
