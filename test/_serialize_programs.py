"""Hand-built Programs for the serializer tests: every value kind, instruction and table."""

from __future__ import annotations

import struct

from executorch.exir import schema as s


def tensor(sizes, buffer_idx=0, alloc=None, dtype=s.ScalarType.FLOAT, **kw) -> s.EValue:
    return s.EValue(
        s.Tensor(
            scalar_type=dtype,
            storage_offset=0,
            sizes=list(sizes),
            dim_order=list(range(len(sizes))),
            requires_grad=False,
            data_buffer_idx=buffer_idx,
            allocation_info=alloc,
            **kw,
        )
    )


def floats(*values: float) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def plan(name="forward", values=None, instructions=None, **kw) -> s.ExecutionPlan:
    values = values if values is not None else [tensor([2], alloc=s.AllocationDetails(0, 0))]
    fields = dict(
        name=name,
        container_meta_type=s.ContainerMetadata('[1, {"type": null}]', "[1, {}]"),
        values=values,
        inputs=[0],
        outputs=[0],
        chains=[s.Chain(inputs=[0], outputs=[0], instructions=instructions or [])],
        operators=[s.Operator("aten::add", "out")],
        delegates=[],
        non_const_buffer_sizes=[0, 64],
    )
    fields.update(kw)
    return s.ExecutionPlan(**fields)


def program(plans, constants=(), **kw) -> s.Program:
    fields = dict(
        version=0,
        execution_plan=plans,
        constant_buffer=[s.Buffer(b"")] + [s.Buffer(c) for c in constants],
        backend_delegate_data=[],
        segments=[],
        constant_segment=s.SubsegmentOffsets(0, []),
    )
    fields.update(kw)
    return s.Program(**fields)


def every_value_kind() -> list[s.EValue]:
    """One EValue of each KernelTypes member, with non-default fields."""
    return [
        s.EValue(s.Null()),
        s.EValue(s.Int(-(2**40))),
        s.EValue(s.Bool(True)),
        s.EValue(s.Double(-2.5)),
        tensor([3, 1], buffer_idx=1, dtype=s.ScalarType.FLOAT),
        s.EValue(s.String("héllo")),
        s.EValue(s.IntList([1, -2, 2**62])),
        s.EValue(s.DoubleList([0.5, -1e300])),
        s.EValue(s.BoolList([True, False, True])),
        s.EValue(s.TensorList([4, 4])),
        s.EValue(s.OptionalTensorList([4, -1])),
    ]


def every_instruction() -> list[s.Instruction]:
    return [
        s.Instruction(s.KernelCall(0, [4, 1, 2, 4])),
        s.Instruction(s.DelegateCall(0, [4, 4])),
        s.Instruction(s.MoveCall(4, 4)),
        s.Instruction(s.JumpFalseCall(2, 0)),
        s.Instruction(s.FreeCall(4)),
    ]


def rich_program() -> s.Program:
    """Two plans, all value kinds and instructions, dynamic shapes, 64-bit offsets, a delegate
    in a segment and one inline, stack traces, devices, named data and mutable segments."""
    values = every_value_kind() + [
        tensor(
            [4, 8],
            alloc=s.AllocationDetails.at(1, 5 * 2**32 + 16),
            shape_dynamism=s.TensorShapeDynamism.DYNAMIC_BOUND,
            extra_tensor_info=s.ExtraTensorInfo(
                mutable_data_segments_idx=1,
                fully_qualified_name="layer.weight",
                location=s.TensorDataLocation.EXTERNAL,
                device_type=s.DeviceType.CUDA,
                device_index=1,
            ),
        ),
        tensor([5], dtype=s.ScalarType.LONG, alloc=s.AllocationDetails(1, 64),
               shape_dynamism=s.TensorShapeDynamism.DYNAMIC_UNBOUND, layout=1),
    ]
    chain = s.Chain(
        inputs=[11],
        outputs=[12],
        instructions=every_instruction(),
        stacktrace=[
            s.FrameList([s.Frame("model.py", 12, "forward", "x = x + 1"), s.Frame("a.py", 0, "", "")]),
            s.FrameList([]),
        ],
    )
    delegates = [
        s.BackendDelegate("SegmentBackend", s.BackendDelegateDataReference(s.DataLocation.SEGMENT, 1),
                          [s.CompileSpec("level", b"\x02\x00"), s.CompileSpec("empty", b"")]),
        s.BackendDelegate("InlineBackend", s.BackendDelegateDataReference(s.DataLocation.INLINE, 0), []),
    ]
    main = plan(
        "forward",
        values=values,
        instructions=None,
        chains=[chain, s.Chain([], [], [])],
        operators=[s.Operator("aten::add", "out"), s.Operator("aten::mul", "")],
        delegates=delegates,
        inputs=[11],
        outputs=[12],
        non_const_buffer_sizes=[0, 6 * 2**32],
        non_const_buffer_device=[s.NonConstBufferDevice(1, s.DeviceType.CUDA, 0)],
    )
    other = plan("second", inputs=[], outputs=[], non_const_buffer_sizes=[0])
    return program(
        [main, other],
        constants=[floats(1, 2, 3), floats(4)],
        backend_delegate_data=[s.BackendDelegateInlineData(b"inline-blob")],
        mutable_data_segments=[s.SubsegmentOffsets(2, [0, 8])],
        named_data=[s.NamedData("weights", 3)],
        segment_data=[b"", b"delegate-payload" * 3, bytes(range(16)), b"named"],
        version=7,
    )
