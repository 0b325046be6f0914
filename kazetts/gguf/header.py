"""Fast GGUF metadata and row access, for start-up paths.

gguf's GGUFReader builds Python objects for every field part: on a talker's 155k-token
vocabulary and 290k merges that takes ~16 s. This parser reads the key/values and the tensor
table with struct over a memory map (a fraction of a second) and reads rows of a tensor
through a numpy memmap, dequantizing only those rows.

It checks what ggml's own reader checks (gguf.cpp), so a file it accepts is one llama.cpp and
libkazetts can open: every count and size is bounded by the bytes left in the file before
anything is allocated for it, and every malformed input is a GGUFError naming the file.
"""

from __future__ import annotations

import mmap
import pathlib
import struct

import gguf
import numpy as np
from gguf.quants import dequantize

from kazetts.errors import ModelFileError

VERSIONS = (2, 3)  # GGUFv1 (32-bit counts) is no longer read by ggml either
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_NAME = 64  # GGML_MAX_NAME, with the terminating NUL
_INT64_MAX = 2**63 - 1
_UINT32 = 4


class GGUFError(ModelFileError):
    """A file that is not a well-formed GGUF (or not the GGUF a stage needs); names the file.
    A ModelFileError, so also a ValueError and a KazettsError."""


class _Reader:
    """Bounds-checked little-endian reads over a buffer; every failure is a GGUFError."""

    _SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
    STRING, ARRAY = 8, 9
    # the fewest bytes a value of each type takes (a string: its length; an array: type + count)
    _MIN_SIZE = {**{t: struct.calcsize(f) for t, f in _SCALAR.items()}, STRING: 8, ARRAY: 12}

    def __init__(self, buf, path):
        self.buf, self.path, self.pos = buf, path, 0

    def fail(self, what: str):
        raise GGUFError(f"{self.path}: not a readable GGUF file ({what} at byte {self.pos})")

    @property
    def left(self) -> int:
        return len(self.buf) - self.pos

    def take(self, fmt: str):
        n = struct.calcsize(fmt)
        if n > self.left:
            self.fail("truncated")
        v = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += n
        return v

    def count(self, what: str, min_item_size: int) -> int:
        """A u64 count of items of at least min_item_size bytes each, bounded by the bytes left."""
        n = self.take("<Q")
        if n * min_item_size > self.left:
            self.fail(f"{what} count {n} exceeds the file")
        return n

    def string(self) -> str:
        n = self.count("string length", 1)
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.fail("string is not UTF-8")

    def strings(self, n: int) -> list[str]:
        """n strings in a row (the vocabulary's hot loop: kept free of method calls)."""
        buf, pos, end, unpack, out = self.buf, self.pos, len(self.buf), struct.unpack_from, []
        for _ in range(n):
            if pos + 8 > end:
                break
            size = unpack("<Q", buf, pos)[0]
            pos += 8
            if size > end - pos:
                break
            out.append(buf[pos : pos + size])
            pos += size
        self.pos = pos
        if len(out) < n:
            self.fail("truncated string array")
        try:
            return [s.decode("utf-8") for s in out]
        except UnicodeDecodeError:
            self.fail("string is not UTF-8")

    def value(self, t: int):
        if t == self.STRING:
            return self.string()
        if t == self.ARRAY:
            sub = self.take("<I")
            if sub == self.ARRAY:
                self.fail("nested array")
            if sub not in self._MIN_SIZE:
                self.fail(f"unknown array element type {sub}")
            n = self.count("array", self._MIN_SIZE[sub])
            if sub == self.STRING:
                return self.strings(n)
            fmt = self._SCALAR[sub]
            size = struct.calcsize(fmt)
            values = list(struct.iter_unpack(fmt, self.buf[self.pos : self.pos + n * size]))
            self.pos += n * size
            return [v[0] for v in values]
        if t not in self._SCALAR:
            self.fail(f"unknown value type {t}")
        return self.take(self._SCALAR[t])


class GGUFHeader:
    """A GGUF's key/values and tensor table, parsed with struct over a memory map (GGUFReader
    takes seconds on a 151k-token vocabulary; this takes a fraction of one)."""

    def __init__(self, path):
        self.path = pathlib.Path(path)
        try:
            with open(path, "rb") as f:
                size = f.seek(0, 2)
                if size == 0:
                    raise GGUFError(f"{path}: not a GGUF file (empty)")
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                    self._parse(_Reader(mm, path), size)
        except OSError as e:
            raise GGUFError(f"{path}: cannot read ({e.strerror or e})") from None

    def _parse(self, r: _Reader, file_size: int) -> None:
        if r.left < 4 or r.take("<4s") != b"GGUF":
            raise GGUFError(f"{r.path}: not a GGUF file")
        version = r.take("<I")
        if version not in VERSIONS:
            r.fail(f"unknown version {version}, expected one of {VERSIONS}")
        n_tensors = r.count("tensor", 8 + 4 + 4 + 8)  # name, n_dims, type, offset
        n_kv = r.count("key/value", 8 + 4 + 1)  # key, type, smallest value
        self.kv = {}
        for _ in range(n_kv):
            key = r.string()
            if not key:
                r.fail("empty key")
            if key in self.kv:
                r.fail(f"duplicate key {key!r}")
            value_type = r.take("<I")
            self.kv[key] = r.value(value_type)
            if key == "general.alignment" and value_type != _UINT32:
                r.fail("general.alignment is not a uint32")
        align = self.kv.get("general.alignment", gguf.GGUF_DEFAULT_ALIGNMENT)
        if align <= 0 or align & (align - 1):
            r.fail(f"general.alignment {align} is not a power of two")
        self.tensors = {}
        self.offsets = {}
        expected_offset = 0  # ggml wants the tensors packed in table order, each padded to the alignment
        for _ in range(n_tensors):
            name = r.string()
            if name in self.tensors:
                r.fail(f"duplicate tensor {name!r}")
            if len(name.encode()) >= MAX_NAME:
                r.fail(f"tensor name {name[:MAX_NAME]!r}... is longer than {MAX_NAME - 1} bytes")
            self.tensors[name] = self._tensor_info(r, name)
            self.offsets[name] = r.take("<Q")
            if self.offsets[name] != expected_offset:
                r.fail(f"tensor {name} has offset {self.offsets[name]}, expected {expected_offset}")
            expected_offset += (self.nbytes(name) + align - 1) // align * align
        self.data_start = (r.pos + align - 1) // align * align
        for name in self.tensors:
            if self.data_start + self.offsets[name] + self.nbytes(name) > file_size:
                raise GGUFError(f"{r.path}: tensor {name} lies past the end of the file (truncated?)")

    @staticmethod
    def _tensor_info(r: _Reader, name: str):
        n_dims = r.take("<I")
        if n_dims > MAX_DIMS:
            r.fail(f"tensor {name} has {n_dims} dimensions, expected at most {MAX_DIMS}")
        shape = [r.take("<Q") for _ in range(n_dims)]
        elements = 1
        for d in shape:
            elements *= d
            if d > _INT64_MAX or elements > _INT64_MAX:
                r.fail(f"tensor {name} shape {shape} overflows")
        type_id = r.take("<I")
        try:
            ty = gguf.GGMLQuantizationType(type_id)
            block, _ = gguf.GGML_QUANT_SIZES[ty]
        except (ValueError, KeyError):
            r.fail(f"tensor {name} has unknown type {type_id}")
        row = shape[0] if shape else 1  # ggml: a 0-dimensional tensor is [1, 1, 1, 1]
        if row % block:
            r.fail(f"tensor {name} row of {row} is not a multiple of the {ty.name} block of {block}")
        return shape, ty

    def nbytes(self, name: str, as_type: gguf.GGMLQuantizationType | None = None) -> int:
        """Bytes of a tensor's data (as stored, or in `as_type`: e.g. a type a loader converts it to)."""
        shape, ty = self.tensors[name]
        block, size = gguf.GGML_QUANT_SIZES[ty if as_type is None else as_type]
        return int(np.prod([int(x) for x in shape], dtype=object)) // block * size

    def values(self, name: str) -> np.ndarray:
        """All of a tensor's values, dequantized, as float32 [n] (ggml order: ne0 fastest)."""
        raw = np.memmap(
            self.path, dtype=np.uint8, mode="r", offset=self.data_start + self.offsets[name], shape=(self.nbytes(name),)
        )
        return _to_float32(np.asarray(raw), self.tensors[name][1]).reshape(-1)

    def rows(self, name: str, ids) -> np.ndarray:
        """Rows of a 2-D tensor (ggml ne = [row_len, n_rows]) as float32 [len(ids), row_len]."""
        shape, ty = self.tensors[name]
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if not ids.size:  # e.g. the trailing text of a one-token text in streaming mode
            return np.zeros((0, int(shape[0])), np.float32)
        if ids.min() < 0 or ids.max() >= int(shape[1]):
            raise ValueError(f"{name}: row id out of range 0..{int(shape[1]) - 1}")
        block, size = gguf.GGML_QUANT_SIZES[ty]
        row_bytes = int(shape[0]) // block * size
        table = np.memmap(
            self.path,
            dtype=np.uint8,
            mode="r",
            offset=self.data_start + self.offsets[name],
            shape=(int(shape[1]), row_bytes),
        )
        width = int(shape[0])  # explicit: an empty id list gives [0, width], not a reshape error
        if not len(ids):
            return np.zeros((0, width), np.float32)
        return _to_float32(np.asarray(table[ids]), ty).reshape(len(ids), width)


def _to_float32(raw: np.ndarray, ty) -> np.ndarray:
    """Bytes of ggml type `ty` as float32 values (a copy)."""
    if ty == gguf.GGMLQuantizationType.F32:
        return raw.view(np.float32).copy()
    if ty == gguf.GGMLQuantizationType.F16:
        return raw.view(np.float16).astype(np.float32)
    return np.asarray(dequantize(raw, ty), dtype=np.float32)
