"""A time-boxed fuzzer for every file reader kazetts has (`make fuzz`).

It mutates real files (the tiny synthetic model's talker and mmproj GGUFs) with a
structure-aware GGUF mutator and feeds each mutant to the readers that take that file:

    mmproj: GGUFHeader, the native code predictor (load + one frame), the native codec (load +
            a short decode and a stream push)
    talker: GGUFHeader, TalkerFile + llama.cpp's loader through kazetts.stages.talker.Talker
            (load + one step)
    voice:  kazetts.Voice.load (a voice file with reference codes and text; its digest)

The readers run in a worker process (started with the ASan + UBSan build of libkazetts
preloaded, see the Makefile), one input at a time; the driver writes the input, waits for the
verdict and, when the worker dies or hangs, records the crash with the worker's last stderr
(the sanitizer report) and saves the input under <out>/failures/. A reader may accept an input
or reject it with its error type (GGUFError, NativeError of a bad-file status) and a message;
anything else (another exception, an empty message, a crash, a sanitizer report, a hang) is a
failure, grouped by signature. The exit status is non-zero when any failure was seen.

    python -m kazetts.validation.fuzz --seconds 600 --seed 1 --out build/fuzz
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import pathlib
import random
import re
import select
import struct
import subprocess
import sys
import time
import traceback

import numpy as np

from kazetts.validation.gguf_edit import ARRAY, FLOAT32, STRING, UINT32, GGUFLayout, string_places, tensor_nbytes

SEED_FILES = ("mmproj", "talker", "voice")
# (the talker path parses its header with GGUFHeader first: no separate header run for it)
TARGETS = {"mmproj": ("header", "code_predictor", "codec"), "talker": ("talker",), "voice": ("voice",)}
SEED_WEIGHTS = (3, 1, 1)  # a talker input costs ~10 mmproj inputs (llama.cpp builds a 155k-token vocabulary)
INPUT_TIMEOUT = 120.0  # seconds for one input through all of its readers

HOSTILE_U64 = [
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    0x7F,
    0xFF,
    0xFFFF,
    0x7FFFFFFF,
    0x80000000,
    0xFFFFFFFF,
    1 << 32,
    1 << 40,
    (1 << 62),
    (1 << 63) - 1,
    1 << 63,
    (1 << 64) - 1,
]
HOSTILE_U32 = [0, 1, 2, 3, 4, 5, 12, 13, 31, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]
HOSTILE_F32 = [0.0, -0.0, -1.0, 1e-30, 1e30, 3e38, float("inf"), float("-inf"), float("nan")]
# ggml types to retype tensors to (F32, F16, Q4_0, Q8_0, Q4_K, Q6_K, I8, I32, BF16) and ids ggml lacks
GGML_TYPES = [0, 1, 2, 8, 12, 14, 24, 26, 30]
BAD_TYPES = [4, 5, 31, 39, 40, 1000, 0xFFFFFFFF]


# ---------------------------------------------------------------------------------------------
# mutations
# ---------------------------------------------------------------------------------------------


class Mutator:
    """Structure-aware mutations of one seed file. Each returns (description, file bytes)."""

    def __init__(self, data: bytes, rng: random.Random):
        self.data, self.rng = data, rng
        self.layout = GGUFLayout.parse(data)
        self.cuts = self.layout.boundaries()

    def fresh(self) -> GGUFLayout:
        return self.layout.copy()

    def mutate(self) -> tuple[str, bytes]:
        ops = [
            (self.truncate, 2),
            (self.flip, 3),
            (self.count, 4),
            (self.kv_value, 4),
            (self.kv_retype, 1),
            (self.drop, 1),
            (self.duplicate, 1),
            (self.retype_raw, 1),
            (self.retype, 2),
            (self.reshape, 4),
            (self.swap, 2),
            (self.token, 1 if self._token_places() else 0),
        ]
        op = self.rng.choices([o for o, _ in ops], weights=[w for _, w in ops])[0]
        return op()

    def _token_places(self) -> dict[int, list[int]]:
        """Where each token string of the vocabulary lies, by its length (empty without one)."""
        if not hasattr(self, "_tokens"):
            self._tokens: dict[int, list[int]] = {}
            kv = next((kv for kv in self.layout.kvs if kv.key == "tokenizer.ggml.tokens" and kv.type == ARRAY), None)
            for at, n in string_places(self.data, kv) if kv is not None else []:
                self._tokens.setdefault(n, []).append(at)
            self._tokens = {n: places for n, places in self._tokens.items() if n and len(places) > 1}
        return self._tokens

    def token(self):
        """A token overwritten in place by another of its length (as a byte or two flipped can do):
        a vocabulary with a token twice, which llama.cpp's loader asserts on."""
        n = self.rng.choice(sorted(self._token_places()))
        src, dst = self.rng.sample(self._token_places()[n], 2)
        b = bytearray(self.data)
        b[dst : dst + n] = self.data[src : src + n]
        return f"token at {dst} made equal to the one at {src}", bytes(b)

    def truncate_at(self, cut: int) -> tuple[str, bytes]:
        return f"truncate at {cut}", self.data[:cut]

    def truncate(self):
        cut = self.rng.choice(self.cuts)
        if self.rng.random() < 0.3:
            cut = max(0, min(len(self.data), cut + self.rng.randint(-9, 9)))
        return self.truncate_at(cut)

    def flip(self):
        b = bytearray(self.data)
        end = self.layout.data_start if self.rng.random() < 0.9 else len(b)
        places = []
        for _ in range(self.rng.randint(1, 8)):
            i = self.rng.randrange(end)
            b[i] ^= 1 << self.rng.randrange(8) if self.rng.random() < 0.5 else self.rng.randrange(1, 256)
            places.append(i)
        return f"flip bytes at {places}", bytes(b)

    def _patch(self, pos: int, fmt: str, value) -> bytes:
        b = bytearray(self.data)
        struct.pack_into(fmt, b, pos, value)
        return bytes(b)

    def count(self):
        """A hostile value in a count, length, dimension, type or offset field."""
        L, r = self.layout, self.rng
        fields = [("n_tensors", 8, "<Q"), ("n_kv", 16, "<Q"), ("version", 4, "<I")]
        kv = r.choice(L.kvs)
        fields += [(f"key length of {kv.key}", kv.start, "<Q"), (f"value type of {kv.key}", kv.value_pos - 4, "<I")]
        if kv.type == STRING:
            fields.append((f"string length of {kv.key}", kv.value_pos, "<Q"))
        if kv.type == ARRAY:
            fields += [
                (f"element type of {kv.key}", kv.value_pos, "<I"),
                (f"count of {kv.key}", kv.value_pos + 4, "<Q"),
            ]
        t = r.choice(L.tensors)
        n = len(t.dims)
        fields += [
            (f"name length of {t.name}", t.start, "<Q"),
            (f"n_dims of {t.name}", t.dims_pos, "<I"),
            (f"type of {t.name}", t.end - 12, "<I"),
            (f"offset of {t.name}", t.end - 8, "<Q"),
        ]
        fields += [(f"dim {i} of {t.name}", t.dims_pos + 4 + 8 * i, "<Q") for i in range(n)]
        what, pos, fmt = r.choice(fields)
        old = struct.unpack_from(fmt, self.data, pos)[0]
        pool = HOSTILE_U64 if fmt == "<Q" else HOSTILE_U32
        limit = (1 << (8 * struct.calcsize(fmt))) - 1
        value = r.choice(
            pool + [max(0, old - 1), min(limit, old + 1), min(limit, old * 2), old // 2, min(limit, len(self.data))]
        )
        return f"{what}: {old} -> {value}", self._patch(pos, fmt, value)

    def kv_value(self):
        """A hostile scalar for a numeric key, in place (the hparams the stages read)."""
        L, r = self.layout, self.rng
        numeric = [kv for kv in L.kvs if kv.scalar() is not None and kv.type != 7]
        preferred = [kv for kv in numeric if kv.key.startswith(("kazetts.", "qwen3tts.", "clip.", "general.alignment"))]
        kv = r.choice(preferred if preferred and r.random() < 0.9 else numeric)
        fmt = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 10: "<Q", 11: "<q", 12: "<d"}[kv.type]
        if fmt in ("<f", "<d"):
            value = r.choice(HOSTILE_F32)
        else:
            bits = 8 * struct.calcsize(fmt)
            signed = fmt.islower() and fmt != "<?"
            pool = [v for v in HOSTILE_U64 if v < (1 << bits)]
            value = r.choice(pool + [kv.scalar() + 1, max(0, kv.scalar() - 1)])
            if signed and value >= 1 << (bits - 1):
                value -= 1 << bits
            value = max(-(1 << (bits - 1)) if signed else 0, min(value, (1 << (bits - signed)) - 1))
        return f"{kv.key}: {kv.scalar()} -> {value}", self._patch(kv.value_pos, fmt, value)

    def kv_retype(self):
        """A key with a value of another type (a string for a number, an array for a scalar ...)."""
        L, r = self.fresh(), self.rng
        kv = r.choice(
            [kv for kv in L.kvs if kv.key.startswith(("kazetts.", "qwen3tts.", "general.", "tokenizer.ggml.e"))]
            or L.kvs
        )
        choice = r.choice(
            [
                (STRING, "x"),
                (FLOAT32, 0.5),
                (UINT32, 0),
                (ARRAY, (UINT32, [1, 2])),
                (ARRAY, (STRING, [])),
                (ARRAY, (FLOAT32, [0.5] * 3)),
            ]
        )
        L.set_kv(kv.key, *choice)
        return f"{kv.key} retyped to {choice}", L.to_bytes()

    def drop(self):
        L, r = self.fresh(), self.rng
        name = r.choice([kv.key for kv in L.kvs] + [t.name for t in L.tensors] * 2)
        L.drop(name)
        return f"drop {name}", L.to_bytes()

    def duplicate(self):
        L, r = self.fresh(), self.rng
        if r.random() < 0.5:
            kv = r.choice(L.kvs)
            L.kvs.append(dataclasses.replace(kv))
            return f"duplicate key {kv.key}", L.to_bytes()
        t = r.choice(L.tensors)
        L.tensors.append(dataclasses.replace(t))
        return f"duplicate tensor {t.name}", L.to_bytes()

    def retype_raw(self):
        """A tensor's type id changed in place (data left as they are)."""
        t = self.rng.choice(self.layout.tensors)
        value = self.rng.choice(GGML_TYPES + BAD_TYPES)
        return f"type of {t.name}: {t.type} -> {value} (in place)", self._patch(t.end - 12, "<I", value)

    def retype(self):
        """A tensor converted to another ggml type, data resized to match (a consistent file)."""
        L, r = self.fresh(), self.rng
        t = r.choice(L.tensors)
        ty, old = r.choice(GGML_TYPES), (t.type, list(t.dims))
        dims = list(t.dims)
        if ty in (2, 8) and dims[0] % 32:
            dims[0] = (dims[0] + 31) // 32 * 32
        if ty in (12, 14) and dims[0] % 256:
            dims[0] = (dims[0] + 255) // 256 * 256
        L.set_tensor(t.name, dims, ty, self._random_bytes(tensor_nbytes(dims, ty)) if r.random() < 0.5 else None)
        return f"{t.name}: type {old[0]} -> {ty}, dims {old[1]} -> {dims}", L.to_bytes()

    def reshape(self):
        """A tensor with another shape, data cut or padded to match (a consistent file)."""
        L, r = self.fresh(), self.rng
        t = r.choice(L.tensors)
        dims, old = list(t.dims), list(t.dims)
        kind = r.randrange(6)
        if kind == 0 and len(dims) > 1:
            r.shuffle(dims)
        elif kind == 1:
            i = r.randrange(len(dims))
            dims[i] = r.choice([1, 2, 3, max(1, dims[i] // 2), dims[i] + 1, dims[i] * 2, max(1, dims[i] - 1)])
        elif kind == 2 and len(dims) < 4:
            dims.append(r.choice([1, 2, 3]))
        elif kind == 3 and len(dims) > 1:
            dims = [int(np.prod(dims))] if r.random() < 0.5 else dims[:-1]
        elif kind == 4:
            dims[r.randrange(len(dims))] = 0
        else:
            dims[r.randrange(len(dims))] = r.choice([1 << 20, 1 << 31, (1 << 32) + 1])
        block = 32 if t.type in (2, 8) else 256 if t.type in (12, 14) else 1
        if dims and dims[0] % block:
            dims[0] = max(block, dims[0] // block * block)
        if tensor_nbytes(dims, t.type) > 64 << 20:  # a hostile shape whose data would not fit the file
            return f"{t.name}: dims {old} -> {dims} (table only)", self._reshape_raw(t, dims)
        L.set_tensor(t.name, dims)
        return f"{t.name}: dims {old} -> {dims}", L.to_bytes()

    def _reshape_raw(self, t, dims) -> bytes:
        L = self.fresh()
        u = L.tensor(t.name)
        u.dims = dims  # data kept: the table says more than the file holds
        return L.to_bytes()

    def swap(self):
        """Two tensors' names exchanged (prefer tensors of one stage)."""
        L, r = self.fresh(), self.rng
        a = r.choice(L.tensors)
        prefix = ".".join(a.name.split(".")[:3])
        same = [t for t in L.tensors if t.name.startswith(prefix) and t is not a]
        b = r.choice(same if same and r.random() < 0.8 else [t for t in L.tensors if t is not a])
        a.name, b.name = b.name, a.name
        return f"swap {a.name} <-> {b.name}", L.to_bytes()

    def _random_bytes(self, n: int) -> bytes:
        return self.rng.randbytes(n) if n < (8 << 20) else bytes(n)


# ---------------------------------------------------------------------------------------------
# the worker: runs readers on one file at a time
# ---------------------------------------------------------------------------------------------


def _expected(target: str, e: BaseException, path: pathlib.Path) -> bool:
    """Whether an exception is a reader's documented rejection of a bad file."""
    from kazetts.gguf.header import GGUFError
    from kazetts.native import NativeError

    if target == "voice":  # Voice.load's rejections are ValueErrors naming the file (not numpy's own)
        return isinstance(e, ValueError) and str(path) in str(e)
    if isinstance(e, NativeError):
        # KZ_ERR_IO, KZ_ERR_FORMAT of a native loader
        return target in ("code_predictor", "codec", "talker") and e.status in (2, 3)
    return isinstance(e, GGUFError)


def _run_target(target: str, path: pathlib.Path) -> None:
    if target == "header":
        from kazetts.gguf.header import GGUFHeader

        GGUFHeader(path)
    elif target == "code_predictor":
        from kazetts.stages.code_predictor import CodePredictor

        with CodePredictor(path, threads=1) as cp:
            codes = cp.predict(np.zeros(cp.n_embd_in, np.float32), 0)[0]
            cp.embed_codes([0, *codes])
    elif target == "codec":
        from kazetts.stages.codec import CodecDecoder

        with CodecDecoder(path, threads=1) as dec:
            codes = np.stack([np.arange(3) % s for s in dec.codebook_sizes], axis=1)
            dec.decode(codes)
            dec.stream(codes[:1])
    elif target == "voice":
        from kazetts.engine.voice import Voice

        Voice.load(path)
    elif target == "talker":
        from kazetts.stages.talker import Talker

        talker = Talker(path, threads=1, n_ctx=16, n_batch=4)
        try:
            v = talker.file.voices
            rows = talker.file.text([v.tts_pad, v.tts_bos, v.tts_eos]) + talker.file.codec(
                [v.codec_pad, v.codec_bos, v.codec_eos]
            )
            talker.step(rows[:2])
        finally:
            talker.close()
    else:
        raise ValueError(f"unknown target {target}")


def _signature(target: str, e: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(e.__traceback__) if "kazetts" in f.filename] or traceback.extract_tb(
        e.__traceback__
    )
    where = f"{pathlib.Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
    return f"{target}: {type(e).__name__} at {where}"


def worker() -> None:
    """Reads {"path", "targets"} lines on stdin, answers one JSON line per input on stdout."""
    out = os.fdopen(os.dup(1), "w")  # the protocol stream; fd 1 (native printf) goes to stderr
    os.dup2(2, 1)
    for line in sys.stdin:
        req = json.loads(line)
        results = []
        for target in req["targets"]:
            print(f"[fuzz] target {target}", file=sys.stderr, flush=True)
            path = pathlib.Path(req["path"])
            try:
                _run_target(target, path)
                results.append({"target": target, "outcome": "accepted"})
            except Exception as e:  # noqa: BLE001 - judging exceptions is the point
                message = str(e)
                if _expected(target, e, path) and message.strip():
                    results.append({"target": target, "outcome": "rejected", "message": message.splitlines()[0]})
                else:
                    results.append(
                        {
                            "target": target,
                            "outcome": "failure",
                            "signature": _signature(target, e),
                            "message": "".join(traceback.format_exception(e))[-3000:],
                        }
                    )
        out.write(json.dumps(results) + "\n")
        out.flush()


# ---------------------------------------------------------------------------------------------
# the driver
# ---------------------------------------------------------------------------------------------

_SUMMARY = re.compile(r"SUMMARY: (\w+Sanitizer: .*)")
_ASSERT = re.compile(r"(\S+:\d+: GGML_ASSERT\(.*\) failed)")
_RUNTIME = re.compile(r"(\S+\.(?:cpp|c|h):\d+:\d+: runtime error: .*)")
_ABORT = re.compile(r"(\S+\.(?:cpp|c|h):\d+: .+)")  # GGML_ABORT's "file:line: message"


def crash_signature(target: str, stderr: str, returncode: int | None) -> str:
    """A stable name for a crash from the worker's stderr (addresses and pids stripped)."""
    for rx in (_RUNTIME, _SUMMARY, _ASSERT, _ABORT):
        m = rx.findall(stderr)
        if m:
            text = re.sub(r"0x[0-9a-f]+", "ADDR", m[-1])
            text = re.sub(r"\(/[^)]*\+ADDR\)", "", text)
            text = re.sub(r"/\S*/(?=[^/\s]+:\d+)", "", text)  # build paths: file names only
            return f"{target}: {text.strip()}"
    if returncode is None:
        return f"{target}: hang (no verdict in {INPUT_TIMEOUT:.0f} s)"
    return f"{target}: worker died with status {returncode}"


class Worker:
    """A worker process (`command`, default: this module's worker) with its stderr in a file,
    read back when it dies."""

    def __init__(self, work: pathlib.Path, command: list[str] | None = None):
        self.log = open(work / "worker.stderr", "w+b")
        env = dict(os.environ, GGML_NO_BACKTRACE="1")  # ggml would attach gdb to an aborting process
        self.proc = subprocess.Popen(
            command or [sys.executable, "-m", "kazetts.validation.fuzz", "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=env,
        )

    def run(self, path: pathlib.Path, targets) -> tuple[list | None, str, bool]:
        """(verdicts, "", False), or (None, this input's stderr, hung) when the worker died or hung."""
        self.log.seek(0, 2)
        start = self.log.tell()
        self.proc.stdin.write((json.dumps({"path": str(path), "targets": list(targets)}) + "\n").encode())
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], INPUT_TIMEOUT)
        line = self.proc.stdout.readline() if ready else b""
        if line:
            return json.loads(line), "", False
        if not ready:
            self.proc.kill()
        self.proc.wait()
        self.log.seek(start)
        return None, self.log.read().decode("utf-8", "replace"), not ready

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        self.log.close()


def make_seeds(out: pathlib.Path) -> dict[str, pathlib.Path]:
    """The tiny synthetic model's talker and mmproj GGUFs (F32) and a voice file, built once."""
    seeds = out / "seeds"
    found = {kind: next(iter(sorted(seeds.glob(f"*-{kind}-f32.gguf"))), None) for kind in SEED_FILES}
    if all(found.values()):
        return found
    from kazetts.engine.voice import ModelFingerprint, Voice
    from kazetts.synthetic.checkpoint import make_checkpoint
    from kazetts.tools.convert import convert_checkpoint

    make_checkpoint("tiny", seeds / "checkpoint", "custom_voice", 0)
    talker, mmproj = convert_checkpoint(seeds / "checkpoint", seeds, "f32", name="tiny", verbose=False)
    rng = np.random.default_rng(0)  # a voice with every part: x-vector, reference codes and text
    voice = Voice(
        x_vector=rng.standard_normal(64).astype(np.float32),
        model=ModelFingerprint("base", 64, "0" * 64),
        ref_text="A reference sentence.",
        ref_codes=rng.integers(0, 2048, (6, 16), dtype=np.int32),
        ref_seconds=0.5,
    )
    return {"talker": talker, "mmproj": mmproj, "voice": voice.save(seeds / "tiny-voice-f32.gguf")}


@dataclasses.dataclass
class Failure:
    signature: str
    count: int
    example: str  # the mutation that first showed it
    saved: pathlib.Path


def _log(message: str) -> None:
    print(message, flush=True)


def campaign(seconds: float, seed: int, out: pathlib.Path, log=_log) -> dict:
    """Runs the campaign; returns its figures (inputs, outcomes, failures by signature)."""
    out.mkdir(parents=True, exist_ok=True)
    work, failures_dir = out / "work", out / "failures"
    work.mkdir(exist_ok=True)
    failures_dir.mkdir(exist_ok=True)
    rng = random.Random(seed)
    seeds = make_seeds(out)
    mutators = {kind: Mutator(path.read_bytes(), rng) for kind, path in seeds.items()}
    # every section boundary of every seed once, then random mutations
    queue = [(kind, m.truncate_at(c)) for kind, m in mutators.items() for c in m.cuts]
    rng.shuffle(queue)
    queue += [(kind, ("unmodified seed", m.data)) for kind, m in mutators.items()]  # popped first
    outcomes: dict[str, dict[str, int]] = {}
    failures: dict[str, Failure] = {}
    inputs = 0
    worker_proc = Worker(work)
    deadline = time.monotonic() + seconds
    journal = open(out / "inputs.jsonl", "w")  # every input: its mutation and each reader's verdict
    try:
        while time.monotonic() < deadline:
            if queue and (inputs < len(SEED_FILES) or rng.random() < 0.5):
                kind, (what, data) = queue.pop()
            else:
                kind = rng.choices(SEED_FILES, weights=SEED_WEIGHTS)[0]
                what, data = mutators[kind].mutate()
            path = work / f"input-{kind}.gguf"
            path.write_bytes(data)
            inputs += 1
            results, stderr, hung = worker_proc.run(path, TARGETS[kind])
            if results is None:
                current = re.findall(r"\[fuzz\] target (\w+)", stderr)
                target = current[-1] if current else "?"
                results = [
                    {
                        "target": target,
                        "outcome": "failure",
                        "message": stderr[-6000:],
                        "signature": crash_signature(target, stderr, None if hung else worker_proc.proc.returncode),
                    }
                ]
                worker_proc.close()
                worker_proc = Worker(work)
            journal.write(
                json.dumps(
                    {
                        "seed_file": kind,
                        "mutation": what,
                        "results": [
                            {k: v for k, v in res.items() if k != "message" or res["outcome"] == "rejected"}
                            for res in results
                        ],
                    }
                )
                + "\n"
            )
            for res in results:
                outcomes.setdefault(res["target"], {}).setdefault(res["outcome"], 0)
                outcomes[res["target"]][res["outcome"]] += 1
                if res["outcome"] != "failure":
                    continue
                sig = res["signature"]
                if sig not in failures:
                    digest = hashlib.sha1(sig.encode()).hexdigest()[:10]
                    saved = failures_dir / f"{digest}-{kind}.gguf"
                    saved.write_bytes(data)
                    saved.with_suffix(".txt").write_text(f"{sig}\nmutation: {what}\n\n{res.get('message', '')}\n")
                    failures[sig] = Failure(sig, 0, what, saved)
                    log(f"[fuzz] NEW FAILURE {sig}\n       mutation: {what}\n       input: {saved}")
                failures[sig].count += 1
            if inputs % 100 == 0:
                log(
                    f"[fuzz] {inputs} inputs, {len(failures)} distinct failures, {deadline - time.monotonic():.0f} s left"
                )
    finally:
        worker_proc.close()
        journal.close()
    return {
        "inputs": inputs,
        "seed": seed,
        "seconds": seconds,
        "outcomes": outcomes,
        "failures": [dataclasses.asdict(f) | {"saved": str(f.saved)} for f in failures.values()],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock, printed)")
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path("build/fuzz"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker()
        return 0
    seed = args.seed if args.seed is not None else int(time.time())
    if "KAZETTS_NATIVE_LIB" not in os.environ or "LD_PRELOAD" not in os.environ:
        print("[fuzz] warning: not under the ASan build of libkazetts (run `make fuzz`)", file=sys.stderr)
    print(f"[fuzz] seed {seed}, {args.seconds:.0f} s, inputs and failures under {args.out}")
    report = campaign(args.seconds, seed, args.out)
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    print(f"[fuzz] {report['inputs']} inputs in {args.seconds:.0f} s (seed {seed})")
    for target, counts in report["outcomes"].items():
        print(f"[fuzz]   {target:15s} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(f"[fuzz] {len(report['failures'])} distinct failures")
    for f in report["failures"]:
        print(
            f"[fuzz]   {f['count']:5d} x {f['signature']}\n           first: {f['example']}\n           input: {f['saved']}"
        )
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
