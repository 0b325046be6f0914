"""Where kazetts' resident memory goes: RSS per component, for the Python or the native engine.

    .venv/bin/python scripts/bench_memory.py TALKER MMPROJ --xvector X.npy [--engine python|native]
                     [--text T] [--frames 64] [--threads 2] [--text-streaming]

Loads the engine one stage at a time (Python engine: the talker, its weights and llama.cpp
context, the code predictor, the codec decoder; the native engine loads in one call), then runs a short
warm-up request and one request of --frames frames, as scripts/bench_kazetts.py does, and reads
/proc/self after every step: RSS split into anonymous memory and file pages (the GGUF files
llama.cpp maps), the high-water mark (VmHWM: a step whose peak exceeds the RSS it leaves staged
something at load time), and how much of each GGUF file is mapped and resident. Prints a markdown
table, then one JSON line. Linux only (it reads /proc).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_common import TEXT, memory_status  # noqa: E402

KIB = 1024  # /proc reports kB


def mapped(paths: dict[str, pathlib.Path]) -> dict[str, dict]:
    """Per named file: MB mapped (Size) and resident (Rss) over all its mappings in this process."""
    wanted = {str(p.resolve()): name for name, p in paths.items()}
    out = {name: {"mapped_mb": 0.0, "resident_mb": 0.0} for name in paths}
    current = None
    for line in open("/proc/self/smaps", encoding="utf-8", errors="replace"):
        fields = line.split()
        if fields and "-" in fields[0] and not fields[0].endswith(":"):
            current = wanted.get(fields[5]) if len(fields) > 5 else None
        elif current and fields[0] in ("Size:", "Rss:"):
            out[current]["mapped_mb" if fields[0] == "Size:" else "resident_mb"] += int(fields[1]) / KIB
    return out


class Budget:
    """Checkpoints of this process's memory, each with what changed since the one before."""

    def __init__(self, files: dict[str, pathlib.Path]):
        self.files = files
        self.rows: list[dict] = []

    def mark(self, step: str) -> None:
        row = {"step": step, **memory_status(), "files": mapped(self.files)}
        before = self.rows[-1] if self.rows else {"VmRSS": 0.0, "VmHWM": 0.0}
        row["rss_delta"] = row["VmRSS"] - before["VmRSS"]
        row["staged"] = max(0.0, row["VmHWM"] - max(before["VmHWM"], row["VmRSS"]))
        self.rows.append(row)

    def table(self) -> str:
        names = list(self.files)
        lines = [
            "| step | RSS MB | + RSS MB | anon MB | file MB | peak (VmHWM) MB | peak above RSS MB | "
            + " | ".join(f"{n} resident / mapped MB" for n in names)
            + " |",
            "|---|---|---|---|---|---|---|" + "---|" * len(names),
        ]
        for r in self.rows:
            files = " | ".join(f"{r['files'][n]['resident_mb']:.0f} / {r['files'][n]['mapped_mb']:.0f}" for n in names)
            lines.append(
                f"| {r['step']} | {r['VmRSS']:.0f} | {r['rss_delta']:+.0f} | {r['RssAnon']:.0f} | "
                f"{r['RssFile']:.0f} | {r['VmHWM']:.0f} | {r['staged']:.0f} | {files} |"
            )
        return "\n".join(lines)


def python_engine(a, budget: Budget, request):
    """kazetts.TTS, with a checkpoint after each stage it loads."""
    from bench_kazetts import forbid_eos

    from kazetts.engine import tts as engine

    def after(cls, step):
        def load(*args, **kwargs):
            stage = cls(*args, **kwargs)
            budget.mark(step)
            return stage

        return load

    # (libkazetts loads the talker's weights and makes its first context in one call)
    engine.Talker = after(engine.Talker, "talker (llama.cpp model; context: KV cache, compute and output buffers)")
    engine.CodePredictor = after(engine.CodePredictor, "code predictor")
    engine.CodecDecoder = after(engine.CodecDecoder, "codec decoder")
    tts = engine.TTS(a.talker, a.mmproj, threads=a.threads, codec_weights=a.codec)
    forbid_eos(tts)  # every request says exactly its frames

    def say(text, frames):
        return sum(len(c.audio) for c in tts.stream(text, request, max_frames=frames))

    return say


def native_engine(a, budget: Budget, request):
    """kazetts.engine.native_tts.NativeTTS (kz_tts_load: every stage in one call)."""
    from kazetts.engine.native_tts import NativeTTS

    tts = NativeTTS(a.talker, a.mmproj, threads=a.threads, codec_weights=a.codec)
    budget.mark("engine loaded (talker, code predictor, codec decoder)")

    def say(text, frames):
        return len(tts.synthesize(text, request, max_frames=frames, min_frames=frames).audio)  # exactly its frames

    return say


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("talker", type=pathlib.Path)
    ap.add_argument("mmproj", type=pathlib.Path)
    ap.add_argument("--xvector", required=True, help=".npy speaker embedding")
    ap.add_argument("--engine", choices=["python", "native"], default="python")
    ap.add_argument("--text", default=TEXT)
    ap.add_argument("--language", default="french")
    ap.add_argument("--frames", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--codec", default="f16", help="codec decoder weights")
    ap.add_argument("--text-streaming", action="store_true", help="the streaming-text prompt (default: non-streaming)")
    a = ap.parse_args()
    budget = Budget({"talker GGUF": a.talker, "mmproj GGUF": a.mmproj})
    budget.mark("interpreter")
    import bench_kazetts  # kazetts.engine.tts: numpy, llama-cpp-python, libkazetts

    budget.mark("imports")
    request = bench_kazetts.Request(
        language=a.language, xvector=np.load(a.xvector), text_streaming=a.text_streaming, greedy=True
    )
    say = (python_engine if a.engine == "python" else native_engine)(a, budget, request)
    say(bench_kazetts.WARMUP_TEXT, bench_kazetts.WARMUP_FRAMES)
    budget.mark(f"warm-up request ({bench_kazetts.WARMUP_FRAMES} frames)")
    samples = say(a.text, a.frames)
    budget.mark(f"request ({a.frames} frames)")
    print(
        f"kazetts {a.engine} engine, {a.talker.name} + {a.mmproj.name}, {a.threads} threads, codec {a.codec}, "
        f"{'streaming' if a.text_streaming else 'non-streaming'} text prompt\n"
    )
    print(budget.table())
    print(
        json.dumps(
            {
                "engine": a.engine,
                "peak_rss_mb": budget.rows[-1]["VmHWM"],
                "samples": samples,
                "steps": [
                    {k: r[k] for k in ("step", "VmRSS", "RssAnon", "RssFile", "VmHWM", "staged")} for r in budget.rows
                ],
            }
        )
    )


if __name__ == "__main__":
    main()
