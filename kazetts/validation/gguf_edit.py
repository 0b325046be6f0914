"""A GGUF file as an editable list of fields, for the fuzzer and the bad-file tests.

`GGUFLayout.parse` reads a well-formed file into its key/values and tensors (values kept as
their raw bytes, so the 155k-token vocabulary is never decoded) and records where every field
lies: the fuzzer patches counts, sizes and types in place and cuts the file at every section
boundary. `GGUFLayout.to_bytes` writes the (edited) fields back as a consistent file: tensor
offsets and the data section are recomputed, so a file with a swapped, reshaped or retyped
tensor still parses and reaches the stage's own checks.
"""

from __future__ import annotations

import dataclasses
import pathlib
import struct

import numpy as np

UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, FLOAT64 = 4, 5, 6, 7, 8, 9, 10, 12
_FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
DEFAULT_ALIGNMENT = 32


@dataclasses.dataclass
class KV:
    key: str
    type: int
    raw: bytes  # the value's bytes as stored (after the type field)
    start: int = -1  # byte range of the whole entry in the parsed file (-1: edited)
    end: int = -1
    value_pos: int = -1  # where the value (or the array's element type) starts

    def scalar(self):
        return struct.unpack(_FMT[self.type], self.raw)[0] if self.type in _FMT else None


@dataclasses.dataclass
class Tensor:
    name: str
    dims: list[int]  # ggml order (ne0 first)
    type: int
    data: bytes | memoryview
    start: int = -1  # byte range of the tensor info in the parsed file
    end: int = -1
    dims_pos: int = -1  # where n_dims is stored
    data_pos: int = -1  # where its data starts in the parsed file


def string_bytes(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def scalar_bytes(type_id: int, value) -> bytes:
    if type_id == STRING:
        return string_bytes(value)
    return struct.pack(_FMT[type_id], value)


def array_bytes(type_id: int, values) -> bytes:
    return struct.pack("<IQ", type_id, len(values)) + b"".join(scalar_bytes(type_id, v) for v in values)


def string_places(data: bytes | memoryview, kv: KV) -> list[tuple[int, int]]:
    """(offset in the file, length) of each string of a string-array key, as parsed from `data`:
    where a test or the fuzzer can change a token's bytes in place."""
    (count,), pos = struct.unpack_from("<Q", data, kv.value_pos + 4), kv.value_pos + 12  # element type, count
    places = []
    for _ in range(count):
        (n,) = struct.unpack_from("<Q", data, pos)
        places.append((pos + 8, n))
        pos += 8 + n
    return places


def tensor_nbytes(dims, type_id: int) -> int:
    import gguf

    block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(type_id)]
    return int(np.prod(dims, dtype=object)) // block * size


@dataclasses.dataclass
class GGUFLayout:
    version: int
    kvs: list[KV]
    tensors: list[Tensor]
    data_start: int = 0
    size: int = 0

    # -- reading --------------------------------------------------------------------------------
    @classmethod
    def parse(cls, data: bytes | memoryview) -> "GGUFLayout":
        """The fields of a well-formed GGUF (`data` is kept: tensor data are views into it)."""
        buf = memoryview(data)
        pos = 0

        def take(fmt):
            nonlocal pos
            v = struct.unpack_from(fmt, buf, pos)[0]
            pos += struct.calcsize(fmt)
            return v

        def skip_value(t):
            nonlocal pos
            if t == STRING:
                pos += 8 + struct.unpack_from("<Q", buf, pos)[0]
            elif t == ARRAY:
                sub, n = take("<I"), take("<Q")
                if sub == STRING:
                    for _ in range(n):
                        pos += 8 + struct.unpack_from("<Q", buf, pos)[0]
                else:
                    pos += n * struct.calcsize(_FMT[sub])
            else:
                pos += struct.calcsize(_FMT[t])

        if bytes(buf[:4]) != b"GGUF":
            raise ValueError("not a GGUF file")
        pos = 4
        version, n_tensors, n_kv = take("<I"), take("<Q"), take("<Q")
        kvs = []
        for _ in range(n_kv):
            start = pos
            key = bytes(buf[pos + 8 : pos + 8 + struct.unpack_from("<Q", buf, pos)[0]]).decode()
            pos += 8 + len(key.encode())
            t = take("<I")
            value_pos = pos
            skip_value(t)
            kvs.append(KV(key, t, bytes(buf[value_pos:pos]), start, pos, value_pos))
        tensors = []
        for _ in range(n_tensors):
            start = pos
            n = struct.unpack_from("<Q", buf, pos)[0]
            name = bytes(buf[pos + 8 : pos + 8 + n]).decode()
            pos += 8 + n
            dims_pos = pos
            dims = [take("<Q") for _ in range(take("<I"))]
            t, offset = take("<I"), take("<Q")
            tensors.append(Tensor(name, dims, t, b"", start, pos, dims_pos, offset))
        layout = cls(version, kvs, tensors, size=len(buf))
        align = layout.alignment
        layout.data_start = (pos + align - 1) // align * align
        for t in tensors:
            t.data_pos += layout.data_start
            t.data = buf[t.data_pos : t.data_pos + tensor_nbytes(t.dims, t.type)]
        return layout

    @classmethod
    def read(cls, path) -> "GGUFLayout":
        return cls.parse(pathlib.Path(path).read_bytes())

    @property
    def alignment(self) -> int:
        """general.alignment, or the default when it is absent or unusable (a hostile value)."""
        for kv in self.kvs:
            if kv.key == "general.alignment" and kv.type == UINT32 and len(kv.raw) == 4:
                value = kv.scalar()
                if value > 0 and value & (value - 1) == 0:
                    return value
        return DEFAULT_ALIGNMENT

    def boundaries(self) -> list[int]:
        """Where each section ends (header fields, each key/value, each tensor info, the table)
        and each tensor's data starts and is half read: the cuts for truncation."""
        cuts = {0, 4, 8, 16, 24, self.data_start, self.size - 1}
        cuts.update(kv.end for kv in self.kvs)
        cuts.update(t.end for t in self.tensors)
        cuts.update(p for t in self.tensors for p in (t.data_pos, t.data_pos + len(t.data) // 2))
        return sorted(c for c in cuts if 0 <= c < self.size)

    # -- editing --------------------------------------------------------------------------------
    def copy(self) -> "GGUFLayout":
        """An independent copy of the fields (tensor data are shared until replaced)."""
        return dataclasses.replace(
            self,
            kvs=[dataclasses.replace(kv) for kv in self.kvs],
            tensors=[dataclasses.replace(t, dims=list(t.dims)) for t in self.tensors],
        )

    def kv(self, key: str) -> KV:
        return next(kv for kv in self.kvs if kv.key == key)

    def tensor(self, name: str) -> Tensor:
        return next(t for t in self.tensors if t.name == name)

    def set_kv(self, key: str, type_id: int, value) -> None:
        """Sets (or adds) a key to a scalar, a string, or an array (value: (element type, list))."""
        raw = array_bytes(*value) if type_id == ARRAY else scalar_bytes(type_id, value)
        for kv in self.kvs:
            if kv.key == key:
                kv.type, kv.raw = type_id, raw
                return
        self.kvs.append(KV(key, type_id, raw))

    def drop(self, name: str) -> None:
        """Removes a key or a tensor."""
        self.kvs = [kv for kv in self.kvs if kv.key != name]
        self.tensors = [t for t in self.tensors if t.name != name]

    def set_tensor(self, name: str, dims, type_id: int | None = None, data: bytes | None = None) -> None:
        """Gives a tensor a new shape (and type): its data are cut or zero-padded to the new size
        unless given."""
        t = self.tensor(name)
        t.dims = [int(d) for d in dims]
        t.type = t.type if type_id is None else type_id
        want = tensor_nbytes(t.dims, t.type)
        if data is None:
            data = bytes(t.data[:want]) + bytes(max(0, want - len(t.data)))
        t.data = data

    def add_copies(self, prefix: str, new_prefixes) -> None:
        """Adds, for each new prefix, a copy of every tensor whose name starts with `prefix`
        (e.g. more layers)."""
        block = [t for t in self.tensors if t.name.startswith(prefix)]
        for new in new_prefixes:
            self.tensors += [dataclasses.replace(t, name=new + t.name[len(prefix) :], dims=list(t.dims)) for t in block]

    # -- writing --------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        align = self.alignment
        out = [b"GGUF", struct.pack("<IQQ", self.version, len(self.tensors), len(self.kvs))]
        for kv in self.kvs:
            out += [string_bytes(kv.key), struct.pack("<I", kv.type), kv.raw]
        offset, pad = 0, lambda n: (n + align - 1) // align * align
        for t in self.tensors:
            out += [
                string_bytes(t.name),
                struct.pack("<I", len(t.dims)),
                struct.pack(f"<{len(t.dims)}Q", *t.dims),
                struct.pack("<IQ", t.type, offset),
            ]
            offset += pad(len(t.data))
        head = b"".join(out)
        body = [head, bytes(pad(len(head)) - len(head))]
        for t in self.tensors:
            body += [t.data, bytes(pad(len(t.data)) - len(t.data))]
        return b"".join(body)

    def write(self, path) -> pathlib.Path:
        path = pathlib.Path(path)
        path.write_bytes(self.to_bytes())
        return path
