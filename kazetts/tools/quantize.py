"""``kazetts quantize IN OUT --type T``: requantize a talker or mmproj GGUF.

- talker (arch ``qwen3tts``): llama.cpp's own quantizer through llama-cpp-python
  (``llama_model_quantize``). It copies every key/value pair (``kazetts.*`` included) and picks
  the per-tensor types of its mixture (q4_k_m: Q4_K with Q6_K for ``output`` and some
  ``attn_v`` / ``ffn_down``), falling back to a legacy type when a row is not a multiple of the
  k-quant block (256).
- mmproj (arch ``clip``): rewritten with gguf's reader/writer. Only the code predictor's matrices
  (``a.gen.code.blk.*.attn_*/ffn_*``, ``a.gen.code.head``, ``a.gen.code.proj_in``) are
  requantized, to Q8_0 or Q4_0 (k-quant requests map to one of those); the embedding tables (read
  row by row), norms, biases, the codec decoder (its native loader decides its own types) and the
  speaker encoder are copied unchanged.

The result is written to ``OUT.part``, validated (every tensor present with its shape, every
type one the runtime supports for that tensor's group, rows divisible by the block size, talker
``token_embd`` rows dequantizable by ``gguf.quants``, metadata unchanged, the talker loadable by
llama.cpp), and only then renamed to OUT: quantizing never leaves a file the runtime cannot run.
"""

from __future__ import annotations

import ctypes
import os
import pathlib
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field

import numpy as np

from kazetts.gguf import names as N
from kazetts.gguf.header import GGUFHeader
from kazetts.tools.info import tensor_group

# --type -> llama.cpp LLAMA_FTYPE_* name (types that need no importance matrix)
TALKER_FTYPES = OrderedDict(
    [
        ("f32", "ALL_F32"),
        ("f16", "MOSTLY_F16"),
        ("bf16", "MOSTLY_BF16"),
        ("q8_0", "MOSTLY_Q8_0"),
        ("q6_k", "MOSTLY_Q6_K"),
        ("q5_k_m", "MOSTLY_Q5_K_M"),
        ("q5_k_s", "MOSTLY_Q5_K_S"),
        ("q5_1", "MOSTLY_Q5_1"),
        ("q5_0", "MOSTLY_Q5_0"),
        ("q4_k_m", "MOSTLY_Q4_K_M"),
        ("q4_k_s", "MOSTLY_Q4_K_S"),
        ("q4_1", "MOSTLY_Q4_1"),
        ("q4_0", "MOSTLY_Q4_0"),
        ("iq4_nl", "MOSTLY_IQ4_NL"),
        ("iq4_xs", "MOSTLY_IQ4_XS"),
        ("q3_k_l", "MOSTLY_Q3_K_L"),
        ("q3_k_m", "MOSTLY_Q3_K_M"),
        ("q3_k_s", "MOSTLY_Q3_K_S"),
        ("q2_k", "MOSTLY_Q2_K"),
    ]
)
TYPES = tuple(TALKER_FTYPES)

# --type -> code predictor matrix type in the mmproj (the native code predictor runs F32/F16/Q8_0/Q4_0)
_MMPROJ_MATRIX = {
    "f32": "F32",
    "f16": "F16",
    "bf16": "F16",
    "q8_0": "Q8_0",
    "q6_k": "Q8_0",
    "q5_k_m": "Q8_0",
    "q5_k_s": "Q8_0",
    "q5_1": "Q8_0",
    "q5_0": "Q8_0",
}
_FLOAT_TYPES = ("F32", "F16", "BF16")
# types the code predictor's matrices may have in a file kazetts writes
_CP_MATRIX_OK = {"F32", "F16", "BF16", "Q8_0", "Q4_0"}

_KEEP_REASON = {
    "code predictor tables": "embedding table, read row by row on the host: kept as is",
    "code predictor norms/biases": "norm/bias vector: kept as is",
    "codec decoder": "codec decoder: kept as is (its native loader picks its own types)",
    "speaker encoder": "speaker encoder: kept as is",
    "other": "unknown tensor: kept as is",
}


def mmproj_matrix_type(type_name: str) -> str:
    """The GGML type of the code predictor matrices for a --type request."""
    return _MMPROJ_MATRIX.get(type_name, "Q4_0")


@dataclass
class QuantizeResult:
    input: pathlib.Path
    output: pathlib.Path
    kind: str  # talker | mmproj
    type: str
    seconds: float = 0.0
    in_bytes: int = 0
    out_bytes: int = 0
    groups: dict = field(default_factory=OrderedDict)  # group -> Counter(type -> n)
    kept: list = field(default_factory=list)  # (what, type, reason) lines
    checks: list = field(default_factory=list)  # validation steps passed
    notes: list = field(default_factory=list)

    def summary(self) -> str:
        out = [
            f"{self.input} -> {self.output}",
            f"  {self.kind}, --type {self.type}: {self.in_bytes / 1e6:.1f} MB -> {self.out_bytes / 1e6:.1f} MB "
            f"in {self.seconds:.1f} s",
            "  types per group:",
        ]
        w = max([len(g) for g in self.groups] + [5])
        for g, types in self.groups.items():
            out.append(
                f"    {g:<{w}}  " + ", ".join(f"{t} x{n}" for t, n in sorted(types.items(), key=lambda kv: -kv[1]))
            )
        if self.kept:
            out.append("  kept / other types:")
            out += [f"    {what}: {t} ({why})" for what, t, why in self.kept]
        for n in self.notes:
            out.append(f"  note: {n}")
        out.append("  validated: " + "; ".join(self.checks))
        return "\n".join(out)


# ------------------------------------------------------------------------------------------


def _reader(path: pathlib.Path):
    import gguf

    try:
        return gguf.GGUFReader(path)
    except Exception as e:  # noqa: BLE001
        raise ValueError(f"{path}: not a readable GGUF file ({e})") from None


def _arch(header: GGUFHeader) -> str:
    return header.kv.get("general.architecture", "?")


def _check_paths(src, dst) -> tuple[pathlib.Path, pathlib.Path]:
    src, dst = pathlib.Path(src), pathlib.Path(dst)
    if not src.is_file():
        raise ValueError(f"input file not found: {src}")
    if dst.is_dir():
        raise ValueError(f"output {dst} is a directory: give a file name")
    if src.resolve() == dst.resolve() or (dst.exists() and os.path.samefile(src, dst)):
        raise ValueError(f"input and output are the same file ({src}): write to a new file")
    parent = dst.resolve().parent
    if parent.exists() and not parent.is_dir():
        raise ValueError(f"cannot write {dst}: {parent} is not a directory")
    if (parent.is_dir() and not os.access(parent, os.W_OK)) or (dst.exists() and not os.access(dst, os.W_OK)):
        raise ValueError(f"output path not writable: {dst}")
    return src, dst


def _kv_snapshot(header: GGUFHeader, skip=("general.file_type", "general.quantization_version")) -> dict:
    return {k: v for k, v in header.kv.items() if k not in skip}


def _compare_kv(src_reader, out_reader, what: str) -> None:
    a, b = _kv_snapshot(src_reader), _kv_snapshot(out_reader)
    missing = sorted(set(a) - set(b))
    if missing:
        raise ValueError(f"{what}: metadata lost: {missing[:5]}")
    changed = sorted(k for k in a if a[k] != b[k])
    if changed:
        raise ValueError(f"{what}: metadata changed: {changed[:5]}")


def _compare_tensors(src, out, what: str) -> None:
    a = {n: [int(x) for x in s] for n, (s, _) in src.tensors.items()}
    b = {n: [int(x) for x in s] for n, (s, _) in out.tensors.items()}
    if set(a) != set(b):
        raise ValueError(
            f"{what}: tensors differ: missing {sorted(set(a) - set(b))[:5]}, extra {sorted(set(b) - set(a))[:5]}"
        )
    bad = [n for n in a if a[n] != b[n]]
    if bad:
        raise ValueError(f"{what}: tensor shapes changed: {bad[:5]}")


def _check_same_layout(
    src: GGUFHeader, tmp: pathlib.Path, arch: str, what: str, res: "QuantizeResult", kv_label: str
) -> GGUFHeader:
    """The quantized file keeps the architecture, every tensor and shape, and all metadata."""
    out = GGUFHeader(tmp)
    if _arch(out) != arch:
        raise ValueError(f"{what}: architecture changed to {_arch(out)!r}")
    _compare_tensors(src, out, what)
    res.checks.append("same tensors and shapes")
    _compare_kv(src, out, what)
    res.checks.append(f"all metadata ({kv_label}) copied")
    return out


def _block_ok(shape, ty) -> bool:
    import gguf

    return int(shape[0]) % gguf.GGML_QUANT_SIZES[ty][0] == 0


def _groups(header: GGUFHeader) -> dict:
    groups: dict[str, Counter] = {}
    for name, (_, ty) in header.tensors.items():
        groups.setdefault(tensor_group(name), Counter())[ty.name] += 1
    return OrderedDict(sorted(groups.items()))


def _ensure_requantize_ok(header: GGUFHeader, names_filter, allow: bool, what: str) -> None:
    quantized = sorted(
        {
            ty.name
            for name, (shape, ty) in header.tensors.items()
            if names_filter(name, shape) and ty.name not in _FLOAT_TYPES
        }
    )
    if quantized and not allow:
        raise ValueError(
            f"{what} is already quantized ({', '.join(quantized)}): requantizing loses precision twice. "
            f"Quantize from an f16/f32 file (`kazetts convert --type f16`) or pass --allow-requantize"
        )


# ------------------------------------------------------------------------------------------
# talker: llama.cpp's quantizer
# ------------------------------------------------------------------------------------------

_LOG_LINES: list[str] = []


def _capture_log(level, text, user_data):
    try:
        _LOG_LINES.append(text.decode("utf-8", "replace"))
    except Exception:  # noqa: BLE001 - never raise into C
        pass


_LOG_CB = None


def _llama_log_capture():
    global _LOG_CB
    import llama_cpp

    if _LOG_CB is None:
        _LOG_CB = llama_cpp.llama_log_callback(_capture_log)  # kept alive for the process' lifetime
    llama_cpp.llama_log_set(_LOG_CB, ctypes.c_void_p())


def _is_matrix(shape) -> bool:
    return len(shape) >= 2 and int(shape[1]) > 1


def _quantize_talker(
    src: pathlib.Path,
    tmp: pathlib.Path,
    type_name: str,
    nthread: int,
    allow_requantize: bool,
    res: QuantizeResult,
    reader,
) -> None:
    import gguf
    import llama_cpp

    _ensure_requantize_ok(reader, lambda name, shape: _is_matrix(shape), allow_requantize, str(src))
    ftype = getattr(llama_cpp, "LLAMA_FTYPE_" + TALKER_FTYPES[type_name])
    params = llama_cpp.llama_model_quantize_default_params()
    params.nthread = int(nthread)
    params.ftype = ftype
    params.allow_requantize = bool(allow_requantize)
    _llama_log_capture()
    llama_cpp.llama_backend_init()
    _LOG_LINES.clear()
    rc = llama_cpp.llama_model_quantize(os.fsencode(str(src)), os.fsencode(str(tmp)), ctypes.byref(params))
    log = "".join(_LOG_LINES)
    if rc != 0:
        errors = [ln for ln in log.splitlines() if "error" in ln.lower() or "failed" in ln.lower()]
        raise ValueError(
            f"llama.cpp could not quantize {src} to {type_name}: " + ("; ".join(errors[-3:]) or f"status {rc}")
        )
    res.notes += [ln.strip() for ln in log.splitlines() if "fallback" in ln.lower()][:20]

    what = f"quantized talker {tmp}"
    out = _check_same_layout(reader, tmp, N.TALKER_ARCH, what, res, "kazetts.*, tokenizer, qwen3tts.*")
    bad = [name for name, (shape, ty) in out.tensors.items() if not _block_ok(shape, ty)]
    if bad:
        raise ValueError(f"{what}: rows not a multiple of the block size: {bad[:5]}")
    res.checks.append("block sizes")

    # token_embd: the runtime dequantizes single rows with gguf.quants
    embd_shape, embd_type = out.tensors[N.TOKEN_EMBD]
    if embd_type.name not in _FLOAT_TYPES and embd_type not in gguf.quants._type_traits:
        raise ValueError(f"{what}: token_embd is {embd_type.name}, which gguf.quants cannot dequantize")
    hidden, n_rows = int(embd_shape[0]), int(embd_shape[1])
    rows = out.rows(N.TOKEN_EMBD, [0, n_rows // 2, n_rows - 1])
    if rows.shape != (3, hidden) or not np.all(np.isfinite(rows)):
        raise ValueError(f"{what}: token_embd rows do not dequantize to finite values")
    res.checks.append(f"token_embd ({embd_type.name}) rows dequantize with gguf.quants")
    _llama_load_check(tmp, what)
    res.checks.append("llama.cpp loads it")

    res.groups = _groups(out)
    main = Counter(
        ty.name for name, (_, ty) in out.tensors.items() if tensor_group(name) == "talker blocks"
    ).most_common(1)
    main_type = main[0][0] if main else None
    by: dict[tuple[str, str], list[str]] = {}
    for name, (shape, qt) in out.tensors.items():
        ty = qt.name
        if ty == main_type:
            continue
        if ty == "F32" and not _is_matrix(shape):
            why = "norm/vector, always F32"
        elif name == N.TOKEN_EMBD:
            why = "token_embd: llama.cpp's choice for this type / row size; rows dequantize with gguf.quants"
        else:
            why = f"llama.cpp's {type_name} mixture or row-size fallback"
        by.setdefault((ty, why), []).append(name)
    for (ty, why), tnames in by.items():
        shown = ", ".join(tnames[:3]) + (f" ... ({len(tnames)} tensors)" if len(tnames) > 3 else "")
        res.kept.append((shown, ty, why))


def _llama_load_check(path: pathlib.Path, what: str) -> None:
    import llama_cpp

    _llama_log_capture()
    mp = llama_cpp.llama_model_default_params()
    mp.n_gpu_layers = 0
    mp.use_extra_bufts = False  # a loading check: no repacking (AMX crashes here, see kazetts.stages.talker)
    mp.use_mmap = True
    model = llama_cpp.llama_model_load_from_file(os.fsencode(str(path)), mp)
    if not model:
        errors = [ln.strip() for ln in _LOG_LINES if "error" in ln.lower()]
        raise ValueError(f"{what}: llama.cpp cannot load it: " + ("; ".join(errors[-3:]) or "unknown error"))
    llama_cpp.llama_model_free(model)


# ------------------------------------------------------------------------------------------
# mmproj: gguf reader/writer
# ------------------------------------------------------------------------------------------


def _copy_kv(reader, writer, file_type: int) -> None:
    import gguf

    VT = gguf.GGUFValueType
    for name, f in reader.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.alignment"):
            continue
        if name == "general.file_type":
            writer.add_uint32(name, int(file_type))
            continue
        vtype = f.types[0]
        if vtype == VT.ARRAY:
            sub = f.types[1] if len(f.types) > 1 else VT.INT32
            if sub == VT.ARRAY:
                raise ValueError(f"nested array key {name} is not supported")
            writer.add_key_value(name, f.contents(), vtype, sub_type=sub)
        else:
            writer.add_key_value(name, f.contents(), vtype)


def _float_array(t) -> np.ndarray:
    import gguf
    from gguf.quants import dequantize

    ty = t.tensor_type
    if ty == gguf.GGMLQuantizationType.F32:
        return np.asarray(t.data, dtype=np.float32)
    if ty == gguf.GGMLQuantizationType.F16:
        return np.asarray(t.data).astype(np.float32)
    return np.asarray(dequantize(np.asarray(t.data), ty), dtype=np.float32)


def _mmproj_plan(reader, type_name: str) -> list[tuple[object, object, str]]:
    """(tensor, output type, reason when not the requested type) for every tensor."""
    import gguf

    Q = gguf.GGMLQuantizationType
    want = Q[mmproj_matrix_type(type_name)]
    plan = []
    for t in reader.tensors:
        g = tensor_group(t.name)
        if g != "code predictor matrices" or not _is_matrix(t.shape):
            plan.append((t, t.tensor_type, _KEEP_REASON.get(g, "kept as is")))
            continue
        target, why = want, ""
        if t.name.endswith("ffn_down.weight") and want in (Q.F16, Q.BF16):
            target, why = Q.F32, "code predictor ffn_down: activations exceed the F16 range"
        block = gguf.GGML_QUANT_SIZES[target][0]
        if int(t.shape[0]) % block != 0:
            target = t.tensor_type if t.tensor_type.name in _FLOAT_TYPES else Q.F32
            why = f"row size {int(t.shape[0])} not a multiple of {want.name}'s block {block}"
        plan.append((t, target, why))
    return plan


def _quantize_mmproj(
    src: pathlib.Path,
    tmp: pathlib.Path,
    type_name: str,
    allow_requantize: bool,
    res: QuantizeResult,
    header: GGUFHeader,
) -> None:
    import gguf

    reader = _reader(src)
    plan = _mmproj_plan(reader, type_name)
    changing = {t.name for t, target, _ in plan if target != t.tensor_type}
    _ensure_requantize_ok(header, lambda name, shape: name in changing, allow_requantize, f"{src} (code predictor)")
    want = mmproj_matrix_type(type_name)
    if want != type_name.upper():
        res.notes.append(
            f"mmproj: --type {type_name} applies to the talker; the code predictor's matrices get {want} "
            f"(the native code predictor runs F32/F16/Q8_0/Q4_0)"
        )
    file_type = {
        "F32": gguf.LlamaFileType.ALL_F32,
        "F16": gguf.LlamaFileType.MOSTLY_F16,
        "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
        "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
    }[want]

    w = gguf.GGUFWriter(path=None, arch=N.MMPROJ_ARCH)
    if reader.alignment != gguf.GGUF_DEFAULT_ALIGNMENT:
        w.data_alignment = reader.alignment
        w.add_custom_alignment(reader.alignment)
    _copy_kv(reader, w, int(file_type))
    kept: dict[tuple[str, str], list[str]] = {}
    for t, target, why in plan:
        if target == t.tensor_type:
            data = t.data
        elif target == gguf.GGMLQuantizationType.F32:
            data = _float_array(t)
        elif target == gguf.GGMLQuantizationType.F16:
            data = _float_array(t).astype(np.float16)
        else:
            data = gguf.quants.quantize(_float_array(t), target)
        w.add_tensor(t.name, data, raw_dtype=target)
        if why and tensor_group(t.name) == "code predictor matrices":
            kept.setdefault((target.name, why), []).append(t.name)
    w.write_header_to_file(path=tmp)
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()

    del reader, plan
    what = f"quantized mmproj {tmp}"
    out = _check_same_layout(header, tmp, N.MMPROJ_ARCH, what, res, "kazetts.*, clip.*")
    by_group: dict[str, Counter] = {}
    for name, (shape, ty) in out.tensors.items():
        g = tensor_group(name)
        if not _block_ok(shape, ty):
            raise ValueError(f"{what}: {name} rows are not a multiple of {ty.name}'s block")
        if g == "code predictor matrices" and _is_matrix(shape):
            if ty.name not in _CP_MATRIX_OK:
                raise ValueError(f"{what}: {name} is {ty.name}, not a type the code predictor runs")
        elif ty != header.tensors[name][1]:
            raise ValueError(f"{what}: {name} ({g}) changed type")
        else:
            by_group.setdefault(g, Counter())[ty.name] += 1
    res.checks.append("types per group supported by the runtime, block sizes")
    res.groups = _groups(out)
    for (ty, why), tnames in kept.items():
        shown = ", ".join(tnames[:3]) + (f" ... ({len(tnames)} tensors)" if len(tnames) > 3 else "")
        res.kept.append((shown, ty, why))
    for g, types in sorted(by_group.items()):
        res.kept.append((g, ", ".join(f"{k} x{v}" for k, v in types.items()), _KEEP_REASON.get(g, "kept as is")))


# ------------------------------------------------------------------------------------------


def quantize_file(
    src, dst, type_name: str, *, nthread: int | None = None, allow_requantize: bool = False
) -> QuantizeResult:
    """Quantizes a talker or mmproj GGUF to ``type_name``; returns what was written."""
    type_name = str(type_name).lower()
    if type_name not in TALKER_FTYPES:
        raise ValueError(f"unknown type {type_name!r}: choose one of {', '.join(TYPES)}")
    src, dst = _check_paths(src, dst)
    reader = GGUFHeader(src)
    arch = _arch(reader)
    if arch == N.TALKER_ARCH:
        kind = "talker"
    elif arch == N.MMPROJ_ARCH:
        kind = "mmproj"
        if not any(name.startswith(N.CODE_PREFIX + ".") for name in reader.tensors):
            raise ValueError(f"{src}: a clip GGUF without a Qwen3-TTS code predictor ({N.CODE_PREFIX}.*)")
    else:
        raise ValueError(
            f"{src}: a {arch!r} GGUF, not a Qwen3-TTS talker ({N.TALKER_ARCH}) or mmproj ({N.MMPROJ_ARCH})"
        )
    res = QuantizeResult(input=src, output=dst, kind=kind, type=type_name, in_bytes=src.stat().st_size)
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)  # as `kazetts convert -o` does
    except OSError as e:
        raise ValueError(f"cannot create the output directory {dst.parent}: {e.strerror or e}") from None
    tmp = dst.with_name(dst.name + ".part")
    t0 = time.time()
    try:
        if kind == "talker":
            _quantize_talker(src, tmp, type_name, nthread or os.cpu_count() or 1, allow_requantize, res, reader)
        else:
            _quantize_mmproj(src, tmp, type_name, allow_requantize, res, reader)
        os.replace(tmp, dst)
    except OSError as e:
        raise ValueError(f"cannot write {dst}: {e}") from None
    finally:
        if tmp.exists():
            tmp.unlink()
    res.seconds = time.time() - t0
    res.out_bytes = dst.stat().st_size
    return res
