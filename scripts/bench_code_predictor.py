"""Benchmark the native code predictor against the PyTorch reference's, ms per frame.

    .venv/bin/python scripts/bench_code_predictor.py [--preset 0.6b] [--frames 20] [--threads 1 2]

Builds (once, cached under ~/.cache/kazetts/models) the synthetic checkpoint of the preset and
an F32 mmproj holding only the code predictor tensors, then times the native code predictor
(greedy, one frame = 2-token prefill + 14 steps) with weights converted at load time to F32,
F16, Q8_0 and Q4_0, at each thread count, with the share of greedy codes each type keeps of
F32's on the same inputs (F32 is the reference's codes, see the goldens), and the kernel used
(a type that runs on a kazetts kernel is also timed on the other kernels the CPU runs, as
``<type>/<kernel>``); and the reference (``talker.code_predictor.generate``
as ``Qwen3TTSForConditionalGeneration`` calls it, float32, greedy) in the reference environment
on the same weights and thread counts, printing the ratios.

``--batch 1 2 4 8`` instead times ``predict_frames`` (one pass over the weights for b frames,
issue #30) with the weights of ``--weights``: ms per batched call, per frame, and the aggregate
frames per second over one frame at a time, in rounds that rotate the batch sizes' order.

``--ref-worker`` is the subprocess entry point (reference environment only).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_common import REF_PYTHON, REPO, checkpoint, stage_mmproj  # noqa: E402


def inputs(n_embd_in: int, cb0_vocab: int, frames: int):
    import numpy as np

    rng = np.random.default_rng(0)
    hidden = rng.standard_normal((frames, n_embd_in)).astype(np.float32)
    cb0 = rng.integers(0, 2048, frames).astype(np.int32)
    return hidden, cb0


def bench_native(mmproj, weights, threads, frames, kernels="auto"):
    """(median ms per frame, greedy codes [frames, 15], kernel name)."""
    import numpy as np
    from kazetts.stages.code_predictor import CodePredictor

    cp = CodePredictor(mmproj, threads=threads, weights=weights, kernels=kernels)
    kernel = cp.kernel_name
    hidden, cb0 = inputs(cp.n_embd_in, cp.cb0_vocab, frames)
    for f in range(2):
        cp.predict(hidden[f], int(cb0[f]))
    times, codes = [], []
    for f in range(frames):
        t0 = time.perf_counter()
        codes.append(cp.predict(hidden[f], int(cb0[f]))[0])
        times.append(time.perf_counter() - t0)
    cp.close()
    return 1000 * float(np.median(times)), np.array(codes), kernel


def bench_batches(mmproj, weights, threads, frames, batches, rounds=3):
    """{batch: median ms of one predict_frames call of `batch` frames}, rounds rotated."""
    import numpy as np
    from kazetts.stages.code_predictor import CodePredictor

    cp = CodePredictor(mmproj, threads=threads, weights=weights)
    top = max(batches)
    hidden, cb0 = inputs(cp.n_embd_in, cp.cb0_vocab, frames + top)
    times = {b: [] for b in batches}
    for b in batches:  # the graphs and KV caches of each size, made on first use
        cp.predict_frames(hidden[:b], cb0[:b])
    for r in range(rounds):
        for b in batches[r % len(batches) :] + batches[: r % len(batches)]:
            for f in range(frames):
                t0 = time.perf_counter()
                cp.predict_frames(hidden[f : f + b], cb0[f : f + b])
                times[b].append(time.perf_counter() - t0)
    cp.close()
    return {b: 1000 * float(np.median(t)) for b, t in times.items()}


def print_batches(mm, a):
    for t in a.threads:
        for w in a.weights:
            ms = bench_batches(mm, w, t, a.frames, a.batch)
            one = ms[a.batch[0]] / a.batch[0]
            for b, m in ms.items():
                print(
                    f"threads {t}  {w:6s} batch {b:2d}: {m:8.2f} ms a call, {m / b:7.2f} ms a frame, "
                    f"aggregate {one / (m / b):5.2f}x batch {a.batch[0]}'s frames per second",
                    flush=True,
                )


def q8_0_bytes_per_frame(mmproj) -> int:
    """Weight bytes one frame reads with every matrix kept in Q8_0 (34 bytes per 32 values): the
    decoder layers' matrices and proj_in at each of the 15 steps, and each step's own head."""
    import numpy as np
    from kazetts.gguf.header import GGUFHeader

    h = GGUFHeader(mmproj)
    prefix = "a.gen.code."
    heads = h.tensors[prefix + "head.weight"][0]
    n_steps = heads[2]

    def q8_0(shape):
        return int(np.prod(shape, dtype=np.int64)) // 32 * 34

    per_step = sum(
        q8_0(shape)
        for name, (shape, _) in h.tensors.items()
        if len(shape) == 2 and (name.startswith(prefix + "blk.") or name == prefix + "proj_in.weight")
    )
    return n_steps * per_step + q8_0(heads)


def cpu_runs(mmproj, kernels: str) -> bool:
    """Whether this CPU runs the code predictor's `kernels` (loading fails if it does not)."""
    from kazetts.stages.code_predictor import CodePredictor
    from kazetts.native import NativeError

    try:
        CodePredictor(mmproj, threads=1, weights="q8_0", kernels=kernels).close()
        return True
    except NativeError:
        return False


def ref_worker(ck: str, threads: int, frames: int):
    import numpy as np
    import torch
    from kazetts.validation.reference import load_strict

    torch.set_num_threads(threads)
    model, _ = load_strict(ck)
    talker = model.talker
    cfg = model.config.talker_config
    hidden, cb0 = inputs(cfg.hidden_size, cfg.vocab_size, frames)
    times = []
    with torch.inference_mode():
        for f in range(frames + 2):
            h = torch.from_numpy(hidden[f % frames]).view(1, 1, -1)
            e = talker.get_input_embeddings()(torch.tensor([[int(cb0[f % frames])]]))
            t0 = time.perf_counter()
            talker.code_predictor.generate(
                inputs_embeds=torch.cat((h, e), dim=1),
                max_new_tokens=cfg.num_code_groups - 1,
                do_sample=False,
                output_hidden_states=True,
                return_dict_in_generate=True,
            )
            if f >= 2:
                times.append(time.perf_counter() - t0)
    print(json.dumps({"ms": 1000 * float(np.median(times))}))


def bench_ref(ck, threads, frames):
    if not REF_PYTHON.exists():
        return None
    r = subprocess.run(
        [str(REF_PYTHON), __file__, "--ref-worker", str(ck), "--threads", str(threads), "--frames", str(frames)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if r.returncode != 0:
        print(r.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])["ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="0.6b")
    ap.add_argument("--frames", type=int, default=20)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--weights", nargs="+", default=["f32", "f16", "q8_0", "q4_0"])
    ap.add_argument("--no-ref", action="store_true")
    ap.add_argument("--batch", type=int, nargs="+", help="time predict_frames at these batch sizes instead")
    ap.add_argument("--ref-worker", metavar="CHECKPOINT")
    a = ap.parse_args()
    if a.ref_worker:
        ref_worker(a.ref_worker, a.threads[0], a.frames)
        return
    ck = checkpoint(a.preset)
    mm = stage_mmproj(ck, a.preset, "cp")
    if a.batch:
        print_batches(mm, a)
        return []
    rows = []
    f32_codes = None
    from kazetts.stages.code_predictor import KERNELS

    kernels_here = [k for k in KERNELS if k != "auto" and cpu_runs(mm, k)]
    q8_bytes = q8_0_bytes_per_frame(mm)
    print(f"Q8_0 weights read per frame: {q8_bytes / 1e6:.1f} MB (compare with scripts/bench_bandwidth.c)")
    for t in a.threads:
        ref = None if a.no_ref else bench_ref(ck, t, max(5, a.frames // 2))
        for w in a.weights:
            ms, codes, kernel = bench_native(mm, w, t, a.frames)
            if w == "f32":
                f32_codes = codes
            runs = [(w, ms, codes, kernel)]
            if kernel != "ggml":  # the same type on the other kernels this CPU runs, for each one's gain
                for other in kernels_here:
                    if not kernel.endswith(other):
                        runs.append((f"{w}/{other}", *bench_native(mm, w, t, a.frames, kernels=other)))
            for label, ms, codes, kernel in runs:
                rows.append((t, label, ms, ref))
                ratio = f"{ref / ms:6.1f}x" if ref else "   n/a"
                same = f"   codes = f32: {100 * (codes == f32_codes).mean():6.2f}%" if f32_codes is not None else ""
                rate = f"   {q8_bytes / ms / 1e6:5.1f} GB/s of weights" if label.startswith("q8_0") else ""
                print(
                    f"threads {t}  {label:10s} {ms:8.2f} ms/frame   reference f32 {ref if ref else float('nan'):8.2f} ms/frame   "
                    f"speedup {ratio}{same}{rate}   [{kernel}]",
                    flush=True,
                )
    return rows


if __name__ == "__main__":
    main()
