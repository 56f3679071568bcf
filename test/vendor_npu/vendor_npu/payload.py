"""The vendor payload format, shared by preprocess and both runtimes (little-endian):

    b"VNP1"
    u32 n_slots, then per slot: u8 kind (0 input, 1 constant, 2 temporary, 3 output), u8 ndim,
        i32 sizes[ndim], u16 key length, key (utf-8; constants name their named data)
    u32 n_inputs, u32 slot[n_inputs]      (the DelegateCall's inputs, in order)
    u32 n_outputs, u32 slot[n_outputs]    (its outputs, in order)
    u32 n_ops, then per op: u8 opcode (1 add, 2 mul, 3 linear, 4 conv2d), u32 out, u32 a, u32 b,
        u32 c (0xFFFFFFFF: none), i32 params[7] (conv2d: stride h w, padding h w, dilation h w, groups)

Every tensor is float32 and contiguous.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

MAGIC = b"VNP1"
INPUT, CONSTANT, TEMP, OUTPUT = range(4)
ADD, MUL, LINEAR, CONV2D = 1, 2, 3, 4
NONE = 0xFFFFFFFF


@dataclass
class Slot:
    kind: int
    sizes: list[int]
    key: str = ""


@dataclass
class Op:
    opcode: int
    out: int
    a: int
    b: int
    c: int = NONE
    params: list[int] = field(default_factory=lambda: [0] * 7)


@dataclass
class Payload:
    slots: list[Slot] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)

    def encode(self) -> bytes:
        out = [MAGIC, struct.pack("<I", len(self.slots))]
        for s in self.slots:
            key = s.key.encode()
            out.append(struct.pack(f"<BB{len(s.sizes)}iH", s.kind, len(s.sizes), *s.sizes, len(key)) + key)
        for ids in (self.inputs, self.outputs):
            out.append(struct.pack(f"<I{len(ids)}I", len(ids), *ids))
        out.append(struct.pack("<I", len(self.ops)))
        for op in self.ops:
            out.append(struct.pack("<BIIII7i", op.opcode, op.out, op.a, op.b, op.c, *op.params))
        return b"".join(out)

    @classmethod
    def decode(cls, data: bytes) -> "Payload":
        if data[:4] != MAGIC:
            raise ValueError(f"not a vendor_npu payload (magic {bytes(data[:4])!r})")
        p, pos = cls(), 4

        def take(fmt: str):
            nonlocal pos
            vals = struct.unpack_from("<" + fmt, data, pos)
            pos += struct.calcsize("<" + fmt)
            return vals

        (n,) = take("I")
        for _ in range(n):
            kind, ndim = take("BB")
            sizes = list(take(f"{ndim}i"))
            (klen,) = take("H")
            key = bytes(data[pos:pos + klen]).decode()
            pos += klen
            p.slots.append(Slot(kind, sizes, key))
        for ids in (p.inputs, p.outputs):
            (n,) = take("I")
            ids.extend(take(f"{n}I"))
        (n,) = take("I")
        for _ in range(n):
            opcode, out, a, b, c, *params = take("BIIII7i")
            p.ops.append(Op(opcode, out, a, b, c, list(params)))
        return p
