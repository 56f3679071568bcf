"""`executorch.exir.tensor` (TensorSpec and layout helpers) and `executorch.exir.memory`, as upstream code
calls them."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch.export import Dim

from executorch.exir import memory
from executorch.exir.error import InternalError
from executorch.exir.schema import ScalarType, TensorShapeDynamism
from executorch.exir.tensor import (TensorSpec, check_spec, contiguous_stride_from_shape, determine_tensor_dynanism,
                                    dim_order_from_stride, get_scalar_type, make_allocation_info, make_tensor_value,
                                    num_bytes_from_shape_and_dtype, scalar_type_enum, stride_from_dim_order)


@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 4), (2, 0, 3), (1, 3, 1, 1)])
def test_contiguous_strides_match_torch(shape):
    assert contiguous_stride_from_shape(shape) == torch.empty(shape).stride()


@pytest.mark.parametrize("perm", list(itertools.permutations(range(4))))
def test_dim_order_and_strides_invert_each_other_as_torch_lays_out(perm):
    sizes = [2, 3, 4, 5]
    t = torch.empty([sizes[d] for d in perm]).permute([perm.index(d) for d in range(4)])  # dense in `perm` order
    assert dim_order_from_stride(t.stride()) == perm
    assert stride_from_dim_order(list(t.shape), list(perm)) == list(t.stride())


def test_broadcast_strides_have_no_dim_order():
    with pytest.raises(ValueError, match="0"):
        dim_order_from_stride(torch.zeros(3).expand(2, 3).stride())


def test_spec_from_a_channels_last_tensor():
    t = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    spec = TensorSpec.from_tensor(t)
    assert spec.dim_order == (0, 2, 3, 1) and spec.stride == t.stride()
    assert spec.nbytes() == 2 * 3 * 4 * 5 * 4 == num_bytes_from_shape_and_dtype(t.shape, t.dtype)
    assert spec.allocated_memory % 16 == 0 and spec.allocated_memory >= spec.nbytes()
    assert spec.realign(64) % 64 == 0
    assert spec.is_static_shape_tensor and spec.lifetime == [None, None] and spec.storage is None
    check_spec(t, spec)
    with pytest.raises(InternalError, match="dtype"):
        check_spec(t.double(), spec)


def test_constant_spec_keeps_only_its_own_bytes():
    big = torch.arange(100, dtype=torch.float32)
    spec = TensorSpec.from_tensor(big[10:20], const=True)
    assert spec.storage.nbytes() == 40


def test_tensor_value_and_allocation_info():
    spec = TensorSpec(torch.int64, [3, 4])
    info = make_allocation_info(1, 2**33 + 48)
    assert info.memory_offset == 2**33 + 48 and info.memory_offset_high == 2
    value = make_tensor_value(0, info, spec)
    assert value.scalar_type == ScalarType.LONG and value.sizes == [3, 4] and value.dim_order == [0, 1]
    assert value.allocation_info is info
    with pytest.raises(ValueError):
        make_allocation_info(1, -1)
    const = TensorSpec(torch.float32, [2], const=True)
    with pytest.raises(InternalError):
        make_tensor_value(1, info, const)


def test_scalar_type_enum_follows_the_dtype_table():
    assert scalar_type_enum(torch.float32) == ScalarType.FLOAT
    assert get_scalar_type(ScalarType.BFLOAT16) is torch.bfloat16
    with pytest.raises(KeyError):
        scalar_type_enum(torch.complex64)


@pytest.mark.parametrize("dim, expected", [(Dim("n", max=16), TensorShapeDynamism.DYNAMIC_BOUND),
                                           (Dim("n"), TensorShapeDynamism.DYNAMIC_UNBOUND)])
def test_dynamism_of_exported_shapes(dim, expected):
    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    ep = torch.export.export(Double(), (torch.ones(4, 3),), dynamic_shapes={"x": {0: dim}})
    x = next(n for n in ep.graph.nodes if n.op == "placeholder").meta["val"]
    assert determine_tensor_dynanism(x.shape) == expected
    assert TensorSpec(x.dtype, x.shape).shape_dynamism == expected
    assert determine_tensor_dynanism((4, 3)) == TensorShapeDynamism.STATIC


def test_memory_alloc_and_view():
    t = memory.alloc(((2, 3), torch.float16))
    assert t.shape == (2, 3) and t.dtype == torch.float16
    pair = memory.alloc([((1,), torch.int32), ((4, 4), torch.float32)])
    assert [p.shape for p in pair] == [(1,), (4, 4)]
    base = torch.arange(6.0)
    v = memory.view(base, [2, 3])
    v[1, 2] = -1.0
    assert base[5] == -1.0  # shares memory
    assert memory.free(TensorSpec.from_tensor(base)) is None
