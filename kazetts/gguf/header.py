"""Fast GGUF metadata and row access, for start-up paths.

gguf's GGUFReader builds Python objects for every field part: on a talker's 155k-token
vocabulary and 290k merges that takes ~16 s. This parser reads the key/values and the tensor
table with struct over a memory map (a fraction of a second) and reads rows of a tensor
through a numpy memmap, dequantizing only those rows.
"""

from __future__ import annotations

import mmap
import pathlib
import struct

import gguf
import numpy as np
from gguf.quants import dequantize

class GGUFHeader:
    """A GGUF's key/values and tensor table, parsed with struct over a memory map (GGUFReader
    takes seconds on a 151k-token vocabulary; this takes a fraction of one)."""

    _SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def __init__(self, path):
        self.path = pathlib.Path(path)
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            pos = 0

            def take(fmt):
                nonlocal pos
                v = struct.unpack_from(fmt, mm, pos)[0]
                pos += struct.calcsize(fmt)
                return v

            def string():
                nonlocal pos
                n = take("<Q")
                s = mm[pos:pos + n].decode("utf-8", "replace")
                pos += n
                return s

            def value(t):
                if t == 8:
                    return string()
                if t == 9:
                    sub, n = take("<I"), take("<Q")
                    return [value(sub) for _ in range(n)]
                return take(self._SCALAR[t])

            try:
                if take("<4s") != b"GGUF":
                    raise ValueError(f"{path}: not a GGUF file")
                take("<I")
                n_tensors, n_kv = take("<Q"), take("<Q")
                self.kv = {}
                for _ in range(n_kv):
                    k = string()
                    self.kv[k] = value(take("<I"))
                self.tensors = {}
                self.offsets = {}
                for _ in range(n_tensors):
                    name = string()
                    shape = [take("<Q") for _ in range(take("<I"))]
                    self.tensors[name] = (shape, gguf.GGMLQuantizationType(take("<I")))
                    self.offsets[name] = take("<Q")
                align = int(self.kv.get("general.alignment", gguf.GGUF_DEFAULT_ALIGNMENT))
                self.data_start = (pos + align - 1) // align * align
            except (struct.error, KeyError, ValueError) as e:
                raise ValueError(f"{path}: not a readable GGUF file ({e})") from None

    def nbytes(self, name: str) -> int:
        """Bytes of a tensor's data."""
        shape, ty = self.tensors[name]
        block, size = gguf.GGML_QUANT_SIZES[ty]
        return int(np.prod([int(x) for x in shape])) // block * size

    def values(self, name: str) -> np.ndarray:
        """All of a tensor's values, dequantized, as float32 [n] (ggml order: ne0 fastest)."""
        raw = np.memmap(self.path, dtype=np.uint8, mode="r", offset=self.data_start + self.offsets[name],
                        shape=(self.nbytes(name),))
        return _to_float32(np.asarray(raw), self.tensors[name][1]).reshape(-1)

    def rows(self, name: str, ids) -> np.ndarray:
        """Rows of a 2-D tensor (ggml ne = [row_len, n_rows]) as float32 [len(ids), row_len]."""
        shape, ty = self.tensors[name]
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= int(shape[1])):
            raise ValueError(f"{name}: row id out of range 0..{int(shape[1]) - 1}")
        block, size = gguf.GGML_QUANT_SIZES[ty]
        row_bytes = int(shape[0]) // block * size
        table = np.memmap(self.path, dtype=np.uint8, mode="r", offset=self.data_start + self.offsets[name],
                          shape=(int(shape[1]), row_bytes))
        return _to_float32(np.asarray(table[ids]), ty).reshape(len(ids), -1)


def _to_float32(raw: np.ndarray, ty) -> np.ndarray:
    """Bytes of ggml type `ty` as float32 values (a copy)."""
    if ty == gguf.GGMLQuantizationType.F32:
        return raw.view(np.float32).copy()
    if ty == gguf.GGMLQuantizationType.F16:
        return raw.view(np.float16).astype(np.float32)
    return np.asarray(dequantize(raw, ty), dtype=np.float32)
