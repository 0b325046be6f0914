"""GGUFHeader and TalkerFile on malformed files: one error type (GGUFError) naming the file."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from kazetts.gguf.header import GGUFError, GGUFHeader
from conftest import edited
from kazetts.validation.gguf_edit import ARRAY, FLOAT32, KV, STRING, UINT32, GGUFLayout, Tensor, scalar_bytes


def _layout() -> GGUFLayout:
    """A tiny well-formed GGUF: two keys, an array, two F32 tensors."""
    kvs = [
        KV("general.architecture", STRING, scalar_bytes(STRING, "test")),
        KV("test.count", UINT32, scalar_bytes(UINT32, 7)),
        KV("test.names", ARRAY, struct.pack("<IQ", STRING, 2) + scalar_bytes(STRING, "a") + scalar_bytes(STRING, "é")),
    ]
    tensors = [
        Tensor("w", [4, 3], 0, np.arange(12, dtype=np.float32).tobytes()),
        Tensor("b", [3], 0, np.ones(3, np.float32).tobytes()),
    ]
    return GGUFLayout(3, kvs, tensors)


def _write(tmp_path, data: bytes, name="bad.gguf"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _rejects(path, match: str):
    with pytest.raises(GGUFError, match=match) as e:
        GGUFHeader(path)
    assert str(path) in str(e.value)


def test_the_crafted_file_is_well_formed(tmp_path):
    h = GGUFHeader(_write(tmp_path, _layout().to_bytes()))
    assert h.kv == {"general.architecture": "test", "test.count": 7, "test.names": ["a", "é"]}
    assert [s for s, _ in h.tensors.values()] == [[4, 3], [3]]
    assert np.array_equal(h.rows("w", [2]), [[8, 9, 10, 11]])


def test_truncation_anywhere_is_a_gguf_error(tmp_path):
    data = _layout().to_bytes()
    last = GGUFLayout.parse(data).tensors[-1]
    for cut in range(last.data_pos + len(last.data)):  # the padding after the last tensor may go
        path = _write(tmp_path, data[:cut])
        with pytest.raises(GGUFError) as e:
            GGUFHeader(path)
        assert str(path) in str(e.value), cut


def _patched(layout_edit=None, raw_edit=None) -> bytes:
    L = _layout()
    if layout_edit:
        layout_edit(L)
    data = bytearray(L.to_bytes())
    if raw_edit:
        raw_edit(data)
    return bytes(data)


def _set(offset: int, fmt: str, value):
    return lambda b: struct.pack_into(fmt, b, offset, value)


@pytest.mark.parametrize(
    "edit, match",
    [
        (dict(raw_edit=_set(0, "<4s", b"GGUX")), "not a GGUF file"),
        (dict(raw_edit=_set(4, "<I", 1)), "unknown version 1"),
        (dict(raw_edit=_set(4, "<I", 4)), "unknown version 4"),
        (dict(raw_edit=_set(8, "<Q", 1 << 62)), "tensor count"),
        (dict(raw_edit=_set(16, "<Q", (1 << 64) - 1)), "key/value count"),
        (dict(raw_edit=_set(24, "<Q", 1 << 40)), "string length"),
        (dict(layout_edit=lambda L: L.kvs.__setitem__(1, KV("test.count", 13, b"\0"))), "unknown value type 13"),
        (
            dict(
                layout_edit=lambda L: L.kvs.append(
                    KV("nested", ARRAY, struct.pack("<IQ", ARRAY, 1) + struct.pack("<IQ", UINT32, 0))
                )
            ),
            "nested array",
        ),
        (
            dict(layout_edit=lambda L: L.kvs.append(KV("odd", ARRAY, struct.pack("<IQ", 77, 1)))),
            "unknown array element type",
        ),
        (
            dict(layout_edit=lambda L: L.kvs.append(KV("huge", ARRAY, struct.pack("<IQ", UINT32, 1 << 61)))),
            "array count",
        ),
        (dict(layout_edit=lambda L: L.kvs.append(KV("bad", STRING, b"\x02\0\0\0\0\0\0\0\xff\xfe"))), "not UTF-8"),
        (dict(layout_edit=lambda L: L.kvs.append(L.kvs[0])), "duplicate key"),
        (dict(layout_edit=lambda L: L.kvs.append(KV("", UINT32, scalar_bytes(UINT32, 1)))), "empty key"),
        (dict(layout_edit=lambda L: L.set_kv("general.alignment", UINT32, 0)), "not a power of two"),
        (dict(layout_edit=lambda L: L.set_kv("general.alignment", UINT32, 48)), "not a power of two"),
        (dict(layout_edit=lambda L: L.set_kv("general.alignment", FLOAT32, 32.0)), "not a uint32"),
        (dict(layout_edit=lambda L: L.tensors.append(L.tensors[0])), "duplicate tensor"),
        (dict(layout_edit=lambda L: setattr(L.tensors[1], "name", "x" * 64)), "longer than 63 bytes"),
        (dict(layout_edit=lambda L: setattr(L.tensors[0], "dims", [1, 1, 1, 1, 12])), "5 dimensions"),
        (dict(layout_edit=lambda L: setattr(L.tensors[0], "dims", [1 << 40, 1 << 40])), "overflows"),
        (dict(layout_edit=lambda L: setattr(L.tensors[0], "dims", [0, 1 << 63])), "overflows"),
        (dict(layout_edit=lambda L: setattr(L.tensors[0], "type", 4)), "unknown type 4"),
        (dict(layout_edit=lambda L: setattr(L.tensors[0], "type", 8)), "not a multiple of the Q8_0 block"),
        # found by the fuzzer: a 0-dimensional tensor of a block type (IndexError before)
        (
            dict(layout_edit=lambda L: (setattr(L.tensors[1], "dims", []), setattr(L.tensors[1], "type", 8))),
            "Q8_0 block",
        ),
        (dict(layout_edit=lambda L: setattr(L.tensors[1], "dims", [3000])), "past the end of the file"),
    ],
)
def test_malformed_files_are_gguf_errors(tmp_path, edit, match):
    _rejects(_write(tmp_path, _patched(**edit)), match)


def test_tensor_offsets_must_follow_the_table(tmp_path):
    L = _layout()
    data = bytearray(L.to_bytes())
    at = GGUFLayout.parse(bytes(data)).tensors[1].end - 8
    struct.pack_into("<Q", data, at, 96)  # b claims to start elsewhere
    _rejects(_write(tmp_path, bytes(data)), "has offset 96, expected 64")


def test_unreadable_paths_are_gguf_errors(tmp_path):
    _rejects(_write(tmp_path, b""), "empty")
    _rejects(tmp_path, "cannot read")
    _rejects(tmp_path / "missing.gguf", "cannot read")


def test_a_scalar_tensor_is_read_as_ggml_does(tmp_path):
    h = GGUFHeader(_write(tmp_path, _patched(layout_edit=lambda L: setattr(L.tensors[1], "dims", []))))
    assert h.tensors["b"][0] == [] and h.nbytes("b") == 4


def test_a_tensors_bytes_in_another_type(tmp_path):
    """nbytes(name, as_type): what a loader that converts the tensor holds (F32, type 0, too)."""
    import gguf

    L = _layout()
    L.tensors.append(Tensor("h", [4, 3], 1, np.zeros(12, np.float16).tobytes()))
    h = GGUFHeader(_write(tmp_path, L.to_bytes()))
    T = gguf.GGMLQuantizationType
    assert (h.nbytes("w"), h.nbytes("w", T.F16), h.nbytes("h"), h.nbytes("h", T.F32)) == (48, 24, 24, 48)


# ------------------------------------------------------------------------------------- TalkerFile


@pytest.fixture(scope="module")
def talker_layout(tiny_gguf):
    return GGUFLayout.read(tiny_gguf("tiny", "custom_voice", "f32", 0)[0])


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda L: L.set_kv("general.architecture", STRING, "llama"), "not a Qwen3-TTS talker"),
        (lambda L: L.drop("token_embd.weight"), "has no token_embd.weight"),
        (
            lambda L: L.set_tensor("token_embd.weight", [int(np.prod(L.tensor("token_embd.weight").dims))]),
            "expected a 2-D table",
        ),
        (lambda L: L.set_tensor("output.weight", [32, 3072]), "do not fit together"),
        # found by the fuzzer: llama.cpp loads an F16 norm weight, then aborts in its first step
        (
            lambda L: L.set_tensor("blk.1.attn_norm.weight", [64], 1),
            "blk.1.attn_norm.weight is F16, llama.cpp takes vectors in F32",
        ),
        # found by the fuzzer: llama.cpp loads an I8 matrix, then calls a null kernel (SEGV)
        (
            lambda L: L.set_tensor("blk.0.ffn_gate.weight", [64, 128], 24),
            "blk.0.ffn_gate.weight is I8, a type llama.cpp cannot",
        ),
        (lambda L: L.set_kv("kazetts.codec.pad_id", UINT32, 5000), "codec_pad id 5000 is not in 0..3071"),
        (lambda L: L.set_kv("kazetts.text.tts_pad_token_id", STRING, "x"), "tts_pad id is not an integer"),
        (lambda L: L.drop("kazetts.codec.bos_id"), "codec_bos id is missing"),
        (lambda L: L.set_kv("kazetts.speaker_ids", ARRAY, (UINT32, [1, 2])), "speaker_ids is not a list of 9 int"),
        (
            lambda L: L.set_kv("kazetts.languages", ARRAY, (UINT32, [1, 2])),
            "languages is not a list of any number of str",
        ),
        (lambda L: L.set_kv("kazetts.speaker_dialects", ARRAY, (STRING, ["klingon"] * 9)), "dialect 'klingon'"),
        (lambda L: (L.drop("kazetts.model_type"), L.drop("tokenizer.ggml.tokens")), "no token named"),
    ],
)
def test_malformed_talker_files_are_gguf_errors(tmp_path, talker_layout, edit, match):
    from kazetts.stages.talker_file import TalkerFile

    L = talker_layout.copy()
    edit(L)
    path = L.write(tmp_path / "talker.gguf")
    with pytest.raises(GGUFError, match=match) as e:
        TalkerFile(path)
    assert str(path) in str(e.value)


def test_a_talker_llama_cpp_refuses_is_a_gguf_error(tmp_path, talker_layout):
    """Found by the fuzzer: a table kazetts reads fine but llama.cpp refuses (a wrong shape)
    was a bare ValueError."""
    from kazetts.stages.talker import Talker

    path = edited(talker_layout, lambda L: L.set_tensor("blk.0.attn_k_norm.weight", [8]), tmp_path / "talker.gguf")
    with pytest.raises(GGUFError, match="llama.cpp could not load") as e:
        Talker(path, threads=1, n_ctx=16)
    assert str(path) in str(e.value)
