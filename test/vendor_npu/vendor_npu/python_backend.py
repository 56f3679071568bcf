"""The vendor payload on the pure-Python runtime (for prototyping before the C++ exists)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from executorch.runtime import python_backend
from vendor_npu import payload as P


class VendorNpuPythonBackend(python_backend.PythonBackend):
    def init(self, processed, compile_specs, named_data):
        p = P.Payload.decode(bytes(processed))
        slots: list = []
        for s in p.slots:
            if s.kind == P.CONSTANT:
                slots.append(torch.frombuffer(bytearray(named_data[s.key]), dtype=torch.float32).reshape(s.sizes))
            elif s.kind == P.TEMP:
                slots.append(torch.empty(s.sizes))
            else:
                slots.append(None)
        return p, slots

    def execute(self, handle, args):
        p, slots = handle
        for slot, value in zip(p.inputs + p.outputs, args):
            slots[slot] = value
        for op in p.ops:
            a, b = slots[op.a], slots[op.b]
            c = None if op.c == P.NONE else slots[op.c]
            if op.opcode == P.ADD:
                r = a + b
            elif op.opcode == P.MUL:
                r = a * b
            elif op.opcode == P.LINEAR:
                r = F.linear(a, b, c)
            else:
                st, pad, dil, groups = op.params[0:2], op.params[2:4], op.params[4:6], op.params[6]
                r = F.conv2d(a, b, c, st, pad, dil, groups)
            slots[op.out].copy_(r)


def register() -> None:
    python_backend.register_backend("VendorNpuBackend", VendorNpuPythonBackend())
