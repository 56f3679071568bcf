"""ExecuTorch's public names at their module paths, called the way ExecuTorch code calls them."""

from __future__ import annotations

import torch

from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge
from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.pass_base import ExportPass, PassResult
from executorch.exir.passes import MemoryPlanningPass
from executorch.runtime import Runtime


class _AddMul(torch.nn.Module):
    def forward(self, x, y):
        return (x + y) * 2.0


def _edge(model=None, inputs=None):
    model = model or _AddMul()
    inputs = inputs or (torch.randn(2, 3), torch.randn(2, 3))
    return to_edge(torch.export.export(model, inputs)), inputs


def _run(pte_bytes: bytes, inputs):
    method = Runtime.get().load_program(pte_bytes).load_method("forward")
    return method.execute(list(inputs))


def test_exir_ops_edge_names_the_targets_edge_graphs_hold():
    edge, _ = _edge()
    targets = {n.target for n in edge.exported_program().graph.nodes if n.op == "call_function"}
    assert exir_ops.edge.aten.add.Tensor in targets
    assert exir_ops.edge.aten.mul.Tensor in targets
    assert exir_ops.edge.aten.sub.Tensor not in targets
    x = torch.randn(3)
    torch.testing.assert_close(exir_ops.edge.aten.add.Tensor(x, x), x * 2)


def test_user_pass_subclassing_export_pass_in_transform():
    class AddToSub(ExportPass):
        def call_operator(self, op, args, kwargs, meta):
            if op == exir_ops.edge.aten.add.Tensor:
                return super().call_operator(exir_ops.edge.aten.sub.Tensor, args, kwargs, meta)
            return super().call_operator(op, args, kwargs, meta)

    edge, (x, y) = _edge()
    result = AddToSub()(edge.exported_program().graph_module)
    assert isinstance(result, PassResult) and result.modified
    changed = edge.transform([AddToSub()])
    targets = {n.target for n in changed.exported_program().graph.nodes if n.op == "call_function"}
    assert exir_ops.edge.aten.sub.Tensor in targets and exir_ops.edge.aten.add.Tensor not in targets
    (out,) = _run(changed.to_executorch().buffer, (x, y))
    torch.testing.assert_close(out, (x - y) * 2.0)
    (unchanged,) = _run(edge.to_executorch().buffer, (x, y))
    assert not torch.allclose(unchanged, out)


def test_export_pass_recomputes_metadata_of_a_replacement():
    class SumInsteadOfMul(ExportPass):
        def call_operator(self, op, args, kwargs, meta):
            if op == exir_ops.edge.aten.mul.Tensor:
                return super().call_operator(exir_ops.edge.aten.add.Tensor, (args[0], args[0]), {}, meta)
            return super().call_operator(op, args, kwargs, meta)

    edge, (x, y) = _edge()
    (out,) = _run(edge.transform([SumInsteadOfMul()]).to_executorch().buffer, (x, y))
    torch.testing.assert_close(out, (x + y) * 2.0)


class _FullLike(torch.nn.Module):
    def forward(self, x):
        return x + torch.full_like(x, 2.0)


def test_export_pass_size_helpers_give_ints_and_symbolic_sizes():
    """`call_size_operator_all` (vendor passes such as Arm's full_like -> full build shapes with it): an
    int per static dim, a `sym_size.int` node per symbolic one; the rewritten program runs at another batch."""
    class FullLikeToFull(ExportPass):
        sizes = []

        def call_operator(self, op, args, kwargs, meta):
            if op != exir_ops.edge.aten.full_like.default:
                return super().call_operator(op, args, kwargs, meta)
            size = self.call_size_operator_all(args[0], meta, edge_dialect=True)
            FullLikeToFull.sizes.append(size)
            return super().call_operator(exir_ops.edge.aten.full.default, (size, args[1]),
                                         {"dtype": args[0].data.dtype}, meta)

    batch = torch.export.Dim("batch", min=1, max=8)
    ep = torch.export.export(_FullLike(), (torch.randn(4, 3),), dynamic_shapes=({0: batch},))
    edge = to_edge(ep).transform([FullLikeToFull()])
    (size,) = FullLikeToFull.sizes
    assert size[1] == 3 and type(size[1]) is int
    assert size[0].node.target == exir_ops.edge.aten.sym_size.int and size[0].node.args[1] == 0
    targets = [n.target for n in edge.exported_program().graph.nodes if n.op == "call_function"]
    assert exir_ops.edge.aten.full.default in targets and exir_ops.edge.aten.full_like.default not in targets
    x = torch.randn(6, 3)
    (out,) = _run(edge.to_executorch().buffer, (x,))
    torch.testing.assert_close(out, x + 2.0)


def test_deserialize_pte_binary_gives_program_and_segments():
    edge, _ = _edge(torch.nn.Linear(4, 2), (torch.randn(1, 4),))
    data = edge.to_executorch().buffer
    pte = deserialize_pte_binary(data)
    plan = pte.program.execution_plan[0]
    assert plan.name == "forward"
    assert plan.delegates == []
    assert pte.segment_data is pte.program.segment_data
    assert pte.mutable_data is None and pte.named_data is None
    assert bytes(serialize_pte_binary(pte)) == data


def test_memory_planning_pass_importable_from_passes():
    edge, (x, y) = _edge()
    config = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(memory_planning_algo="greedy"))
    (out,) = _run(edge.to_executorch(config).buffer, (x, y))
    torch.testing.assert_close(out, (x + y) * 2.0)


def test_edge_compile_config_importable():
    assert EdgeCompileConfig()._check_ir_validity


def _with_constants():
    edge, inputs = _edge()
    return to_edge(edge.exported_program(), constant_methods={"max_len": 128, "scale": 0.5, "use_cache": True}), inputs


def test_config_methods_kept_out_of_methods_and_returned_as_their_types():
    edge, (x, y) = _with_constants()
    assert edge.methods == {"forward"}
    assert edge.config_methods == {"max_len", "scale", "use_cache"}
    pte = edge.to_executorch()
    assert pte.methods == {"forward"} and pte.config_methods == {"max_len", "scale", "use_cache"}
    program = Runtime.get().load_program(pte.buffer)
    values = {name: program.load_method(name).execute([])[0] for name in ("max_len", "scale", "use_cache")}
    assert values == {"max_len": 128, "scale": 0.5, "use_cache": True}
    assert type(values["scale"]) is float and type(values["use_cache"]) is bool


def test_edge_programs_are_in_the_edge_dialect():
    edge, _ = _edge()
    assert edge.exported_program().dialect == "EDGE"
    assert torch.export.export(_AddMul(), (torch.randn(2), torch.randn(2))).dialect != "EDGE"


def test_save_writes_the_pte_and_refuses_other_suffixes(tmp_path):
    import pytest

    pte = _edge()[0].to_executorch()
    pte.save(str(tmp_path / "m.pte"))
    assert (tmp_path / "m.pte").read_bytes() == pte.buffer
    with pytest.raises(ValueError, match=r"does not end in \.pte"):
        pte.save(str(tmp_path / "m.bin"))
    assert not (tmp_path / "m.bin").exists()


def test_dump_executorch_program_prints_operators_and_fields():
    import io

    pte = _edge()[0].to_executorch()
    short, full = io.StringIO(), io.StringIO()
    pte.dump_executorch_program(out=short)
    pte.dump_executorch_program(verbose=True, out=full)
    assert "aten::add.out" in short.getvalue() and "aten::mul.out" in short.getvalue()
    assert "execution_plan=" in full.getvalue() and "non_const_buffer_sizes=" in full.getvalue()


def test_pretty_print_refuses_a_graph_module():
    import pytest

    from executorch.exir.error import ExportError, ExportErrorType
    from executorch.exir.print_program import pretty_print

    with pytest.raises(ExportError) as info:
        pretty_print(_edge()[0].exported_program().graph_module)
    assert info.value.error_code is ExportErrorType.INVALID_INPUT_TYPE


def test_error_names_at_upstream_paths():
    from executorch.exir.error import ExportError, ExportErrorType, InternalError

    err = ExportError(ExportErrorType.NOT_SUPPORTED, "no kernel for foo")
    assert err.error_code is ExportErrorType.NOT_SUPPORTED and "no kernel for foo" in str(err)
    assert ExportError("plain").error_code is None
    assert issubclass(InternalError, Exception) and not issubclass(InternalError, ExportError)


def test_executorch_program_is_a_deprecated_alias():
    import pytest

    import executorch.exir as exir

    with pytest.warns(DeprecationWarning, match="ExecutorchProgramManager"):
        alias = exir.ExecutorchProgram
    assert alias is exir.ExecutorchProgramManager


def test_version_states_the_api_level():
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    from executorch.version import __version__

    version = Version(__version__)
    # Requirements written for the published package hold; the local label keeps this build distinct.
    assert version in SpecifierSet(">=1.0") and version in SpecifierSet("==1.5.1")
    assert version.local == "compat" and version != Version("1.5.1")


def test_get_delegation_info_with_no_delegates():
    from executorch.devtools.backend_debug import get_delegation_info

    info = get_delegation_info(_edge()[0].exported_program().graph_module)
    assert info.num_delegated_subgraphs == 0 and info.num_delegated_nodes == 0
    assert info.num_non_delegated_nodes == 2
    assert {k: v.non_delegated for k, v in info.delegation_by_operator.items()} == {"add": 1, "mul": 1}
    assert "Total delegated subgraphs: 0" in info.get_summary()


def test_backend_config_options_honoured_or_refused_by_name():
    import pytest

    from executorch.exir.error import ExportError

    with pytest.raises(ExportError, match="ExecutorchBackendConfig.sym_shape_eval_pass="):
        ExecutorchBackendConfig(sym_shape_eval_pass=object())
    assert ExecutorchBackendConfig().remove_view_copy  # honoured either way (test_exir_remove_view_copy.py)
    with pytest.raises(ExportError, match="alloc_mutable_buffers=False"):
        MemoryPlanningPass(alloc_mutable_buffers=False)
    assert MemoryPlanningPass(alloc_mutable_buffers=True).alloc_mutable_buffers
    # honoured: outputs take the caller's memory (test_exir_caller_bound_outputs.py)
    assert MemoryPlanningPass(alloc_graph_output=False).alloc_graph_output is False


def test_memory_planning_pass_per_method():
    import pytest

    from executorch.exir.error import ExportError

    edge, (x, y) = _edge()
    wide = ExecutorchBackendConfig(memory_planning_pass={"forward": MemoryPlanningPass(alignment=256)})
    narrow = ExecutorchBackendConfig(memory_planning_pass={"other": MemoryPlanningPass(alignment=256)})
    wide_plan = edge.to_executorch(wide).executorch_program.execution_plan[0]
    narrow_plan = edge.to_executorch(narrow).executorch_program.execution_plan[0]
    assert wide_plan.non_const_buffer_sizes[1] > narrow_plan.non_const_buffer_sizes[1]
    (out,) = _run(edge.to_executorch(wide).buffer, (x, y))
    torch.testing.assert_close(out, (x + y) * 2.0)
    with pytest.raises(ExportError, match="dict of method name -> MemoryPlanningPass"):
        ExecutorchBackendConfig(memory_planning_pass={"forward": "greedy"})


def test_training_graph_is_refused_with_a_clear_error():
    import pytest

    from torch.export.experimental import _export_forward_backward

    from executorch.exir.error import ExportError

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)

        def forward(self, x, y):
            return torch.nn.functional.mse_loss(self.lin(x), y)

    ep = torch.export.export(WithLoss(), (torch.randn(4, 3), torch.randn(4, 2)))
    joint = _export_forward_backward(ep)
    with pytest.raises(ExportError, match="joint forward/backward"):
        to_edge(joint)
