"""A small builder of hand-made `Program`s for the runtime tests (one method, planned memory)."""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from executorch.exir import schema as s

_CODES = {torch.float32: s.ScalarType.FLOAT, torch.int64: s.ScalarType.LONG, torch.bool: s.ScalarType.BOOL,
          torch.int32: s.ScalarType.INT, torch.float64: s.ScalarType.DOUBLE, torch.int8: s.ScalarType.CHAR,
          torch.uint8: s.ScalarType.BYTE}


class PlanBuilder:
    """Appends values and instructions; `program()` returns the finished Program."""

    def __init__(self, name: str = "forward", arena_size: int = 4096) -> None:
        self.name = name
        self.values: list[s.EValue] = []
        self.instructions: list[s.Instruction] = []
        self.operators: list[s.Operator] = []
        self.constants: list[s.Buffer] = [s.Buffer(b"")]
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self.arena_size = arena_size

    def _add(self, val) -> int:
        self.values.append(s.EValue(val))
        return len(self.values) - 1

    def tensor(self, sizes: Sequence[int], offset: Optional[int], dtype: torch.dtype = torch.float32,
               dynamism: s.TensorShapeDynamism = s.TensorShapeDynamism.STATIC,
               dim_order: Optional[Sequence[int]] = None) -> int:
        """A planned tensor at `offset` of arena 1 (offset None: not planned)."""
        alloc = None if offset is None else s.AllocationDetails.at(1, offset)
        order = list(dim_order) if dim_order is not None else list(range(len(sizes)))
        return self._add(s.Tensor(_CODES[dtype], 0, list(sizes), order, False, 0, alloc, 0, dynamism))

    def constant(self, value: torch.Tensor) -> int:
        raw = value.detach().contiguous().reshape(-1).view(torch.uint8)
        self.constants.append(s.Buffer(bytes(raw.tolist())))
        idx = len(self.constants) - 1
        return self._add(s.Tensor(_CODES[value.dtype], 0, list(value.shape), list(range(value.dim())),
                                  False, idx, None))

    def int_(self, v: int) -> int:
        return self._add(s.Int(v))

    def double(self, v: float) -> int:
        return self._add(s.Double(v))

    def bool_(self, v: bool) -> int:
        return self._add(s.Bool(v))

    def null(self) -> int:
        return self._add(s.Null())

    def int_list(self, items: Sequence[int]) -> int:
        """An int list of new constant Int values."""
        return self.int_list_of([self.int_(i) for i in items])

    def int_list_of(self, refs: Sequence[int]) -> int:
        """An int list of existing Int values (which instructions may write)."""
        return self._add(s.IntList(list(refs)))

    def tensor_list(self, indices: Sequence[int]) -> int:
        return self._add(s.TensorList(list(indices)))

    def op(self, name: str, overload: str) -> int:
        for i, op in enumerate(self.operators):
            if (op.name, op.overload) == (name, overload):
                return i
        self.operators.append(s.Operator(name, overload))
        return len(self.operators) - 1

    def kernel(self, name: str, overload: str, *args: int) -> int:
        self.instructions.append(s.Instruction(s.KernelCall(self.op(name, overload), list(args))))
        return len(self.instructions) - 1

    def move(self, src: int, dst: int) -> None:
        self.instructions.append(s.Instruction(s.MoveCall(src, dst)))

    def jump_false(self, cond: int, dest: int) -> int:
        self.instructions.append(s.Instruction(s.JumpFalseCall(cond, dest)))
        return len(self.instructions) - 1

    def free(self, idx: int) -> None:
        self.instructions.append(s.Instruction(s.FreeCall(idx)))

    def program(self) -> s.Program:
        plan = s.ExecutionPlan(
            self.name, s.ContainerMetadata("", ""), self.values, self.inputs, self.outputs,
            [s.Chain(list(self.inputs), list(self.outputs), self.instructions)], self.operators, [],
            [0, self.arena_size])
        return s.Program(0, [plan], self.constants, [], [], s.SubsegmentOffsets(0, []))


def add_program(shape: Sequence[int] = (2, 3), dynamism=s.TensorShapeDynamism.STATIC) -> s.Program:
    """forward(x, y) = x + y, all three tensors planned."""
    b = PlanBuilder()
    nbytes = 4 * int(torch.tensor(shape).prod())
    x, y, out = (b.tensor(shape, i * nbytes, dynamism=dynamism) for i in range(3))
    b.inputs, b.outputs = [x, y], [out]
    b.kernel("aten::add", "out", x, y, b.int_(1), out, out)
    return b.program()
