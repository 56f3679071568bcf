"""The operators upstream's portable kernel library has beyond the common ones (issue 36), one test per family:
each one-operator model (test/portable_op_models.py), written by this package's exporter and by the published
one, holds the operator and runs on both engines like eager torch; this package's files also run on the published
runtime. Random operators are checked by shape, range and statistics."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close
from executorch.exir import schema
from executorch.exir._serialize._program import read_program, serialize_pte_binary

from conftest import project_runtimes, published_env  # noqa: E402
from portable_op_models import CASES, CASES_BY_NAME, FAMILIES, OneOp, PortableOpCase, export  # noqa: E402

RUNTIMES = project_runtimes()
ENGINES = sorted(RUNTIMES)


def _ops(pte: bytes) -> list[str]:
    return [f"{o.name}.{o.overload}" for o in read_program(pte).execution_plan[0].operators]


def _legit_training(pte: bytes) -> bytes:
    """A no-training batch norm program rewritten to call _native_batch_norm_legit.out with training=True:
    no exporter writes that operator (to_edge keeps only its functional form), but programs may name it.
    Its saved mean and invstd grow from 0 to C elements, placed after the planned memory."""
    program = read_program(pte)
    plan = program.execution_plan[0]
    (index,) = [i for i, o in enumerate(plan.operators) if o.name == "aten::_native_batch_norm_legit_no_training"]
    plan.operators[index] = schema.Operator("aten::_native_batch_norm_legit", "out")
    plan.values.append(schema.EValue(schema.Bool(True)))
    for chain in plan.chains:
        for ins in chain.instructions:
            call = ins.instr_args
            if isinstance(call, schema.KernelCall) and call.op_index == index:
                call.args.insert(5, len(plan.values) - 1)
                channels = plan.values[call.args[0]].val.sizes[1]
                for pos in (9, 10):  # save_mean, save_invstd
                    t = plan.values[call.args[pos]].val
                    t.sizes = [channels]
                    mem = t.allocation_info.memory_id
                    start = (plan.non_const_buffer_sizes[mem] + 63) // 64 * 64
                    t.allocation_info = schema.AllocationDetails(mem, start, 0)
                    plan.non_const_buffer_sizes[mem] = start + 4 * channels
    return serialize_pte_binary(program)


def _expected(case, inputs):
    with torch.no_grad():
        if case.check == "rewrite":
            x, w, b, rm, rv = inputs
            return torch.ops.aten._native_batch_norm_legit.default(x, w, b, rm.clone(), rv.clone(), True, 0.1, 1e-5)
        return OneOp(case.fn)(*inputs)


def _check(case, outputs, inputs) -> None:
    expected = _expected(case, inputs)
    if case.check == "shape":
        assert [tuple(o.shape) for o in outputs] == [tuple(expected.shape)]
        assert outputs[0].dtype == expected.dtype
    elif case.check == "random":
        _check_random(case, outputs, inputs)
    else:
        assert_outputs_close(outputs, expected)


def _check_random(case, outputs, inputs) -> None:
    if case.name in ("rand", "randn"):
        (out,) = outputs
        assert out.shape == (64, 128) and out.dtype == torch.float32
        assert out.unique().numel() > 8000, "values repeat: not random"
        if case.name == "rand":
            assert out.min() >= 0 and out.max() < 1
            assert abs(out.mean().item() - 0.5) < 0.02 and abs(out.var().item() - 1 / 12) < 0.01
        else:
            assert abs(out.mean().item()) < 0.05 and abs(out.std().item() - 1) < 0.05
            assert out.abs().max() < 6
    else:  # dropout p = 0.25 in training: kept elements scaled by 1 / 0.75, the mask says which
        (x,) = inputs
        out, mask = outputs
        assert mask.dtype == torch.bool and out.shape == mask.shape == x.shape
        assert abs(mask.float().mean().item() - 0.75) < 0.02
        assert torch.allclose(out[mask], x[mask] / 0.75) and bool((out[~mask] == 0).all())


def _our_file(case) -> bytes:
    pte = export(case)
    return _legit_training(pte) if case.check == "rewrite" else pte


def _op_name(case) -> str:
    return "aten::_native_batch_norm_legit.out" if case.check == "rewrite" else case.op


def _family(family: str, exporter: str) -> list:
    skip = "published_skip" if exporter == "published" else "ours_skip"
    return [c for c in CASES if c.family == family and getattr(c, skip) is None]


@pytest.fixture(scope="module")
def ours() -> dict:
    return {c.name: _our_file(c) for c in CASES if c.ours_skip is None}


@pytest.mark.parametrize("family", FAMILIES)
def test_family_from_this_exporter_on_both_engines(family, ours):
    for case in _family(family, "ours"):
        pte = ours[case.name]
        assert _op_name(case) in _ops(pte), f"{case.name}: the program does not call {_op_name(case)}"
        inputs = case.inputs()
        for engine in ENGINES:
            method = RUNTIMES[engine].load_program(pte).load_method("forward")
            try:
                _check(case, method.execute(list(inputs)), inputs)
            except AssertionError as e:
                raise AssertionError(f"{case.name} on the {engine} engine: {e}") from e


@pytest.mark.parametrize("family", FAMILIES)
def test_family_on_the_published_runtime(family, ours, reference_runtime, tmp_path):
    for case in _family(family, "ours"):
        if case.reference_failure:
            continue
        path = tmp_path / f"{case.name}.pte"
        path.write_bytes(ours[case.name])
        inputs = case.inputs()
        try:
            _check(case, reference_runtime.run(path, inputs, tmp_path), inputs)
        except AssertionError as e:
            raise AssertionError(f"{case.name} on the published runtime: {e}") from e


@pytest.fixture(scope="module")
def published_files(tmp_path_factory, reference_runtime) -> Path:
    root = tmp_path_factory.mktemp("published-portable-ops")
    script = Path(__file__).with_name("portable_op_models.py")
    proc = subprocess.run([reference_runtime.python, str(script), str(root)], capture_output=True, text=True,
                          timeout=1800, env=published_env(), cwd=script.parent)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return root


@pytest.mark.parametrize("family", FAMILIES)
def test_family_from_the_published_exporter_on_both_engines(family, published_files):
    for case in _family(family, "published"):
        path = published_files / f"{case.name}.pte"
        assert path.is_file(), (published_files / f"{case.name}.err.txt").read_text()
        pte = path.read_bytes()
        if case.check == "rewrite":
            pte = _legit_training(pte)
        assert _op_name(case) in _ops(pte), f"{case.name}: the published program does not call {_op_name(case)}"
        inputs = case.inputs()
        for engine in ENGINES:
            method = RUNTIMES[engine].load_program(pte).load_method("forward")
            try:
                _check(case, method.execute(list(inputs)), inputs)
            except AssertionError as e:
                raise AssertionError(f"{case.name} (published file) on the {engine} engine: {e}") from e


def test_every_missing_upstream_operator_has_a_case():
    ours = {_op_name(c) for c in CASES}
    assert len({c.name for c in CASES}) == len(CASES) == len(CASES_BY_NAME)
    missing = {"aten::_cdist_forward.out", "aten::_conj_physical.out", "aten::_native_batch_norm_legit.out",
               "aten::_pdist_forward.out", "aten::_upsample_bilinear2d_aa.out", "aten::acosh.out",
               "aten::as_strided_copy.out", "aten::asinh.out", "aten::atanh.out",
               "aten::bitwise_left_shift.Tensor_Scalar_out", "aten::bitwise_left_shift.Tensor_out",
               "aten::bitwise_not.out", "aten::bitwise_right_shift.Tensor_Scalar_out",
               "aten::bitwise_right_shift.Tensor_out", "aten::convolution_backward.out", "aten::detach_copy.out",
               "aten::diagonal_copy.out", "aten::empty.out", "aten::fill.Scalar_out", "aten::fill.Tensor_out",
               "aten::glu.out", "aten::grid_sampler_2d.out", "aten::lift_fresh_copy.out", "aten::logit.out",
               "aten::masked_scatter.out", "aten::masked_select.out", "aten::max.unary_out",
               "aten::max_pool2d_with_indices_backward.grad_input", "aten::min.unary_out", "aten::narrow_copy.out",
               "aten::native_dropout.out", "aten::nonzero.out", "aten::pixel_shuffle.out",
               "aten::pixel_unshuffle.out", "aten::rand.out", "aten::randn.out", "aten::reflection_pad1d.out",
               "aten::reflection_pad2d.out", "aten::reflection_pad3d.out", "aten::repeat_interleave.Tensor_out",
               "aten::replication_pad1d.out", "aten::replication_pad2d.out", "aten::replication_pad3d.out",
               "aten::roll.out", "aten::t_copy.out", "aten::tril.out", "aten::unfold_copy.out",
               "aten::var_mean.correction_out", "dim_order_ops::_empty_dim_order.out"}
    assert missing <= ours, sorted(missing - ours)


def test_the_checks_catch_a_wrong_answer():
    case = CASES_BY_NAME["reflection_pad2d"]
    inputs = case.inputs()
    wrong = _expected(case, inputs).clone()
    wrong[..., 0] = wrong[..., 1]  # the replicate answer's first column
    with pytest.raises(AssertionError):
        _check(case, [wrong], inputs)
    drop = CASES_BY_NAME["dropout"]
    x = drop.inputs()[0]
    with pytest.raises(AssertionError):  # kept elements not scaled
        _check(drop, [x * (torch.rand_like(x) > 0.25), torch.ones_like(x, dtype=torch.bool)], (x,))


@pytest.mark.skipif("native" not in RUNTIMES, reason="native runtime not built")
def test_random_calls_differ():
    # Two runs of one rand program (and two rand calls of one run) give different values.
    method = RUNTIMES["native"].load_program(_our_file(CASES_BY_NAME["rand"])).load_method("forward")
    a, b = method.execute([torch.zeros(1)])[0], method.execute([torch.zeros(1)])[0]
    assert not torch.equal(a, b)


@pytest.mark.skipif("native" not in RUNTIMES, reason="native runtime not built")
def test_bad_values_are_errors_not_crashes():
    native = RUNTIMES["native"]
    # masked_scatter: a mask selecting more elements than the source holds.
    case = PortableOpCase("scatter5", "masked", "aten::masked_scatter.out", lambda x, m, s: x.masked_scatter(m, s),
                          lambda: (torch.randn(3, 4), torch.eye(3, 4, dtype=torch.bool), torch.randn(5)))
    method = native.load_program(export(case)).load_method("forward")
    x, mask, source = case.inputs()
    method.execute([x, mask, source])
    with pytest.raises(Exception, match="failed"):
        method.execute([x, torch.ones(3, 4, dtype=torch.bool), source])
    # max_pool2d backward: an index outside the plane.
    case = CASES_BY_NAME["max_pool2d_backward"]
    method = native.load_program(_our_file(case)).load_method("forward")
    g, x, idx = case.inputs()
    bad = idx.clone()
    bad.view(-1)[0] = 10_000
    with pytest.raises(Exception, match="failed"):
        method.execute([g, x, bad])
    # Outside a function's domain: NaN as torch gives, infinities kept.
    case = CASES_BY_NAME["acosh"]
    method = native.load_program(_our_file(case)).load_method("forward")
    x = case.inputs()[0]
    x[0, :3] = torch.tensor([0.5, math.inf, -1.0])
    assert_outputs_close(method.execute([x]), torch.acosh(x))
