#!/usr/bin/env python3
"""Instructions per frame and per stage on aarch64, counted under qemu-aarch64 (no device):
kazetts' native engine (tts.h) beside llama.cpp's own llama-tts, on the same 0.6B Q8_0 files,
at three CPU levels. Entry point: make aarch64-count.

    .venv/bin/python scripts/aarch64_count.py [--levels a53 a76 max] [--engines kazetts llama-tts]
                     [--frames 9] [--bytes] [--kazetts-ggml level|baseline] [--json OUT.json]
    .venv/bin/python scripts/aarch64_count.py --self-check   # the plugin on known counts (CI)

Per level (the -cpu of qemu, and the -march every library of that row is built for):

    a53  -cpu cortex-a53  armv8-a                         (no dotprod)
    a76  -cpu cortex-a76  armv8.2-a+dotprod+fp16          (dotprod)
    max  -cpu max         armv8.2-a+dotprod+fp16+i8mm     (i8mm)

llama.cpp (ggml, llama, mtmd, llama-tts from the llama-cpp-python sdist) is cross-built once per
level and cached in KAZETTS_CACHE (a +dotprod ggml dies of SIGILL on a Cortex-A53, so each level
has its own); native/ is cross-built against the same ggml (--kazetts-ggml baseline: against the
ARMv8.0 ggml of `make aarch64-test` instead, kazetts' own kernels chosen at run time).

How the counting works: a qemu TCG plugin of ours (scripts/qemu/kzcount.c, built by
scripts/qemu_plugin.sh) counts the guest instructions executed, per translation block with an
inline counter, and charges them to the stage on top of a stack that marker instructions push
and pop. A marker is an ARM `hint #N` of a number no ARMv8/9 core gives a meaning to (a NOP on
every core, and under qemu): kazetts has them in its frame loop (native/src/core/stage_mark.h);
llama-tts, which is not modified, gets them from an LD_PRELOAD shim (scripts/qemu/llama_tts_stages.c)
that wraps the public calls its frame loop makes (mtmd_helper_gen_audio_*, llama_process,
mtmd_gen_audio_process). Beside all instructions it counts SIMD & FP ones and loads / stores
(by the A64 encoding), and with --bytes the bytes loaded (a callback per access: slower). Both
engines compute on one thread at a time (THREADS), greedy, the non-streaming text prompt,
end-of-speech forbidden (llama-tts: --logit-bias <eos>-inf; kazetts: min_frames), exactly
--frames frames, the same x-vector / speaker clip as scripts/bench.py. Instruction counts do not
depend on the machine's load: a run of one thread is reproducible to the instruction for the same
binaries; kazetts' (three threads handing work over) to ~2,500 instructions a stage in 10^9.

Stages: prefill (the talker on the prompt) and request setup (text, prompt rows, llama-tts's
speaker encoding) are totals; per frame: talker (decoding steps), code predictor, codec, other
(sampling and glue inside the frame loop; llama-tts decodes the audio at the end, kazetts every
4 frames, both inside the request). Load and exit are outside the request and not reported.
Beside the counts: the weights each stage reads per frame (from the files' tensor sizes), and at
the a76 level a projection for a Cortex-A76 and a Cortex-X1 phone core from their published
decode width, vector pipes, clock and DRAM bandwidth (CORES): a floor, not a measurement.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from kazetts.stages.codec import WEIGHTS as CODEC_WEIGHTS  # noqa: E402

KAZETTS_CACHE = pathlib.Path(os.environ.get("KAZETTS_CACHE", pathlib.Path.home() / ".cache" / "kazetts"))
LLAMA_SRC = pathlib.Path(os.environ.get("LLAMA_SRC", KAZETTS_CACHE / "src" / "llama_cpp_python-0.3.36"))
TOOLCHAIN = REPO / "native" / "cmake" / "aarch64-linux-gnu.cmake"
SYSROOT = "/usr/aarch64-linux-gnu"
BUILD = REPO / "build" / "aarch64-count"
PLUGIN = REPO / "build" / "qemu-plugin" / "libkzcount.so"
COUNTS_CACHE = KAZETTS_CACHE / "aarch64-count"  # every run's counts, by what they depend on (run_key)
LEVELS = {
    "a53": ("cortex-a53", "armv8-a"),
    "a76": ("cortex-a76", "armv8.2-a+dotprod+fp16"),
    "max": ("max", "armv8.2-a+dotprod+fp16+i8mm"),
}
BASELINE_ARCH = "armv8-a"  # scripts/aarch64_goldens.sh's ggml: kazetts picks its kernels at run time
TEXT = "Bonjour tout le monde."
LANGUAGE = "french"
JOBS = "2"
# llama.cpp's libraries and llama-tts: shared libraries (the shim interposes on libmtmd's and
# libllama's exported calls), OpenMP as scripts/aarch64_goldens.sh, everything in one directory.
LLAMA_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=ON",
    "-DGGML_NATIVE=OFF",
    "-DGGML_OPENMP=ON",
    "-DGGML_CCACHE=OFF",
    "-DLLAMA_BUILD_COMMON=ON",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DCMAKE_BUILD_RPATH=$ORIGIN",
]


def log(msg: str) -> None:
    print(f"== {msg} ({time.strftime('%H:%M:%S')})", flush=True)


def quietly(log_file: pathlib.Path, cmd: list[str], **kw) -> None:
    """Runs a command with its output in a log file, shown (its end) only when it fails."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=False, **kw)
    if r.returncode != 0:
        sys.stderr.write("".join(log_file.read_text(errors="replace").splitlines(keepends=True)[-40:]))
        sys.exit(f"failed: {' '.join(map(str, cmd))} (log: {log_file})")


def ensure_packages() -> None:
    """The cross compiler, qemu-user and CMake from Debian, installed when missing (as
    scripts/aarch64_goldens.sh does)."""
    wanted = {"aarch64-linux-gnu-g++": "g++-aarch64-linux-gnu", "qemu-aarch64": "qemu-user", "cmake": "cmake"}
    missing = [pkg for tool, pkg in wanted.items() if not shutil.which(tool)]
    if not missing:
        return
    log(f"installing {' '.join(missing)}")
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", *missing], check=True, env=env, stdout=subprocess.DEVNULL)


def compiler_version() -> str:
    return subprocess.run(
        ["aarch64-linux-gnu-g++", "--version"], capture_output=True, text=True, check=True
    ).stdout.splitlines()[0]


def key(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def llama_build(arch: str) -> pathlib.Path:
    """llama.cpp's libraries and llama-tts for aarch64 at `arch`, built once into the cache:
    a directory holding bin/ (llama-tts and every .so, RPATH $ORIGIN) and include/."""
    flags = [*LLAMA_FLAGS, f"-DGGML_CPU_ARM_ARCH={arch}"]
    prefix = KAZETTS_CACHE / f"aarch64-tts-{key(LLAMA_SRC.name, *flags, TOOLCHAIN.read_text(), compiler_version())}"
    if (prefix / ".built").exists():
        log(f"llama.cpp + llama-tts for aarch64 ({arch}): cached in {prefix}")
        return prefix
    log(f"cross-building llama.cpp + llama-tts for aarch64 ({arch}) into {prefix}")
    build = BUILD / f"llama-{arch}"
    shutil.rmtree(prefix, ignore_errors=True)
    src = LLAMA_SRC / "vendor" / "llama.cpp"
    quietly(
        build / "configure.log",
        ["cmake", "-S", src, "-B", build, f"-DCMAKE_TOOLCHAIN_FILE={TOOLCHAIN}", *flags],
    )
    quietly(build / "build.log", ["cmake", "--build", build, "-j", JOBS, "--target", "llama-tts"])
    (prefix / "bin").mkdir(parents=True)
    (prefix / "include").mkdir()
    for f in (build / "bin").iterdir():
        if f.name == "llama-tts" or ".so" in f.name:
            shutil.copy2(f, prefix / "bin" / f.name, follow_symlinks=False)
    for h in [*(src / "ggml" / "include").glob("*.h"), *(src / "include").glob("*.h")]:
        shutil.copy2(h, prefix / "include" / h.name)
    (prefix / ".built").write_text(arch + "\n")
    shutil.rmtree(build)
    return prefix


def native_build(prefix: pathlib.Path) -> pathlib.Path:
    """libkazetts for aarch64 against the ggml + llama of `prefix` (CMake rebuilds what changed)."""
    build = BUILD / f"native-{prefix.name}"
    log(f"cross-building native/ against {prefix.name}")
    quietly(
        build / "configure.log",
        [
            "cmake",
            "-S",
            REPO / "native",
            "-B",
            build,
            f"-DCMAKE_TOOLCHAIN_FILE={TOOLCHAIN}",
            f"-DGGML_INCLUDE_DIR={prefix / 'include'}",
            f"-DLLAMA_INCLUDE_DIR={prefix / 'include'}",
            f"-DGGML_LIB_DIR={prefix / 'bin'}",
            "-DKAZETTS_JNI=OFF",
            "-DKAZETTS_SOXR_SRC=",
        ],
    )
    quietly(build / "build.log", ["cmake", "--build", build, "-j", JOBS, "--target", "kazetts"])
    return build


def driver_build(native: pathlib.Path, prefix: pathlib.Path) -> pathlib.Path:
    """The tts.h driver (scripts/qemu/kazetts_frames.c) against `native`'s libkazetts."""
    driver = native / "kazetts_frames"
    quietly(
        native / "driver.log",
        [
            "aarch64-linux-gnu-gcc",
            "-O2",
            "-Wall",
            "-Wextra",
            f"-I{REPO / 'native' / 'include'}",
            "-o",
            driver,
            REPO / "scripts" / "qemu" / "kazetts_frames.c",
            f"-L{native}",
            "-lkazetts",
            f"-Wl,-rpath,{native}:{prefix / 'bin'}",
        ],
    )
    return driver


def shim_build() -> pathlib.Path:
    """llama-tts's stage marks (scripts/qemu/llama_tts_stages.c), an LD_PRELOAD library; its code
    does not depend on the level (no vector code)."""
    src = LLAMA_SRC / "vendor" / "llama.cpp"
    shim = BUILD / "llama_tts_stages.so"
    quietly(
        BUILD / "shim.log",
        [
            "aarch64-linux-gnu-gcc",
            "-shared",
            "-fPIC",
            "-O2",
            "-Wall",
            "-Wextra",
            *(f"-I{src / d}" for d in ("include", "ggml/include", "tools/mtmd")),
            "-o",
            shim,
            REPO / "scripts" / "qemu" / "llama_tts_stages.c",
            "-ldl",
        ],
    )
    return shim


def plugin() -> pathlib.Path:
    quietly(BUILD / "plugin.log", [REPO / "scripts" / "qemu_plugin.sh"])
    return PLUGIN


def inputs(frames: int, out: pathlib.Path) -> dict:
    """The 0.6B Base Q8_0 files of scripts/bench.py, the speaker clip (llama-tts encodes it) and
    its x-vector by the reference's encoder (kazetts takes it), the codec end-of-speech token."""
    import bench
    import numpy as np
    from bench_common import CACHE, REF_PYTHON, checkpoint, weights_file

    from kazetts.gguf.header import GGUFHeader

    talker = weights_file("0.6b", "talker", "q8_0", "base", 0)
    mmproj = weights_file("0.6b", "mmproj", "q8_0", "base", 0)
    # the token llama-tts's pipeline ends speech with (mtmd-helper-gen.cpp), read without libkazetts
    eos = GGUFHeader(talker).kv["tokenizer.ggml.tokens"].index("<|codec_eos_token|>")
    wav = bench.speaker_wav(out / "speaker.wav")
    xvector = out / "xvector.f32"
    ck = checkpoint("0.6b", "base", 0)
    cached = CACHE / f"{ck.name}-xvector-{hashlib.sha256(wav.read_bytes()).hexdigest()[:12]}.npy"
    if cached.exists() or REF_PYTHON.exists():  # bench.xvector: the reference's encoder, once
        vector = np.load(bench.xvector(ck, wav))
    else:  # the work per frame does not depend on the x-vector's values
        log(f"no {REF_PYTHON} for the reference's x-vector of the clip: kazetts gets a random one")
        vector = np.random.default_rng(0).standard_normal(int(GGUFHeader(talker).kv["qwen3tts.embedding_length"]))
    vector.astype("<f4").tofile(xvector)
    return {
        "talker": talker,
        "mmproj": mmproj,
        "wav": wav,
        "xvector": xvector,
        "eos_token": eos,
    }


def qemu(cpu: str, counts: pathlib.Path, count_bytes: bool, env: dict, cmd: list) -> subprocess.CompletedProcess:
    plugin_arg = f"{PLUGIN},out={counts}" + (",bytes=on" if count_bytes else "")
    envs = [x for k, v in env.items() for x in ("-E", f"{k}={v}")]
    full = ["qemu-aarch64", "-L", SYSROOT, "-cpu", cpu, "-plugin", plugin_arg, *envs, *map(str, cmd)]
    return subprocess.run(full, capture_output=True, text=True, check=False)


def run_engine(engine: str, level: str, a, files: dict, builds: dict) -> dict:
    """One engine at one level under qemu with the counting plugin -> its counts and frames."""
    cpu = LEVELS[level][0]
    out = a.out / level
    out.mkdir(parents=True, exist_ok=True)
    counts = out / f"{engine}.json"
    counts.unlink(missing_ok=True)
    env = {"OMP_THREAD_LIMIT": "1"}
    if engine == "kazetts":
        cmd = [builds["driver"], files["talker"], files["mmproj"], files["xvector"], a.frames, TEXT, LANGUAGE]
        if a.kazetts_codec != "f16":
            cmd.append(CODEC_WEIGHTS[a.kazetts_codec])
    else:
        import bench_llama_tts

        cmd = bench_llama_tts.command(
            str(builds["llama_prefix"] / "bin" / "llama-tts"),
            str(files["talker"]),
            str(files["mmproj"]),
            TEXT,
            LANGUAGE,
            a.frames,
            1,
            str(files["wav"]),
            files["eos_token"],
            str(out / "llama-tts.wav"),
            True,
        )
        env["LD_PRELOAD"] = str(builds["shim"])
    cached = COUNTS_CACHE / f"{engine}-{level}-{run_key(engine, cpu, a, files, builds, cmd, env)}.json"
    if cached.exists() and not a.fresh:
        data = json.loads(cached.read_text())
        data["cached"] = str(cached)
        return data
    start = time.monotonic()
    r = qemu(cpu, counts, a.bytes, env, cmd)
    seconds = time.monotonic() - start
    (out / f"{engine}.log").write_text(r.stdout + r.stderr)
    if r.returncode != 0 or not counts.exists():
        raise RuntimeError(
            f"{engine} at {level} failed (exit {r.returncode}); its output ends with:\n{(r.stdout + r.stderr)[-3000:]}"
        )
    data = json.loads(counts.read_text())
    if engine == "kazetts":
        frames = json.loads(r.stdout.strip().splitlines()[-1])["frames"]
    else:
        import re

        frames = int(re.search(r"generated (\d+) frames", r.stdout + r.stderr).group(1))
    data.update(engine=engine, level=level, frames=frames, qemu_seconds=round(seconds, 1))
    if engine == "kazetts":
        data["codec_weights"] = a.kazetts_codec
    COUNTS_CACHE.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(data) + "\n")
    return data


def run_key(engine: str, cpu: str, a, files: dict, builds: dict, cmd: list, env: dict) -> str:
    """What a run's counts depend on: every guest binary and library it loads (by content), the
    plugin, qemu, the CPU model, the command line and the inputs. Counts are deterministic, so a
    run with the same key is not run again (--fresh does)."""
    h = hashlib.sha256()
    binaries = [PLUGIN, *sorted((builds["llama_prefix"] / "bin").iterdir())]
    binaries += (
        [builds["driver"], builds["driver"].parent / "libkazetts.so"] if engine == "kazetts" else [builds["shim"]]
    )
    if engine == "kazetts" and builds["kazetts_prefix"] != builds["llama_prefix"]:
        binaries += sorted((builds["kazetts_prefix"] / "bin").iterdir())
    for f in binaries:
        if f.is_file() and not f.is_symlink():
            h.update(f.name.encode() + hashlib.sha256(f.read_bytes()).digest())
    qemu_version = subprocess.run(["qemu-aarch64", "--version"], capture_output=True, text=True, check=True).stdout
    for part in (qemu_version, cpu, str(a.bytes), json.dumps(env, sort_keys=True), *map(str, cmd[1:])):
        h.update(part.encode() + b"\0")
    for f in (files["talker"], files["mmproj"]):
        st = f.stat()
        h.update(f"{f.name} {st.st_size} {st.st_mtime_ns}".encode())
    for f in (files["wav"], files["xvector"]):
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()[:16]


# kzcount's slots (native/src/core/stage_mark.h): 0 outside, 1 frame-loop glue, 2 prefill,
# 3 talker, 4 code predictor, 5 codec, 16 the request's set-up
SLOTS = {
    "outside": 0,
    "other": 1,
    "request": 1,
    "prefill": 2,
    "talker": 3,
    "code predictor": 4,
    "codec": 5,
    "setup": 16,
}
PER_FRAME = ["talker", "code predictor", "codec", "other"]
# The guest threads of a run; what runs inside the frame loop computes on one thread at a time.
# kazetts: the caller, kz_tts_load's loader (joined before the request) and the batcher's thread,
# where the talker, code predictor and serial codec run while the request's thread waits for them;
# the instructions go to the stage the request's thread marked; three runs of the same binaries
# differed by <= 2,500 instructions a stage (a hand-off's waits). llama-tts (OMP_THREAD_LIMIT=1):
# 6 seen, its own thread and helpers that do not compute in the frame loop (common's logger; mtmd's
# log-mel workers, which encode the speaker clip in the set-up; the model loader's); its talker
# step counts what kazetts' does on the same ggml kernels (107.2 vs 107.4 M at a76).
THREADS = {"kazetts": 3, "llama-tts": 6}


def codec_window_frames(run: dict) -> int:
    """The frames a run's codec decoded: llama-tts decodes windows of 72 frames (its codec graph
    has 72 frame slots, mtmd-helper-gen.cpp / qwen3tts-gen.cpp), the last one padded, so a request
    of fewer frames still pays one window: its codec per frame is a window's count / 72. kazetts
    decodes the frames it made (pushes of 1, then 4)."""
    if run["engine"] != "llama-tts":
        return run["frames"]
    import bench_llama_tts

    calls = next(s["begins"] for s in run["slots"] if s["slot"] == SLOTS["codec"])
    return bench_llama_tts.WAV_WINDOW * calls


def figures(run: dict) -> dict:
    """Per frame (millions): the frame-loop stages over the frames; totals (millions): prefill,
    setup. Also, where the run counted them, SIMD & FP and load / store instructions (simd, memory)
    and bytes loaded (read)."""
    slots = {s["slot"]: s for s in run["slots"]}
    per = {name: run["frames"] for name in PER_FRAME}
    per["codec"] = codec_window_frames(run)

    def per_frame(field: str) -> dict:
        out = {name: slots[SLOTS[name]][field] / per[name] / 1e6 for name in PER_FRAME}
        out["total"] = sum(out[n] for n in PER_FRAME)
        out["prefill"] = slots[SLOTS["prefill"]][field] / 1e6
        out["setup"] = slots[SLOTS["setup"]][field] / 1e6
        return out

    out = per_frame("insns")
    if "simd_fp" in slots[0]:
        out["simd"], out["memory"] = per_frame("simd_fp"), per_frame("loads_stores")
    if run.get("bytes"):
        out["read"] = per_frame("bytes_read")
    out["calls"] = {name: slots[SLOTS[name]]["begins"] for name in ("talker", "code predictor", "codec")}
    return out


def weight_bytes(files: dict, engine: str, codec_frames: int, codec_reads: int) -> dict:
    """MB of weights a stage of `engine` reads per frame, from the files' tensor sizes: the talker's
    every matrix per step (its token table only by rows: not counted), the code predictor's layers
    once per pass (15 a frame: one per codebook 1..15) and each codebook's head once, the codec's
    weights (its codebooks only by rows) once per decode. kazetts keeps the code predictor's F32
    ffn_down in the type of the block's other matrices when they are block-quantized
    (KZ_CP_WEIGHTS_AUTO, kazetts/code_predictor.h); llama-tts reads it as stored. What a core must
    stream from DRAM when the weights exceed its caches."""
    import gguf

    from kazetts.gguf.header import GGUFHeader

    talker, mmproj = GGUFHeader(files["talker"]), GGUFHeader(files["mmproj"])

    def cp_bytes(name: str) -> int:
        if engine == "kazetts" and name.endswith(".ffn_down.weight") and mmproj.tensors[name][1].name == "F32":
            layer_type = mmproj.tensors[name.replace(".ffn_down.", ".attn_q.")][1]
            if gguf.GGML_QUANT_SIZES[layer_type][0] > 1:
                return mmproj.nbytes(name, layer_type)
        return mmproj.nbytes(name)

    step = sum(talker.nbytes(n) for n in talker.tensors if n != "token_embd.weight")
    layers = sum(cp_bytes(n) for n in mmproj.tensors if n.startswith("a.gen.code.blk."))
    heads = mmproj.nbytes("a.gen.code.head.weight")
    passes = mmproj.tensors["a.gen.code.head.weight"][0][2]  # one head per codebook 1..15
    codec = sum(
        mmproj.nbytes(n) for n in mmproj.tensors if n.startswith("a.gen.wav.") and not n.endswith(".codebook.weight")
    )
    return {
        "talker": step / 1e6,
        "code predictor": (passes * layers + heads) / 1e6,
        "codec": codec * codec_reads / codec_frames / 1e6,
    }


# Published figures of two phone cores (a projection from them is not a measurement): clock of a
# SoC's big core, instructions decoded a cycle, 128-bit vector pipes, and the SoC's peak DRAM
# bandwidth. Cortex-A76: 4-wide decode, two 128-bit NEON pipes (Arm, AnandTech 2018); Snapdragon
# 855: its big A76 at 2.84 GHz, LPDDR4X-4266 on 4 x 16 bits, 34.1 GB/s. Cortex-X1: 5-wide decode,
# four 128-bit NEON pipes (Arm, AnandTech 2020); Snapdragon 888: its X1 at 2.84 GHz, LPDDR5-6400
# on 4 x 16 bits, 51.2 GB/s.
CORES = {
    "Cortex-A76 (Snapdragon 855)": {"hz": 2.84e9, "decode": 4, "vector": 2, "bandwidth": 34.1e9},
    "Cortex-X1 (Snapdragon 888)": {"hz": 2.84e9, "decode": 5, "vector": 4, "bandwidth": 51.2e9},
}


def projection(fig: dict, weights: dict) -> str:
    """Per stage, a floor of ms per frame on one core of each of CORES: the largest of the
    instructions over the decode width, the SIMD & FP instructions over the vector pipes, and the
    weights over the DRAM bandwidth (each bound ignores the others' stalls; real cores sustain
    less than each peak, so real times are higher)."""
    lines = [
        "\nProjection (not a measurement): ms per frame >= max(instructions / decode width, "
        + "SIMD & FP / vector pipes, weight bytes / DRAM bandwidth), one core",
        "| stage | weights MB/frame | " + " | ".join(f"{c}: decode / vector / DRAM = floor" for c in CORES) + " |",
        "|---|---|" + "---|" * len(CORES),
    ]
    totals = {c: 0.0 for c in CORES}
    for name in ("talker", "code predictor", "codec"):
        row = [name, f"{weights[name]:.0f}"]
        for c, k in CORES.items():
            bounds = (
                fig[name] * 1e6 / k["decode"] / k["hz"] * 1e3,
                fig["simd"][name] * 1e6 / k["vector"] / k["hz"] * 1e3,
                weights[name] * 1e6 / k["bandwidth"] * 1e3,
            )
            totals[c] += max(bounds)
            row.append(" / ".join(f"{b:.1f}" for b in bounds) + f" = **{max(bounds):.1f}**")
        lines.append("| " + " | ".join(row) + " |")
    lines.append("| frame (80 ms of audio) | | " + " | ".join(f"**{totals[c]:.1f}**" for c in CORES) + " |")
    return "\n".join(lines)


def compared(label: str, by: dict, get, names) -> list[str]:
    """Table rows of get(figures)[name] per engine of `by`, with llama-tts / kazetts when both."""
    engines = [e for e in ("kazetts", "llama-tts") if e in by]
    lines = []
    for name in names:
        row = [f"{get(by[e])[name]:.1f}" for e in engines]
        if len(engines) == 2:
            k = get(by["kazetts"])[name]
            row.append(f"{get(by['llama-tts'])[name] / k:.2f}" if k else "n/a")
        lines.append(f"| {label}{name} | " + " | ".join(row) + " |")
    return lines


def table(runs: list[dict], frames: int, files: dict | None = None) -> str:
    lines = []
    for level in dict.fromkeys(r["level"] for r in runs):
        by = {r["engine"]: figures(r) for r in runs if r["level"] == level}
        for r in runs:
            if files and r["level"] == level:
                reads = by[r["engine"]]["calls"]["codec"]
                by[r["engine"]]["weights"] = weight_bytes(files, r["engine"], codec_window_frames(r), reads)
        cpu, arch = LEVELS[level]
        lines.append(
            f"\n{level}: qemu -cpu {cpu}, llama.cpp built {arch}; {frames} frames, 1 thread; "
            "M instructions per frame (prefill, setup: M in all)"
        )
        engines = [e for e in ("kazetts", "llama-tts") if e in by]
        head = "| stage | " + " | ".join(engines) + (" | llama-tts / kazetts |" if len(engines) == 2 else " |")
        lines += [head, "|" + "---|" * (len(engines) + 1 + (len(engines) == 2))]
        lines += compared("", by, lambda f: f, [*PER_FRAME, "total", "prefill", "setup"])
        for key, label in (("simd", "SIMD & FP: "), ("memory", "loads / stores: "), ("read", "MB loaded: ")):
            if all(key in by[e] for e in engines):
                lines += compared(label, by, lambda f, key=key: f[key], [*PER_FRAME, "total"])
        if files:
            lines += compared("weights MB: ", by, lambda f: f["weights"], ["talker", "code predictor", "codec"])
        calls = "; ".join(f"{e}: " + ", ".join(f"{k} {v}" for k, v in by[e]["calls"].items()) for e in engines)
        lines.append(f"calls ({frames} frames): {calls}")
        if files and "kazetts" in by and "simd" in by["kazetts"] and level == "a76":
            lines.append(projection(by["kazetts"], by["kazetts"]["weights"]))
    return "\n".join(lines)


def self_check() -> int:
    """The plugin against a program of known counts (scripts/qemu/count_check.c): every stage's
    instructions, SIMD & FP and loads / stores exactly, no mark error, one thread."""
    program = BUILD / "count_check"
    program.parent.mkdir(parents=True, exist_ok=True)
    quietly(
        BUILD / "count_check.log",
        ["aarch64-linux-gnu-gcc", "-O2", "-static", "-o", program, REPO / "scripts" / "qemu" / "count_check.c"],
    )
    counts = BUILD / "count_check.json"
    r = qemu("cortex-a53", counts, False, {}, [program])
    if r.returncode != 0 or not counts.exists():
        sys.exit(f"count check: the program failed under qemu (exit {r.returncode}): {r.stderr[-2000:]}")
    run = json.loads(counts.read_text())
    slots = {s["slot"]: s for s in run["slots"]}
    expected = r.stdout.split("EXPECTED ", 1)[1].strip()
    seen = ", ".join(
        f"{name} {slots[SLOTS[name]]['insns']} {slots[SLOTS[name]]['simd_fp']} {slots[SLOTS[name]]['loads_stores']}"
        for name in ("setup", "request", "prefill", "talker")
    )
    state = (run["threads"], run["mark_errors"], run["depth_at_exit"])
    if seen != expected or state != (1, 0, 0):
        sys.exit(f"count check FAILED: counted {seen!r} (threads, mark errors, depth {state}), expected {expected!r}")
    print(f"count check: {seen} (exact)")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", nargs="+", default=list(LEVELS), choices=list(LEVELS))
    ap.add_argument("--engines", nargs="+", default=["kazetts", "llama-tts"], choices=["kazetts", "llama-tts"])
    ap.add_argument("--frames", type=int, default=9, help="frames per request (kazetts: 1 + 4 + 4 in its chunks)")
    ap.add_argument("--bytes", action="store_true", help="also bytes read per stage (a callback per access: slower)")
    ap.add_argument(
        "--kazetts-ggml",
        choices=["level", "baseline"],
        default="level",
        help="kazetts against the level's ggml (as llama-tts), or the ARMv8.0 one at every level",
    )
    ap.add_argument(
        "--kazetts-codec",
        choices=list(CODEC_WEIGHTS),
        default="f16",
        help="kazetts' codec weights (f16-sums: float16 sums where the level has FP16 arithmetic)",
    )
    ap.add_argument("--out", type=pathlib.Path, default=BUILD / "runs")
    ap.add_argument("--json", type=pathlib.Path, help="also write every run's counts there")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--fresh", action="store_true", help="run again what the count cache holds")
    ap.add_argument("--self-check", action="store_true", help="only check the plugin on a program of known counts")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    ensure_packages()
    plugin()
    if a.self_check:
        return self_check()
    builds = {}
    shim = shim_build() if "llama-tts" in a.engines else None
    for level in a.levels:
        prefix = llama_build(LEVELS[level][1])
        builds[level] = {"llama_prefix": prefix, "shim": shim}
        if "kazetts" in a.engines:
            kz_prefix = prefix if a.kazetts_ggml == "level" else llama_build(BASELINE_ARCH)
            builds[level]["kazetts_prefix"] = kz_prefix
            builds[level]["driver"] = driver_build(native_build(kz_prefix), kz_prefix)
    if a.build_only:
        return 0
    log("inputs: 0.6B Base Q8_0 files, speaker clip and x-vector (host)")
    files = inputs(a.frames, a.out)
    runs = []
    for level in a.levels:
        for engine in a.engines:
            log(f"{engine} under qemu-aarch64 -cpu {LEVELS[level][0]} ({a.frames} frames)")
            run = run_engine(engine, level, a, files, builds[level])
            problems = []
            if run["frames"] != a.frames:
                problems.append(f"{run['frames']} frames")
            if run["threads"] != THREADS[engine] or run["mark_errors"] or run["depth_at_exit"]:
                problems.append(
                    f"threads {run['threads']}, mark errors {run['mark_errors']}, depth at exit {run['depth_at_exit']}"
                )
            if problems:
                raise SystemExit(f"{engine} at {level}: " + "; ".join(problems))
            log(f"{engine}: {run['total'] / 1e9:.2f} G instructions in all, {run['qemu_seconds']} s under qemu")
            runs.append(run)
    print(table(runs, a.frames, files))
    if a.json:
        a.json.write_text(json.dumps(runs, indent=1) + "\n")
    log(f"done in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
