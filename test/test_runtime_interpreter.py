"""The pure-Python interpreter on hand-built programs: control flow, memory plan, primitives, errors."""

from __future__ import annotations

import warnings

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close
from executorch.exir import schema as s
from executorch.exir._serialize import serialize_pte_binary
from executorch.exir.error import SerializeError
from executorch.runtime import ExecuTorchError, InvalidProgramError, Program
from executorch.runtime import _python as python_backend
from executorch.runtime._python import PythonProgram

from runtime_programs import PlanBuilder, add_program  # noqa: E402

BOUND = s.TensorShapeDynamism.DYNAMIC_BOUND
UNBOUND = s.TensorShapeDynamism.DYNAMIC_UNBOUND


def _load(program: s.Program, method: str = "forward"):
    """Serialized, then loaded through the public classes on the Python backend (whatever is active)."""
    data = serialize_pte_binary(program)
    return Program(python_backend.load_program(data), data).load_method(method)


def test_planned_tensors_sharing_an_offset_are_aliases():
    b = PlanBuilder()
    x = b.tensor([2, 3], 0)
    y = b.tensor([2, 3], 64)
    alias = b.tensor([2, 3], 64)  # never written by an instruction; it sees y's bytes
    out = b.tensor([2, 3], 128)
    b.inputs, b.outputs = [x], [out]
    b.kernel("aten::add", "Scalar_out", x, b.double(1.0), b.int_(1), y, y)
    b.kernel("aten::relu", "out", alias, out, out)
    x_val = torch.randn(2, 3)
    (got,) = _load(b.program()).execute([x_val])
    assert torch.equal(got, torch.relu(x_val + 1))


def test_intermediates_live_in_the_arena_and_outputs_do_not():
    b = PlanBuilder(arena_size=96)
    x, mid, out = b.tensor([2, 3], 0), b.tensor([2, 3], 32), b.tensor([2, 3], 64)
    b.inputs, b.outputs = [x], [out]
    b.kernel("aten::neg", "out", x, mid, mid)
    b.kernel("aten::mul", "out", mid, mid, out, out)
    method = PythonProgram(b.program()).load_method("forward")
    arena = method._values.arenas[1]
    (first,) = method.execute([torch.full((2, 3), 3.0)])
    assert bytes(arena[32:56]) == bytes(torch.full((6,), -3.0).view(torch.uint8).tolist())
    (second,) = method.execute([torch.full((2, 3), 2.0)])
    assert torch.equal(first, torch.full((2, 3), 9.0)) and torch.equal(second, torch.full((2, 3), 4.0))


def test_move_rebinds_the_destination():
    b = PlanBuilder()
    x, y = b.tensor([3], 0), b.tensor([3], 16)
    total = b.tensor([3], 32)
    moved = b.tensor([3], None)
    out = b.tensor([3], 48)
    b.inputs, b.outputs = [x, y], [out, moved]
    b.kernel("aten::add", "out", x, y, b.int_(1), total, total)
    b.move(total, moved)
    b.kernel("aten::mul", "Scalar_out", moved, b.double(2.0), out, out)
    xv, yv = torch.tensor([1.0, 2, 3]), torch.tensor([10.0, 20, 30])
    got = _load(b.program()).execute([xv, yv])
    assert torch.equal(got[0], (xv + yv) * 2) and torch.equal(got[1], xv + yv)


def _counting_loop(cond_as_tensor: bool) -> s.Program:
    """acc = x; repeat n times: acc += 1 (n fixed at 3), with prim ops and JumpFalse."""
    b = PlanBuilder()
    x, acc = b.tensor([2], 0), b.tensor([2], 16)
    zero, one, limit = b.int_(0), b.int_(1), b.int_(3)
    counter, cond, never = b.int_(0), b.bool_(False), b.bool_(False)
    b.inputs, b.outputs = [x], [acc, counter]
    b.kernel("aten::clone", "out", x, b.null(), acc, acc)
    b.kernel("executorch_prim::sym_int", "Scalar", zero, counter)
    loop = b.kernel("aten::add", "Scalar_out", acc, b.double(1.0), one, acc, acc)
    b.kernel("executorch_prim::add", "Scalar", counter, one, counter)
    b.kernel("executorch_prim::lt", "Scalar", counter, limit, cond)
    if cond_as_tensor:
        flag = b.tensor([1], 32, dtype=torch.bool)
        b.kernel("aten::scalar_tensor", "out", cond, flag, flag)
        cond = flag
    exit_jump = b.jump_false(cond, 0)
    b.jump_false(never, loop)
    b.instructions[exit_jump].instr_args.destination_instruction = len(b.instructions)
    return b.program()


@pytest.mark.parametrize("cond_as_tensor", [False, True])
def test_jump_false_loops_and_values_written_at_run_time(cond_as_tensor):
    method = _load(_counting_loop(cond_as_tensor))
    for _ in range(2):  # state written by the loop is reset by the program itself
        acc, count = method.execute([torch.tensor([1.0, -1.0])])
        assert torch.equal(acc, torch.tensor([4.0, 2.0])) and count == 3 and type(count) is int


def test_a_loop_that_never_ends_is_stopped(monkeypatch):
    from executorch.runtime._python import _method

    b = PlanBuilder()
    x, out = b.tensor([1], 0), b.tensor([1], 16)
    b.inputs, b.outputs = [x], [out]
    b.jump_false(b.bool_(False), 0)
    monkeypatch.setattr(_method, "MAX_INSTRUCTIONS", 1000)
    with pytest.raises(ExecuTorchError, match="loops forever"):
        _load(b.program()).execute([torch.zeros(1)])


def test_free_releases_only_memory_the_tensor_owns():
    b = PlanBuilder()
    x = b.tensor([4], 0)
    scratch = b.tensor([4], None, dynamism=UNBOUND)
    planned = b.tensor([4], 16)
    out = b.tensor([4], 32)
    b.inputs, b.outputs = [x], [out]
    b.kernel("aten::exp", "out", x, scratch, scratch)
    b.kernel("aten::neg", "out", scratch, planned, planned)
    b.free(scratch)
    b.free(planned)
    b.kernel("aten::add", "out", planned, x, b.int_(1), out, out)
    method = PythonProgram(b.program()).load_method("forward")
    for value in (torch.arange(4.0), torch.ones(4)):
        (got,) = method.execute([value])
        assert_outputs_close(got, value - value.exp())
    assert method._objs[scratch].numel() == 0 and method._objs[planned].numel() == 4


def test_non_tensor_inputs_are_fixed_and_outputs_are_python_scalars():
    b = PlanBuilder()
    x, out = b.tensor([2], 0), b.tensor([2], 16)
    n, scale, flag = b.int_(3), b.double(0.5), b.bool_(True)
    b.inputs, b.outputs = [x, n, scale, flag], [out, n, scale, flag]
    b.kernel("aten::mul", "Scalar_out", x, n, out, out)
    method = _load(b.program())
    got = method.execute([torch.ones(2), 3, 0.5, True])
    assert torch.equal(got[0], torch.full((2,), 3.0)) and got[1:] == [3, 0.5, True]
    assert [type(v) for v in got[1:]] == [int, float, bool]
    with pytest.raises(ExecuTorchError, match=r"input 1 .* fixed to 3 when the program was exported, got 4"):
        method.execute([torch.ones(2), 4, 0.5, True])
    with pytest.raises(ExecuTorchError, match=r"input 3 .* fixed to True"):
        method.execute([torch.ones(2), 3, 0.5, 1])
    meta = method.metadata
    assert meta.num_inputs() == 4 and meta.input_tensor_meta(0).sizes() == (2,)
    with pytest.raises(ValueError, match="not a tensor"):
        meta.input_tensor_meta(1)


def test_sym_size_and_et_view_follow_the_input_shape():
    b = PlanBuilder()
    x = b.tensor([4, 6], 0, dynamism=BOUND)
    rows = b.int_(0)
    flat_len = b.int_(0)
    viewed = b.tensor([24], None, dynamism=BOUND)
    out = b.tensor([24], 128, dynamism=BOUND)
    b.inputs, b.outputs = [x], [out, rows]
    b.kernel("aten::sym_size", "int", x, b.int_(0), rows)
    b.kernel("executorch_prim::mul", "Scalar", rows, b.int_(6), flat_len)
    size = b.int_list_of([flat_len])
    b.kernel("executorch_prim::et_view", "default", x, size, viewed)
    b.kernel("aten::mul", "Scalar_out", viewed, b.double(2.0), out, out)
    method = _load(b.program())
    for n in (4, 2, 1, 3):
        xv = torch.randn(n, 6)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # resizing within the plan is silent
            got, got_rows = method.execute([xv])
        assert got_rows == n and torch.equal(got, (xv * 2).reshape(-1))


def test_an_op_growing_a_tensor_past_its_plan_fails_cleanly():
    b = PlanBuilder()
    x = b.tensor([4], 0, dynamism=BOUND)
    out = b.tensor([4], 16, dynamism=BOUND)
    b.inputs, b.outputs = [x], [out]
    b.kernel("aten::cat", "out", b.tensor_list([x, x]), b.int_(0), out, out)
    method = _load(b.program())
    assert torch.equal(method.execute([torch.tensor([1.0, 2.0])])[0], torch.tensor([1.0, 2, 1, 2]))
    with pytest.raises(ExecuTorchError, match=r"instruction 0 of chain 0 \(aten::cat.out\) failed"):
        method.execute([torch.ones(3)])


def test_dim_order_ops_write_the_planned_layout():
    b = PlanBuilder()
    x = b.tensor([1, 2, 3, 3], 0)
    nhwc = b.tensor([1, 2, 3, 3], 128, dim_order=[0, 2, 3, 1])
    back = b.tensor([1, 2, 3, 3], 256, dtype=torch.float64)
    b.inputs, b.outputs = [x], [nhwc, back]
    b.kernel("dim_order_ops::_clone_dim_order", "out", x, b.bool_(False), b.int_list([0, 2, 3, 1]), nhwc, nhwc)
    b.kernel("dim_order_ops::_to_dim_order_copy", "out", nhwc, b.bool_(False), b.int_list([0, 1, 2, 3]), back, back)
    xv = torch.randn(1, 2, 3, 3)
    got_nhwc, got_back = _load(b.program()).execute([xv])
    assert got_nhwc.is_contiguous(memory_format=torch.channels_last) and not got_nhwc.is_contiguous()
    assert torch.equal(got_nhwc, xv) and got_back.dtype == torch.float64 and torch.equal(got_back, xv.double())


def test_multi_output_op_gets_its_outs_then_a_list():
    b = PlanBuilder(arena_size=8192)
    x = b.tensor([1, 2, 4, 4], 0)
    weight, bias = b.constant(torch.tensor([2.0, 3.0])), b.constant(torch.tensor([0.5, -0.5]))
    mean, var = b.constant(torch.tensor([1.0, -1.0])), b.constant(torch.tensor([4.0, 0.25]))
    out, save_mean, save_var = b.tensor([1, 2, 4, 4], 256), b.tensor([0], 1024), b.tensor([0], 1024)
    b.inputs, b.outputs = [x], [out]
    b.kernel("aten::_native_batch_norm_legit_no_training", "out", x, weight, bias, mean, var, b.double(0.1),
             b.double(1e-5), out, save_mean, save_var, b.tensor_list([out, save_mean, save_var]))
    xv = torch.randn(1, 2, 4, 4)
    (got,) = _load(b.program()).execute([xv])
    want = torch.nn.functional.batch_norm(xv, torch.tensor([1.0, -1.0]), torch.tensor([4.0, 0.25]),
                                          torch.tensor([2.0, 3.0]), torch.tensor([0.5, -0.5]), eps=1e-5)
    assert_outputs_close(got, want)


def test_mutable_state_starts_from_the_file_and_persists():
    b = PlanBuilder()
    x, state = b.tensor([3], 0), b.tensor([3], 16)
    b.values[state].val.data_buffer_idx = 1
    b.inputs, b.outputs = [x], [state]
    b.kernel("aten::add", "out", state, x, b.int_(1), state, state)
    program = b.program()
    program.mutable_data_segments = [s.SubsegmentOffsets(0, [0, 0])]
    program.segment_data = [bytes(torch.tensor([1.0, 2.0, 3.0]).view(torch.uint8).tolist())]
    method = PythonProgram(program).load_method("forward")
    assert torch.equal(method.execute([torch.ones(3)])[0], torch.tensor([2.0, 3.0, 4.0]))
    assert torch.equal(method.execute([torch.ones(3)])[0], torch.tensor([3.0, 4.0, 5.0]))


def test_unknown_operator_is_named_at_load():
    b = PlanBuilder()
    x, out = b.tensor([2], 0), b.tensor([2], 16)
    b.inputs, b.outputs = [x], [out]
    b.kernel("aten::no_such_op", "out", x, out, out)
    with pytest.raises(ExecuTorchError, match=r"operator aten::no_such_op.out is not available"):
        _load(b.program())
    b.operators[0] = s.Operator("my_vendor::fused_thing", "default")
    with pytest.raises(ExecuTorchError, match=r"my_vendor::fused_thing.default is not available"):
        _load(b.program())


def test_kernel_failure_names_instruction_and_operator():
    b = PlanBuilder()
    x, y, out = b.tensor([2, 3], 0), b.tensor([2, 3], 32), b.tensor([2, 2], 64)
    b.inputs, b.outputs = [x, y], [out]
    b.kernel("aten::mm", "out", x, y, out, out)
    with pytest.raises(ExecuTorchError, match=r"instruction 0 of chain 0 \(aten::mm.out\) failed: .*"):
        _load(b.program()).execute([torch.ones(2, 3), torch.ones(2, 3)])


def _corrupt(mutate) -> s.Program:
    program = add_program()
    mutate(program.execution_plan[0])
    return program


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda p: setattr(p.chains[0].instructions[0].instr_args, "args", [0, 1, 99, 2, 2]), r"refers to value 99"),
        (lambda p: setattr(p.chains[0].instructions[0].instr_args, "args", [0, 1, 2, 2]), r"passes 4 arguments"),
        (lambda p: setattr(p.chains[0].instructions[0].instr_args, "op_index", 5), r"uses operator 5"),
        (lambda p: setattr(p.values[0].val, "allocation_info", s.AllocationDetails.at(1, 4090)),
         r"needs bytes 4090\.\."),
        (lambda p: setattr(p.values[0].val, "allocation_info", s.AllocationDetails.at(7, 0)), r"arena 7"),
        (lambda p: setattr(p.values[0].val, "dim_order", [1, 1]), r"not a permutation"),
        (lambda p: setattr(p.values[0].val, "data_buffer_idx", 9) or setattr(p.values[0].val, "allocation_info", None),
         r"constant buffer 9"),
        (lambda p: p.inputs.append(50), r"value 50"),
    ],
)
def test_inconsistent_programs_are_rejected_at_load(mutate, message):
    program = _corrupt(mutate)
    with pytest.raises(InvalidProgramError, match=message) as info:
        PythonProgram(program).load_method("forward")
    assert isinstance(info.value, SerializeError)


def test_a_delegate_of_an_unregistered_backend_is_refused_with_its_name():
    program = add_program()
    plan = program.execution_plan[0]
    plan.delegates = [s.BackendDelegate("NoSuchBackend", s.BackendDelegateDataReference(s.DataLocation.INLINE, 0), [])]
    program.backend_delegate_data = [s.BackendDelegateInlineData(b"blob")]
    plan.chains[0].instructions.insert(0, s.Instruction(s.DelegateCall(0, [0, 1, 2])))
    with pytest.raises(ExecuTorchError,
                       match=r"backend .NoSuchBackend. \(delegate 0\), which is not registered in the Python runtime"):
        _load(program)


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("floordiv.Scalar", (-7, 2), -4), ("floordiv.int", (-7, 2), -3), ("mod.int", (-7, 2), -1),
        ("truediv.Scalar", (7, 2), 3.5), ("sym_max.Scalar", (3, 9), 9), ("sym_min.Scalar", (3, 9), 3),
        ("ceil.Scalar", (2.1,), 3), ("round.Scalar", (2.5,), 2), ("trunc.Scalar", (-2.7,), -2),
        ("sym_float.Scalar", (4,), 4.0), ("eq.Scalar", (2, 2), True), ("neg.Scalar", (5,), -5),
        ("sym_ite.Scalar", (False, 1, 2), 2), ("sub.Scalar", (1.5, 2), -0.5),
    ],
)
def test_prim_scalar_ops(name, args, expected):
    b = PlanBuilder()
    x = b.tensor([1], 0)
    refs = []
    for a in args:
        refs.append(b.bool_(a) if isinstance(a, bool) else b.int_(a) if isinstance(a, int) else b.double(a))
    result = b.int_(0)
    b.inputs, b.outputs = [x], [result]
    base, overload = name.split(".")
    b.kernel(f"executorch_prim::{base}", overload, *refs, result)
    (got,) = PythonProgram(b.program()).load_method("forward").execute([torch.zeros(1)])
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(("name", "overload", "extra"),
                         [("aten::neg", "out", ()), ("aten::copy_", "default", (False,))])
def test_instructions_may_not_write_into_constants(name, overload, extra):
    b = PlanBuilder()
    x, out = b.tensor([2], 0), b.tensor([2], 16)
    weight = b.constant(torch.tensor([1.0, 2.0]))
    b.inputs, b.outputs = [x], [out]
    if extra:  # copy_(self=weight, src=x, non_blocking) -> self
        b.kernel(name, overload, weight, x, b.bool_(extra[0]), weight)
    else:
        b.kernel(name, overload, x, weight, weight)
    with pytest.raises(InvalidProgramError,
                       match=rf"instruction 0 .*{name}.* writes into constant tensor value {weight}"):
        _load(b.program())


def test_concurrent_calls_on_one_method_do_not_mix_their_data():
    import threading

    b = PlanBuilder(arena_size=1 << 16)
    x, mid, out = b.tensor([64, 64], 0), b.tensor([64, 64], 16384), b.tensor([64, 64], 32768)
    b.inputs, b.outputs = [x], [out]
    b.kernel("aten::mul", "Scalar_out", x, b.double(2.0), mid, mid)
    b.kernel("aten::add", "Scalar_out", mid, b.double(1.0), b.int_(1), out, out)
    method = _load(b.program())
    failures = []

    def worker(value: float) -> None:
        for _ in range(50):
            (got,) = method.execute([torch.full((64, 64), value)])
            if not torch.equal(got, torch.full((64, 64), 2 * value + 1)):
                failures.append(value)

    threads = [threading.Thread(target=worker, args=(float(v),)) for v in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_unplanned_and_unbounded_tensors_get_their_own_memory():
    b = PlanBuilder()
    x = b.tensor([2, 3], None, dynamism=UNBOUND)  # an input the plan left to the runtime
    out = b.tensor([2, 3], None, dynamism=UNBOUND)
    b.inputs, b.outputs = [x], [out]
    b.kernel("aten::exp", "out", x, out, out)
    method = _load(b.program())
    meta = method.metadata.input_tensor_meta(0)
    assert meta.is_memory_planned() is False and meta.shape_dynamism() == 2
    for shape in [(2, 3), (7, 5), (1, 1)]:
        xv = torch.randn(shape)
        (got,) = method.execute([xv])
        assert torch.equal(got, xv.exp())
    with pytest.raises(ExecuTorchError, match="must have 2 dimensions"):
        method.execute([torch.randn(3)])


def test_dynamic_out_tensor_that_is_also_read_keeps_its_shape():
    b = PlanBuilder()
    x = b.tensor([8], 0, dynamism=BOUND)
    acc = b.tensor([8], 32, dynamism=BOUND)
    b.inputs, b.outputs = [x], [acc]
    b.kernel("aten::mul", "Scalar_out", x, b.double(3.0), acc, acc)
    b.kernel("aten::add", "out", acc, x, b.int_(1), acc, acc)  # reads and writes acc
    method = _load(b.program())
    for n in (8, 3):
        xv = torch.randn(n)
        assert_outputs_close(method.execute([xv])[0], 4 * xv)


def test_constants_are_read_in_place_from_the_file_bytes():
    from executorch.exir._serialize import read_program

    b = PlanBuilder()
    x, out = b.tensor([256], 0), b.tensor([256], 1024)
    weight = b.constant(torch.arange(256.0))
    b.inputs, b.outputs = [x], [out]
    b.kernel("aten::mul", "out", x, weight, out, out)
    data = serialize_pte_binary(b.program())
    method = PythonProgram(read_program(data)).load_method("forward")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the bytes are read-only; only their address is used
        base = torch.frombuffer(data, dtype=torch.uint8).data_ptr()
    assert base <= method._objs[weight].data_ptr() < base + len(data)
    assert torch.equal(method.execute([torch.ones(256)])[0], torch.arange(256.0))


def test_bounded_inputs_are_checked_dimension_by_dimension():
    b = PlanBuilder()
    x = b.tensor([4, 6], 0, dynamism=BOUND)
    out = b.tensor([4, 6], 128, dynamism=BOUND)
    b.inputs, b.outputs = [x], [out]
    b.kernel("aten::neg", "out", x, out, out)
    method = _load(b.program())
    xv = torch.randn(2, 6)
    assert torch.equal(method.execute([xv])[0], -xv)
    with pytest.raises(ExecuTorchError, match=r"shape \[8, 3\], past its upper bound \[4, 6\] in dim 0"):
        method.execute([torch.randn(8, 3)])  # fewer elements than the bound, but dim 0 is past it


def test_misaligned_constant_data_is_copied_and_reads_right():
    b = PlanBuilder()
    x, out = b.tensor([3], 0), b.tensor([3], 16)
    weight = b.constant(torch.tensor([1.5, -2.0, 4.0]))
    b.inputs, b.outputs = [x], [out]
    b.kernel("aten::add", "out", x, weight, b.int_(1), out, out)
    program = b.program()
    raw = bytes(program.constant_buffer[1].storage)
    program.constant_buffer[1] = s.Buffer(memoryview(b"\x00" + raw)[1:])  # one byte off alignment
    method = PythonProgram(program).load_method("forward")
    assert method._objs[weight].data_ptr() % 4 == 0
    assert torch.equal(method.execute([torch.zeros(3)])[0], torch.tensor([1.5, -2.0, 4.0]))
