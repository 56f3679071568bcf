"""`TensorSpec` and tensor-metadata helpers: a graph value's dtype, shape, layout and memory plan."""

from __future__ import annotations

import math
from typing import Optional, Sequence

import torch
from torch import fx
from torch.export.graph_signature import OutputKind

from executorch.exir import _dtypes
from executorch.exir import schema
from executorch.exir.error import internal_assert
from executorch.exir.schema import ScalarType, TensorShapeDynamism

ALIGNMENT = 16
_MAX_SIZE = 2**31 - 1  # a .pte size is an int32


def num_bytes_from_shape_and_dtype(shape: Sequence[int], dtype: torch.dtype) -> int:
    """Bytes of a dense tensor of this shape and dtype."""
    return math.prod(shape) * dtype.itemsize


def contiguous_stride_from_shape(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides; a size-0 dimension counts as 1, as torch computes them."""
    strides: list[int] = []
    step = 1
    for size in reversed(list(shape)):
        strides.append(step)
        # comparing an unbacked SymInt with 0 would guard on it, so only ints are checked
        step *= size if not isinstance(size, int) or size != 0 else 1
    return tuple(reversed(strides))


def dim_order_from_stride(stride: Sequence[int]) -> tuple[int, ...]:
    """Dimensions from outermost (largest stride) to innermost; equal strides keep their order."""
    if any(s == 0 for s in stride):
        raise ValueError(f"stride {tuple(stride)} has a 0 (a broadcast view); make the tensor contiguous first")
    return tuple(sorted(range(len(stride)), key=lambda d: -stride[d]))


def stride_from_dim_order(sizes: Sequence[int], dim_order: Sequence[int]) -> list[int]:
    """The strides of a dense tensor of `sizes` laid out in `dim_order`."""
    strides = [0] * len(sizes)
    step = 1
    for d in reversed(list(dim_order)):
        strides[d] = step
        step *= sizes[d] if sizes[d] != 0 else 1
    return strides


def calculate_aligned_num_bytes(num: int, alignment: int) -> int:
    return (num + alignment - 1) // alignment * alignment


def shape_upper_bound(s) -> Optional[int]:
    """The largest value a size can take under the export constraints (an int is its own bound),
    or None when it has no bound a program can plan memory for."""
    if isinstance(s, int):
        return s
    try:
        upper = int(s.node.shape_env.bound_sympy(s.node.expr).upper)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return None  # sympy's or torch's infinity
    return upper if upper <= _MAX_SIZE else None


def determine_tensor_dynanism(shape: Sequence) -> TensorShapeDynamism:
    """STATIC for int sizes; DYNAMIC_BOUND when every symbolic size has an upper bound a program
    can plan memory for (as the emitter requires), else DYNAMIC_UNBOUND. (The spelling is ExecuTorch's.)"""
    if all(isinstance(s, int) for s in shape):
        return TensorShapeDynamism.STATIC
    if any(shape_upper_bound(s) is None for s in shape):
        return TensorShapeDynamism.DYNAMIC_UNBOUND
    return TensorShapeDynamism.DYNAMIC_BOUND


class TensorSpec:
    """A graph value's metadata, and the memory plan's fields for it (`lifetime`, `mem_id`,
    `mem_offset`, unset until memory is planned)."""

    def __init__(self, dtype: torch.dtype, shape: Sequence, layout: torch.layout = torch.strided,
                 is_sparse: bool = False, const: bool = False, requires_grad: bool = False) -> None:
        self.scalar_type = dtype
        self.shape: list = list(shape)
        self.layout = layout
        self.is_sparse = is_sparse
        self.const = const
        self.requires_grad = requires_grad
        self.alignment = ALIGNMENT
        self.storage: Optional[torch.UntypedStorage] = None
        self.stride: tuple = contiguous_stride_from_shape(self.shape)
        self.dim_order: tuple = dim_order_from_stride(self.stride)
        self.shape_dynamism = determine_tensor_dynanism(self.shape)
        self.init_mem_planning_fields()

    def init_mem_planning_fields(self) -> None:
        self.lifetime: list = [None, None]
        self.mem_id: Optional[int] = None
        self.mem_obj_id: Optional[int] = None
        self.mem_offset: Optional[int] = None

    @classmethod
    def from_tensor(cls, tensor: torch.Tensor, const: bool = False) -> "TensorSpec":
        """The spec of `tensor`; a constant's spec holds its (dense) storage."""
        if const:
            tensor = tensor.contiguous()
            if tensor.nbytes != tensor.untyped_storage().nbytes():
                tensor = tensor.clone()  # a view of a larger storage: keep only its own bytes
        spec = cls(tensor.dtype, tensor.shape, tensor.layout, tensor.is_sparse, const, tensor.requires_grad)
        spec.stride = tuple(tensor.stride())
        spec.dim_order = dim_order_from_stride(spec.stride)
        spec.storage = tensor.untyped_storage() if const else None
        return spec

    @property
    def dtype(self) -> torch.dtype:
        return self.scalar_type

    def nbytes(self) -> int:
        return num_bytes_from_shape_and_dtype(self.shape, self.dtype)

    @property
    def allocated_memory(self) -> int:
        return calculate_aligned_num_bytes(self.nbytes(), self.alignment)

    def realign(self, new_alignment: int) -> int:
        self.alignment = new_alignment
        return self.allocated_memory

    @property
    def is_static_shape_tensor(self) -> bool:
        return self.shape_dynamism == TensorShapeDynamism.STATIC

    @property
    def is_dynamic_shape_tensor(self) -> bool:
        return self.shape_dynamism != TensorShapeDynamism.STATIC

    @property
    def is_upper_bound_tensor(self) -> bool:
        return self.shape_dynamism == TensorShapeDynamism.DYNAMIC_BOUND

    @property
    def is_dynamic_unbound_tensor(self) -> bool:
        return self.shape_dynamism == TensorShapeDynamism.DYNAMIC_UNBOUND

    def __repr__(self) -> str:
        return (f"TensorSpec(dtype={self.dtype}, shape={self.shape}, layout={self.layout}, "
                f"is_sparse={self.is_sparse}, shape_dynamism={self.shape_dynamism}, const={self.const}, "
                f"requires_grad={self.requires_grad})")


def scalar_type_enum(dtype: torch.dtype) -> ScalarType:
    """The ScalarType of a torch dtype that programs may hold."""
    internal_assert(isinstance(dtype, torch.dtype), f"{dtype!r} is not a torch.dtype")
    return _dtypes.scalar_type(dtype)


def get_scalar_type(enum: ScalarType) -> torch.dtype:
    """The torch dtype of a ScalarType."""
    dtype = _dtypes.to_torch(enum)
    if dtype is None:
        raise KeyError(enum)
    return dtype


def memory_format_enum(memory_format: torch.memory_format) -> int:
    """The program's code for a memory format (c10::MemoryFormat's numbering)."""
    internal_assert(isinstance(memory_format, torch.memory_format), f"{memory_format!r} is not a torch.memory_format")
    return {torch.contiguous_format: 0, torch.preserve_format: 1}[memory_format]


def layout_enum(layout: torch.layout) -> int:
    return {torch.strided: 0, torch.sparse_coo: 1}[layout]


def make_allocation_info(mem_id: int, mem_offset: int) -> schema.AllocationDetails:
    """Where a planned tensor lives: arena `mem_id`, byte `mem_offset` (split into two u32 halves)."""
    if not 0 <= mem_offset < 1 << 64:
        raise ValueError(f"mem_offset {mem_offset} must be in [0, 2**64)")
    return schema.AllocationDetails.at(mem_id, mem_offset)


def make_tensor_value(constant_buffer_idx: int, allocation_info: Optional[schema.AllocationDetails],
                      spec: TensorSpec) -> schema.Tensor:
    """The program's Tensor for `spec`: constant data at `constant_buffer_idx`, or planned memory."""
    internal_assert(not (spec.const and allocation_info), "a constant tensor gets no planned memory")
    return schema.Tensor(
        scalar_type=scalar_type_enum(spec.dtype),
        storage_offset=0,
        sizes=list(spec.shape),
        dim_order=list(spec.dim_order),
        requires_grad=spec.requires_grad,
        data_buffer_idx=constant_buffer_idx,
        allocation_info=allocation_info,
        layout=layout_enum(spec.layout),
        shape_dynamism=spec.shape_dynamism,
    )


def check_spec(tensor: torch.Tensor, spec: TensorSpec) -> None:
    """InternalError unless `tensor` matches `spec` in sparsity, shape and dtype."""
    for name, got, want in (("is_sparse", tensor.is_sparse, spec.is_sparse), ("shape", list(tensor.shape), spec.shape),
                            ("dtype", tensor.dtype, spec.dtype)):
        internal_assert(got == want, f"tensor {name} is {got}, its spec says {want}")


def is_alias(node: fx.Node) -> bool:
    """Whether the plan keeps `node`'s value in its first argument's storage: a view needing no instruction."""
    base = node.args[0] if node.args else None
    spec, of = node.meta.get("spec"), base.meta.get("spec") if isinstance(base, fx.Node) else None
    return (isinstance(spec, TensorSpec) and isinstance(of, TensorSpec) and spec is not of
            and spec.mem_obj_id is not None and spec.mem_obj_id == of.mem_obj_id)


def user_outputs(gm: fx.GraphModule, signature) -> list[fx.Node]:
    """The nodes a method returns to its caller (not the write-backs of what it mutates)."""
    args = gm.graph.output_node().args[0]
    args = args if isinstance(args, (list, tuple)) else [args]
    if signature is not None:
        args = [a for a, s in zip(args, signature.output_specs) if s.kind == OutputKind.USER_OUTPUT]
    return [a for a in args if isinstance(a, fx.Node)]
