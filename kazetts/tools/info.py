"""``kazetts info FILE``: what a kazetts / llama.cpp Qwen3-TTS GGUF holds, as a readable table.

Works on the talker file (arch ``qwen3tts``) and the mmproj file (arch ``clip``), written by
kazetts or by llama.cpp's own converter (no ``kazetts.*`` keys: the voices are then recovered from
the token names, see :class:`kazetts.stages.talker_file.TalkerFile`).
"""

from __future__ import annotations

import pathlib
import re
from collections import Counter, OrderedDict
from dataclasses import dataclass, field

from kazetts.gguf import names as N
from kazetts.gguf.header import GGUFError, GGUFHeader

# talker hidden size -> tts_model_size tag of the published models
_SIZE_BY_HIDDEN = {1024: "0b6", 2048: "1b7"}


def tensor_group(name: str) -> str:
    """The runtime group a tensor belongs to (how it is used decides which types are safe)."""
    if name.startswith(N.CODE_PREFIX + "."):
        if name in (N.CODE_EMBD, N.CODE_OUT_EMBD):
            return "code predictor tables"  # read row by row on the host
        if (
            name.endswith("_norm.weight")
            or name.endswith(".ln1.weight")
            or name.endswith(".ln2.weight")
            or name.endswith(".bias")
        ):
            return "code predictor norms/biases"
        return "code predictor matrices"  # blk.*.attn_*/ffn_*, head, proj_in
    if name.startswith(N.WAV + "."):
        return "codec decoder"
    if name.startswith("a.") or name.startswith("mm.a."):
        return "speaker encoder"
    if name == N.TOKEN_EMBD:
        return "token_embd"
    if name == N.OUTPUT:
        return "output (codec head)"
    if name.startswith("blk."):
        if name.endswith("norm.weight"):
            return "talker norms"
        return "talker blocks"
    if name.endswith("norm.weight"):
        return "talker norms"
    return "other"


def name_pattern(name: str) -> str:
    """A tensor name with its block numbers as N (a.gen.wav.dac.blk.N.res.N.conv1.weight)."""
    return re.sub(r"\.\d+(?=\.|$)", ".N", name)


@dataclass
class FileInfo:
    path: pathlib.Path
    arch: str
    kind: str  # talker | mmproj
    model_type: str = "?"
    size_tag: str = "?"
    file_type: str = "?"
    name: str = ""
    sizes: dict = field(default_factory=OrderedDict)
    n_tensors: int = 0
    tensor_bytes: int = 0
    file_bytes: int = 0
    groups: dict = field(default_factory=OrderedDict)  # group -> Counter(type name -> n tensors)
    patterns: dict = field(default_factory=dict)  # group -> type name -> Counter(name pattern -> n)
    group_bytes: dict = field(default_factory=dict)
    speakers: dict = field(default_factory=dict)  # name -> (codec id, dialect or "")
    languages: dict = field(default_factory=dict)  # name -> codec id
    metadata_source: str = ""
    notes: list = field(default_factory=list)


def _field(header, key, default=None):
    return header.kv.get(key, default)


def _file_type_name(value) -> str:
    import gguf

    if value is None:
        return "?"
    try:
        return gguf.LlamaFileType(int(value)).name
    except ValueError:
        return str(value)


def inspect_gguf(path) -> FileInfo:
    """Reads a GGUF's metadata and tensor table (memory-mapped; tensor data is not touched)."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise ValueError(f"file not found: {path}")
    try:
        reader = GGUFHeader(path)
    except GGUFError:
        raise  # already names the file and what is wrong
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable GGUF file ({e})") from None
    arch = _field(reader, "general.architecture", "?")
    if arch == N.TALKER_ARCH:
        kind = "talker"
    elif arch == N.MMPROJ_ARCH:
        kind = "mmproj"
    else:
        raise ValueError(
            f"{path}: a {arch!r} GGUF, not a Qwen3-TTS talker ({N.TALKER_ARCH}) or mmproj ({N.MMPROJ_ARCH})"
        )
    info = FileInfo(path=path, arch=arch, kind=kind, file_bytes=path.stat().st_size)
    info.name = _field(reader, "general.name", "") or ""
    info.file_type = _file_type_name(_field(reader, "general.file_type"))
    groups: dict[str, Counter] = {}
    for name, (_, ty) in reader.tensors.items():
        g = tensor_group(name)
        groups.setdefault(g, Counter())[ty.name] += 1
        info.patterns.setdefault(g, {}).setdefault(ty.name, Counter())[name_pattern(name)] += 1
        info.group_bytes[g] = info.group_bytes.get(g, 0) + reader.nbytes(name)
        info.tensor_bytes += reader.nbytes(name)
    info.n_tensors = len(reader.tensors)
    info.groups = OrderedDict(sorted(groups.items()))
    if kind == "talker":
        _talker_info(info, path, reader)
    else:
        _mmproj_info(info, reader)
    return info


def _talker_info(info: FileInfo, path, reader) -> None:
    from kazetts.stages.talker_file import TalkerFile

    tf = TalkerFile(path)
    v = tf.voices
    info.metadata_source = (
        "kazetts.* keys" if tf.voices_from_kazetts_keys else "token names (no kazetts.* keys: llama.cpp's converter?)"
    )
    info.model_type = v.model_type
    size = _field(reader, N.K_MODEL_SIZE)
    info.size_tag = size or _SIZE_BY_HIDDEN.get(tf.hidden_size, "?")
    a = N.TALKER_ARCH
    info.sizes.update(
        [
            ("hidden", tf.hidden_size),
            ("layers", _field(reader, f"{a}.block_count", "?")),
            ("ffn", _field(reader, f"{a}.feed_forward_length", "?")),
            (
                "heads / kv heads",
                f"{_field(reader, f'{a}.attention.head_count', '?')} / {_field(reader, f'{a}.attention.head_count_kv', '?')}",
            ),
            ("text vocab", tf.text_vocab_size),
            ("codec vocab", tf.codec_vocab_size),
            ("context", _field(reader, f"{a}.context_length", "?")),
        ]
    )
    info.speakers = {s: (i, v.speaker_dialects.get(s, "") or "") for s, i in v.speakers.items()}
    info.languages = dict(v.languages)


def _mmproj_info(info: FileInfo, reader) -> None:
    has_kz = reader.kv.get(N.K_MODEL_TYPE) is not None
    names = set(reader.tensors)
    has_spk = any(tensor_group(n) == "speaker encoder" for n in names)
    info.metadata_source = "kazetts.* keys" if has_kz else "clip keys only (no kazetts.* keys: llama.cpp's converter?)"
    info.model_type = _field(reader, N.K_MODEL_TYPE) or ("base" if has_spk else "?")
    hidden = _field(reader, "clip.gen.audio.projection_dim")
    info.size_tag = _field(reader, N.K_MODEL_SIZE) or _SIZE_BY_HIDDEN.get(int(hidden) if hidden else 0, "?")
    g = "clip.gen.audio."
    info.sizes.update(
        [
            ("talker hidden", hidden if hidden is not None else "?"),
            ("code predictor hidden", _field(reader, g + "embedding_length", "?")),
            ("code predictor layers", _field(reader, g + "block_count", "?")),
            ("code predictor ffn", _field(reader, g + "feed_forward_length", "?")),
        ]
    )
    if N.CODE_EMBD in reader.tensors:
        shape = [int(x) for x in reader.tensors[N.CODE_EMBD][0]]
        if len(shape) >= 3:
            info.sizes["codebooks x vocab"] = f"{shape[2] + 1} x {shape[1]}"
    if has_kz:
        info.sizes["codec decoder layers"] = _field(reader, N.K_WAV + "num_hidden_layers", "?")
        rate = _field(reader, N.K_WAV + "output_sample_rate")
        if rate:
            info.sizes["sample rate"] = rate
    info.sizes["speaker encoder"] = "yes" if has_spk else "no"
    spk = _field(reader, N.K_SPEAKERS, []) or []
    ids = _field(reader, N.K_SPEAKER_IDS, []) or []
    dial = _field(reader, N.K_SPEAKER_DIALECTS, []) or [""] * len(spk)
    info.speakers = {s: (int(i), d or "") for s, i, d in zip(spk, ids, dial)}
    info.languages = dict(zip(_field(reader, N.K_LANGUAGES, []) or [], _field(reader, N.K_LANGUAGE_IDS, []) or []))
    if not has_kz:
        info.notes.append("speakers and languages live in the talker file")


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def format_info(info: FileInfo) -> str:
    rows = [
        ("file", str(info.path)),
        ("kind", f"{info.kind} (arch {info.arch})"),
        ("model type", info.model_type),
        ("size", info.size_tag),
    ]
    if info.name:
        rows.append(("name", info.name))
    rows.append(("file type", info.file_type))
    rows.append(("metadata", info.metadata_source))
    rows += [(k, str(v)) for k, v in info.sizes.items()]
    rows.append(("tensors", f"{info.n_tensors} ({_mb(info.tensor_bytes)} of data, file {_mb(info.file_bytes)})"))
    w = max(len(k) for k, _ in rows)
    out = [f"{k:<{w}}  {v}" for k, v in rows]
    out.append("")
    out.append("tensor types per group:")
    gw = max([len(g) for g in info.groups] + [5])
    for g, types in info.groups.items():
        t = ", ".join(f"{name} x{n}" for name, n in sorted(types.items(), key=lambda kv: -kv[1]))
        out.append(f"  {g:<{gw}}  {_mb(info.group_bytes[g]):>10}  {t}")
        for type_name, _ in sorted(types.items(), key=lambda kv: -kv[1])[1:]:  # which tensors are not
            patterns = info.patterns[g][type_name]  # in the group's main type
            names = ", ".join(f"{p}" + (f" x{n}" if n > 1 else "") for p, n in sorted(patterns.items()))
            out.append(f"  {'':<{gw}}  {'':>10}    {type_name}: {names}")
    out.append("")
    if info.speakers:
        out.append(f"speakers ({len(info.speakers)}):")
        for s, (i, d) in sorted(info.speakers.items()):
            out.append((f"  {s:<12} id {i:<5}" + (f" dialect {d}" if d else "")).rstrip())
    else:
        out.append(
            "speakers: none" + (" (Base: voice cloning from reference audio)" if info.model_type == "base" else "")
        )
    if info.languages:
        langs = ", ".join(f"{k} ({v})" for k, v in sorted(info.languages.items(), key=lambda kv: kv[0]))
        out.append(f"languages ({len(info.languages)}): {langs}")
    else:
        out.append("languages: none listed")
    for n in info.notes:
        out.append(f"note: {n}")
    return "\n".join(out)
