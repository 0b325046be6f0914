"""Shared by the benchmarks: cached synthetic checkpoints and GGUF files, measured subprocesses."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
CACHE = pathlib.Path(os.environ.get("KAZETTS_CACHE", pathlib.Path.home() / ".cache" / "kazetts")) / "models"
# What every engine says in the benchmark: a French paragraph of 20 words.
TEXT = (
    "Le vieux port de Marseille s'éveille doucement. Les pêcheurs rentrent au quai, "
    "et l'odeur du pain chaud envahit les ruelles."
)
REF_PYTHON = pathlib.Path(os.environ.get("KAZETTS_REF_PYTHON", REPO / ".venv-ref" / "bin" / "python"))


def checkpoint(preset: str, model_type: str = "custom_voice", seed: int = 0) -> pathlib.Path:
    """The synthetic checkpoint of a preset, type and seed, built once."""
    from kazetts.synthetic.checkpoint import make_checkpoint

    d = CACHE / f"synthetic-{preset}-{model_type}-{seed}"
    if not (d / ".complete").exists():
        print(f"building synthetic checkpoint {d} ...", flush=True)
        make_checkpoint(preset, d, model_type, seed)
        (d / ".complete").write_text("ok")
    return d


def converted(preset: str, out_type: str, model_type: str = "custom_voice", seed: int = 0):
    """(talker, mmproj) GGUF files of that checkpoint converted to `out_type`, converted once."""
    from kazetts.tools.convert import convert_checkpoint

    ck = checkpoint(preset, model_type, seed)
    d = CACHE / f"{ck.name}-gguf-{out_type}"
    talker, mmproj = d / f"{ck.name}-talker-{out_type}.gguf", d / f"{ck.name}-mmproj-{out_type}.gguf"
    if not (d / ".complete").exists():
        print(f"converting {ck.name} to {out_type} in {d} ...", flush=True)
        made = convert_checkpoint(ck, d, out_type, name=ck.name, verbose=False)
        assert made == (talker, mmproj), made
        (d / ".complete").write_text("ok")
    return talker, mmproj


def weights_file(preset: str, kind: str, out_type: str, model_type: str = "custom_voice", seed: int = 0):
    """The `kind` ("talker" or "mmproj") GGUF file of that checkpoint at `out_type`: converted for
    the types `kazetts convert` writes, else (q4_0, q4_k_m, ...) `kazetts quantize` of the F32 file,
    as users make them; quantized once (quantize renames its output into place only when done)."""
    from kazetts.tools.convert import OUT_TYPES
    from kazetts.tools.quantize import quantize_file

    index = ("talker", "mmproj").index(kind)
    if out_type in OUT_TYPES:
        return converted(preset, out_type, model_type, seed)[index]
    source = converted(preset, "f32", model_type, seed)[index]
    ck = checkpoint(preset, model_type, seed)
    out = CACHE / f"{ck.name}-gguf-{out_type}" / f"{ck.name}-{kind}-{out_type}.gguf"
    if not out.exists():
        print(f"quantizing {source.name} to {out_type} ...", flush=True)
        quantize_file(source, out, out_type)
    return out


def memory_status() -> dict[str, float]:
    """This process's resident memory (VmRSS, split into RssAnon and RssFile) and its peak so far
    (VmHWM), in MB."""
    out = {}
    for line in open("/proc/self/status", encoding="ascii"):
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    if "VmHWM" not in out:
        raise RuntimeError("no VmHWM in /proc/self/status")
    return out


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (VmHWM), in MB."""
    return memory_status()["VmHWM"]


@dataclass
class Measured:
    """One finished subprocess: exit status, output, wall time and its own peak resident memory."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    peak_rss_mb: float

    def result(self) -> dict:
        """The JSON object a worker prints as its last stdout line."""
        return json.loads(self.stdout.strip().splitlines()[-1])


# A small go-between that starts the engine and reads its peak from wait4. Linux keeps a
# process's RSS high-water mark across fork and exec (ru_maxrss is a max over both images), so a
# worker forked straight from this script would report this script's own peak whenever it had
# converted or quantized first. Forked from the go-between (a bare interpreter, ~10 MB), the
# engine's ru_maxrss is its own peak for any engine larger than that.
_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


def run_measured(cmd: list[str], env: dict | None = None) -> Measured:
    """Runs `cmd` alone in its own process (through `_LAUNCHER`) and returns its own peak RSS,
    so engines measured one after the other never share a peak."""
    with (
        tempfile.TemporaryFile("w+") as out,
        tempfile.TemporaryFile("w+") as err,
        tempfile.NamedTemporaryFile("r", suffix=".maxrss") as peak,
    ):
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _LAUNCHER, peak.name, *cmd],
            stdout=out,
            stderr=err,
            cwd=REPO,
            env={**os.environ, **(env or {})},
        )
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        kib = peak.read().strip()
        return Measured(proc.returncode, out.read(), err.read(), wall, int(kib) / 1024 if kib else float("nan"))


def stage_mmproj(ck: pathlib.Path, preset: str, stage: str) -> pathlib.Path:
    """An F32 mmproj holding one stage's tensors only ("cp": code predictor, "codec": decoder)."""
    from kazetts.tools import convert as C
    from kazetts.gguf import names as N

    path = CACHE / f"synthetic-{preset}-{stage}-only-f32.gguf"
    if path.exists():
        return path
    print(f"writing {path} ...", flush=True)
    c = C._Checkpoint(ck)
    tensors = C._code_tensors(c) if stage == "cp" else C._wav_tensors(c)

    def kv(w):
        C._general(w, c, path.stem, "mmproj", 0)
        C._mmproj_kv(w, c)
        C._kazetts_keys(w, c)

    tmp = path.with_suffix(".tmp")
    C._write_file(tmp, N.MMPROJ_ARCH, tensors, "f32", True, kv, lambda m: None)
    tmp.rename(path)
    return path
