"""kazetts (its Python engine and its native engine, tts.h) beside the PyTorch reference and
llama.cpp's own llama-tts, on the same weights and work.

    make bench          # full run: 0.6b, F16 and Q8_0, threads 1 and 2, recorded as
                        # docs/bench/runs/<UTC date>-<commit>.json, chart docs/benchmarks.png
    make bench-smoke    # reduced run that keeps the harness working (CI)
    .venv/bin/python scripts/bench.py --llama-tts PATH [--preset 0.6b] [--frames 64] [--threads 1 2]
                        [--weights f16 q8_0] [--variants q4_k_m/q8_0 q8_0/q4_0 ...]
                        [--models base custom_voice]
                        [--engines kazetts kazetts-native llama-tts reference] [--reps N]
                        [--record DIR] [--chart PNG]

The synthetic Base checkpoint of the preset (llama-tts only loads Base models) is built and
converted once (cached under ~/.cache/kazetts/models); kazetts and llama-tts read the same GGUF
files, the reference the checkpoint in float32. `--models custom_voice` also runs the kazetts
engines on the preset's CustomVoice checkpoint (its first speaker by name). `--variants TALKER/MMPROJ`
runs the kazetts engines on smaller talker / code predictor types too (q4_0, q4_k_m: `kazetts
quantize` of the F32 files, as users make them), and every kazetts row then reports the share of
its greedy codes equal to those of the kazetts F32 files (an extra row) on the same request.
Every engine says the same French paragraph in
the same voice (a fixed synthetic WAV: llama-tts encodes it with its own speaker encoder, the
reference's encoder gives the x-vector kazetts and the reference use), with the non-streaming
text prompt llama-tts builds (kazetts also with the streaming-text prompt, the reference's default,
whose first audio the target judges), greedy, end-of-speech forbidden so that each says exactly
--frames frames, with the same thread count (and OMP_THREAD_LIMIT). Each engine, weight type
and thread count runs in its own process, whose own peak RSS is read from wait4 by a small
go-between (bench_common.run_measured: a high-water mark survives fork and exec). A failed run is
a row saying so, and the script exits non-zero. On a noisy machine `--reps 3` runs every row three
times, interleaved (each round starting one row later), and keeps each row's run of median request time.

A run is data: --out/results.json ({"title", "meta", "rows"}: the machine, the commit, the settings
and every row's figures), and with --record DIR the same file as DIR/<UTC date>-<commit>.json (what
`make bench` commits under docs/bench/runs/). Its report is printed at the end and rendered again
from the file by `scripts/bench_report.py RUN.json`; nothing is appended to a page.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import pathlib
import subprocess
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_llama_tts  # noqa: E402
import bench_report  # noqa: E402
from bench_common import CACHE, REF_PYTHON, REPO, TEXT, checkpoint, run_measured, weights_file  # noqa: E402
from dump_goldens import cpu_model  # noqa: E402

LANGUAGE = "french"
RUNTIME_PYTHON = REPO / ".venv" / "bin" / "python"
ENGINES = ["kazetts", "kazetts-native", "llama-tts", "reference"]
WORKERS = {"kazetts": "scripts/bench_kazetts.py", "kazetts-native": "scripts/bench_native.py"}  # the kazetts engines
SPEAKER_RATE, SPEAKER_SECONDS = 24000, 3.0
BASE, CUSTOM_VOICE = "base", "custom_voice"
# --variants: talker types llama.cpp's quantizer makes, code predictor types the native code predictor runs
TALKER_TYPES = ("f32", "f16", "q8_0", "q4_k_m", "q4_0")
MMPROJ_TYPES = ("f32", "f16", "q8_0", "q4_0")
VARIANTS = ["q4_k_m/q8_0", "q4_0/q8_0", "q8_0/q4_0", "q4_k_m/q4_0"]


def variant(spec: str) -> str:
    """A --variants item: TALKER/MMPROJ types (one type: both files)."""
    talker, _, mmproj = spec.lower().partition("/")
    mmproj = mmproj or talker
    if talker not in TALKER_TYPES or mmproj not in MMPROJ_TYPES:
        raise argparse.ArgumentTypeError(
            f"{spec!r}: give TALKER/MMPROJ types, talker one of {', '.join(TALKER_TYPES)}, "
            f"mmproj (code predictor) one of {', '.join(MMPROJ_TYPES)}"
        )
    return talker if talker == mmproj else f"{talker}/{mmproj}"


def model_files(preset: str, weights: str, model: str, seed: int) -> tuple[pathlib.Path, pathlib.Path]:
    """(talker, mmproj) for a row's weights: one type, or TALKER/MMPROJ."""
    talker, _, mmproj = weights.partition("/")
    return (
        weights_file(preset, "talker", talker, model, seed),
        weights_file(preset, "mmproj", mmproj or talker, model, seed),
    )


def speaker_wav(path: pathlib.Path) -> pathlib.Path:
    """A fixed voice-like reference clip: harmonics of a gliding pitch at a syllable rhythm."""
    import soundfile

    t = np.arange(int(SPEAKER_RATE * SPEAKER_SECONDS)) / SPEAKER_RATE
    phase = 2 * np.pi * np.cumsum(150 + 30 * np.sin(2 * np.pi * 0.7 * t)) / SPEAKER_RATE
    voice = sum(np.sin(k * phase) / k for k in range(1, 16))
    syllables = 0.5 * (1 - np.cos(2 * np.pi * 4 * t))
    noise = 0.02 * np.random.default_rng(0).standard_normal(len(t))
    soundfile.write(
        path, (0.3 * voice / np.abs(voice).max() * syllables + noise).astype(np.float32), SPEAKER_RATE, subtype="PCM_16"
    )
    return path


def xvector(ck: pathlib.Path, wav: pathlib.Path) -> pathlib.Path:
    """The reference speaker encoder's x-vector of the clip, computed once per checkpoint and clip."""
    out = CACHE / f"{ck.name}-xvector-{hashlib.sha256(wav.read_bytes()).hexdigest()[:12]}.npy"
    if not out.exists():
        r = run_measured(
            [
                str(REF_PYTHON),
                "scripts/bench_reference.py",
                str(ck),
                "--speaker-wav",
                str(wav),
                "--save-xvector",
                str(out),
            ]
        )
        if r.returncode != 0:
            sys.exit(f"speaker encoding failed:\n{r.stderr[-3000:]}")
    return out


def run_engine(
    engine: str,
    weights: str,
    threads: int,
    a,
    files: dict,
    voice: dict,
    out: pathlib.Path,
    prompt: str = bench_report.NON_STREAMING,
    model: str = BASE,
    forced: str | None = None,
    rep: int = 0,
) -> dict:
    """One engine, model, weight type, thread count (and for kazetts text prompt) in its own
    process -> a row of the table. `forced`: the F32 row's codes file, for the Python engine's
    teacher-forced agreement; `rep`: the round (--reps), which names its codes file."""
    row = {"engine": engine, "model": model, "weights": weights, "threads": threads, "prompt": prompt}
    speaker = ["--speaker", voice["speaker"]] if model == CUSTOM_VOICE else ["--xvector", str(voice["xvector"])]
    work = [*speaker, "--text", TEXT, "--language", LANGUAGE, "--frames", str(a.frames), "--threads", str(threads)]
    if engine in WORKERS:
        run = f"-r{rep}" if a.reps > 1 else ""  # each round's own codes, the row's being its median run's
        codes = out / f"codes-{engine}-{model}-{weights.replace('/', '+')}-t{threads}-{prompt}{run}.npy"
        codes.unlink(missing_ok=True)
        cmd = [
            str(RUNTIME_PYTHON),
            WORKERS[engine],
            *map(str, files[model, weights]),
            *work,
            "--codec",
            a.codec,
            "--chunk-frames",
            str(a.chunk_frames),
            "--codes-out",
            str(codes),
        ]
        cmd += ["--text-streaming"] if prompt == bench_report.STREAMING else []
    elif engine == "reference":
        cmd = [str(REF_PYTHON), "scripts/bench_reference.py", str(files["checkpoint"]), *work]
    else:
        wav_out = out / f"llama-tts-{weights}-t{threads}.wav"
        cmd = bench_llama_tts.command(
            a.llama_tts,
            *map(str, files[model, weights]),
            TEXT,
            LANGUAGE,
            a.frames,
            threads,
            str(voice["wav"]),
            files["eos_token"],
            str(wav_out),
            files["repack"],
        )
    r = run_measured(cmd, env={"OMP_THREAD_LIMIT": str(threads)})
    try:
        if r.returncode != 0:
            raise ValueError(f"exit status {r.returncode}")
        row.update(bench_llama_tts.parse(r.stdout + r.stderr, r.wall_s) if engine == "llama-tts" else r.result())
        if row["frames"] != a.frames:
            raise ValueError(f"{row['frames']} frames instead of {a.frames}")
        if engine in WORKERS:
            row["codes_file"] = str(codes)
    except (ValueError, IndexError) as err:  # also: no JSON line, or not JSON
        row["error"] = str(err)
        print(
            f"{bench_report.label(row)} failed ({err}); its output ends with:\n{(r.stdout + r.stderr)[-3000:]}",
            file=sys.stderr,
        )
    row["peak_rss_mb"] = r.peak_rss_mb
    if forced and engine == "kazetts" and weights != "f32" and not row.get("error"):
        row.update(forced_run(cmd, forced, threads))
    return row


def forced_run(cmd: list[str], forced: str, threads: int) -> dict:
    """The Python engine's teacher-forced shares on the F32 codes (bench_kazetts.py --forced-codes),
    untimed, in a process of its own; a failure is its own error (the timed row stands) and fails
    the run."""
    f = run_measured(cmd + ["--forced-codes", forced], env={"OMP_THREAD_LIMIT": str(threads)})
    try:
        if f.returncode != 0:
            raise ValueError(f"exit status {f.returncode}")
        return f.result()
    except (ValueError, IndexError) as err:
        print(
            f"teacher-forced run failed ({err}); its output ends with:\n{(f.stdout + f.stderr)[-3000:]}",
            file=sys.stderr,
        )
        return {"forced_error": str(err)}


def rounds(n_runs: int, reps: int) -> list[tuple[int, int]]:
    """(round, run index) in the order they run: all the runs, then all again, each round
    starting one run later, so that no row keeps the same slot (a bad minute after some other
    run); the first round in plan order (the F32 codes come before the rows held to them)."""
    return [(rep, (i + rep) % n_runs) for rep in range(reps) for i in range(n_runs)]


def median_run(reps: list[dict]) -> dict:
    """One row of an engine's repeated runs: the run of median request time (its figures stay
    one run's, so its stages still add up), with the highest peak RSS of them all, every run's
    request time (`request_s_runs`) and the teacher-forced shares of the first. A failed run
    fails the row."""
    failed = next((r for r in reps if r.get("error")), None)
    if failed is not None or len(reps) == 1:
        return failed or reps[0]
    row = dict(sorted(reps, key=lambda r: r["request_s"])[len(reps) // 2])
    row["peak_rss_mb"] = max(r["peak_rss_mb"] for r in reps)
    row["request_s_runs"] = [r["request_s"] for r in reps]
    row.update({k: v for k, v in reps[0].items() if k.startswith("forced_")})
    return row


def f32_codes(rows: list[dict], model: str, threads: int, prompt: str) -> str | None:
    """The codes file of this run's kazetts F32 row of that model, thread count and prompt, if any."""
    return next(
        (
            r["codes_file"]
            for r in rows
            if r["engine"] == "kazetts"
            and r["weights"] == "f32"
            and (r["model"], r["threads"], r["prompt"]) == (model, threads, prompt)
            and r.get("codes_file")
        ),
        None,
    )


def codes_agreement(rows: list[dict]) -> None:
    """Sets each kazetts row's share of greedy codes equal to the kazetts F32 row's (same model,
    threads and prompt; frames it lacks count as different) and the first frame that differs."""
    for row in rows:
        anchor = f32_codes(rows, row["model"], row["threads"], row["prompt"])
        if anchor is None or not row.get("codes_file"):
            continue
        f32, codes = np.load(anchor), np.load(row["codes_file"])
        n = min(len(codes), len(f32))
        same = codes[:n] == f32[:n]
        row["codes_equal_f32"] = float(same.sum() / f32.size)
        differ = np.flatnonzero(~same.all(axis=1))
        row["first_frame_unlike_f32"] = int(differ[0]) if len(differ) else (None if n == len(f32) else n)


def plan(a) -> list[tuple[int, str, str, str, str]]:
    """(threads, model, engine, weights, prompt) of every run, in order. The kazetts engines also
    run the --variants, and F32 when there are variants (the codes they are held against); only
    the kazetts engines run CustomVoice (llama-tts loads only Base, the reference here takes an
    x-vector); the variants run the non-streaming prompt only, like F32's codes they are held to."""
    kazetts_weights = list(dict.fromkeys((["f32"] if a.variants else []) + a.weights + a.variants))
    runs = []
    for threads in a.threads:
        for model in a.models:
            for engine in a.engines:
                if model != BASE and engine not in WORKERS:
                    continue
                weights = ["f32"] if engine == "reference" else kazetts_weights if engine in WORKERS else a.weights
                for w in weights:
                    both = engine == "kazetts" and w in a.weights
                    for prompt in a.kazetts_prompts if both else [bench_report.NON_STREAMING]:
                        runs.append((threads, model, engine, w, prompt))
    return runs


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=REPO).stdout.strip()


def machine() -> dict:
    dirty = " + uncommitted changes" if _git("status", "--porcelain", "--untracked-files=no") else ""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "commit": _git("rev-parse", "--short", "HEAD") + dirty,
    }


def run_settings(a, load_before: float, load_after: float) -> dict:
    """What bench_report.settings needs to describe the run (kept in the run's meta)."""
    return {
        "preset": a.preset,
        "models": a.models,
        "seed": a.seed,
        "frames": a.frames,
        "words": len(TEXT.split()),
        "codec": a.codec,
        "chunk_frames": a.chunk_frames,
        "reps": a.reps,
        "load_average": [load_before, load_after],
    }


def run_name(meta: dict) -> str:
    """A recorded run's file name: <UTC date>-<commit>.json, e.g. 2026-12-03-1237-c84e802.json
    (-dirty when the tree had uncommitted changes); names sort by date."""
    date = meta["date"].removesuffix(" UTC").replace(" ", "-").replace(":", "")
    commit = (meta["commit"].split() or ["nocommit"])[0]
    return f"{date}-{commit}{'-dirty' if 'uncommitted' in meta['commit'] else ''}.json"


def record(results: dict, directory: pathlib.Path) -> pathlib.Path:
    """Writes a run as directory/<run_name>.json (the content of results.json); returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / run_name(results["meta"])
    path.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-tts", help="llama-tts binary (make llama-tts)")
    ap.add_argument("--preset", default="0.6b")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--frames",
        type=int,
        default=64,
        help=f"frames per request (below {bench_llama_tts.WAV_WINDOW} llama-tts's codec time is separate)",
    )
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument(
        "--weights",
        nargs="+",
        default=["f16", "q8_0"],
        choices=["f32", "f16", "q8_0"],
        help="GGUF types for kazetts and llama-tts",
    )
    ap.add_argument(
        "--variants",
        nargs="*",
        type=variant,
        default=VARIANTS,
        metavar="TALKER/MMPROJ",
        help="kazetts only: talker/code predictor types, held against F32's codes "
        f"(default {' '.join(VARIANTS)}; none: --variants with no value)",
    )
    ap.add_argument(
        "--models",
        nargs="+",
        default=[BASE],
        choices=[BASE, CUSTOM_VOICE],
        help="synthetic checkpoints (custom_voice: the kazetts engines only)",
    )
    ap.add_argument("--engines", nargs="+", default=ENGINES, choices=ENGINES)
    ap.add_argument("--codec", default="f16", help="kazetts codec decoder weights")
    ap.add_argument("--chunk-frames", type=int, default=4, help="kazetts: frames per audio chunk after the first")
    ap.add_argument(
        "--kazetts-prompts",
        nargs="+",
        default=bench_report.PROMPTS,
        choices=bench_report.PROMPTS,
        help="kazetts: text prompts to run (llama-tts and the reference run the non-streaming one)",
    )
    ap.add_argument("--out", type=pathlib.Path, default=REPO / "build" / "bench", help="results.json, WAVs")
    ap.add_argument(
        "--reps",
        type=int,
        default=1,
        help="runs of each row (odd), interleaved; a row is its run of median request time",
    )
    ap.add_argument(
        "--record",
        type=pathlib.Path,
        metavar="DIR",
        help="also write the run as DIR/<UTC date>-<commit>.json (make bench: docs/bench/runs)",
    )
    ap.add_argument("--chart", type=pathlib.Path, help="PNG bar chart (drawn in the reference environment)")
    a = ap.parse_args()
    if a.reps < 1 or a.reps % 2 == 0:
        ap.error("--reps takes an odd count (1, 3, 5...): a row is its run of median request time")
    if "llama-tts" in a.engines and not (a.llama_tts and pathlib.Path(a.llama_tts).exists()):
        ap.error("llama-tts not found: build it with `make llama-tts` and pass --llama-tts PATH")
    a.out.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]

    from kazetts.stages.talker import extra_buffers
    from kazetts.stages.talker_file import TalkerFile

    runs = plan(a)
    files = {
        (model, w): model_files(a.preset, w, model, a.seed)
        for model, w in dict.fromkeys((m, w) for _, m, e, w, _ in runs if e != "reference")
    }
    files["checkpoint"] = checkpoint(a.preset, BASE, a.seed)
    first = TalkerFile(model_files(a.preset, a.weights[0], BASE, a.seed)[0])
    files["eos_token"] = first.text_vocab_size + first.voices.codec_eos
    files["repack"] = extra_buffers()  # llama-tts's buffers as kazetts's talker chooses them
    wav = speaker_wav(a.out / "speaker.wav")
    voice = {"wav": wav, "xvector": xvector(files["checkpoint"], wav)}
    if CUSTOM_VOICE in a.models:
        voice["speaker"] = next(
            iter(TalkerFile(model_files(a.preset, a.weights[0], CUSTOM_VOICE, a.seed)[0]).voices.speakers)
        )

    meta = machine()  # the commit measured (a long run outlasts commits made meanwhile)
    reps: list[list[dict]] = [[] for _ in runs]
    for rep, i in rounds(len(runs), a.reps):
        (threads, model, engine, weights, prompt), done = runs[i], reps[i]
        # the teacher-forced shares (untimed) once, on the F32 codes of the first round
        forced = f32_codes([r[-1] for r in reps if r], model, threads, prompt) if rep == 0 else None
        done.append(run_engine(engine, weights, threads, a, files, voice, a.out, prompt, model, forced, rep))
        print(
            bench_report.table(done[-1:]).splitlines()[-1] + (f" (run {rep + 1} of {a.reps})" if a.reps > 1 else ""),
            flush=True,
        )
    rows = [median_run(r) for r in reps]
    codes_agreement(rows)
    meta.update(run_settings(a, load_before, os.getloadavg()[0]))
    title = f"kazetts vs llama-tts vs PyTorch, {a.preset}, {a.frames} frames; {meta['cpu']}, {meta['date']}"
    results = {"title": title, "meta": meta, "rows": rows}
    print("\n" + bench_report.report(results))
    (a.out / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    if a.record:
        print(f"run recorded as {record(results, a.record)}")
    if a.chart:
        r = run_measured(
            [str(REF_PYTHON), "scripts/bench_report.py", "--chart", str(a.out / "results.json"), str(a.chart)]
        )
        if r.returncode != 0:
            print(f"chart failed:\n{r.stderr[-2000:]}", file=sys.stderr)
            return 1
    return 1 if any(row.get("error") or row.get("forced_error") for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
