"""Upstream's planner protocol, EmitterOutput's tables and CaptureConfig, used as upstream's own tests use them."""

from __future__ import annotations

import functools

import pytest
import torch

from executorch.exir.dialects.edge._ops import aten_op
from executorch.devtools.compare import assert_outputs_close
from executorch.exir import ExecutorchBackendConfig, to_edge
from executorch.exir.error import ExportError

from conftest import project_runtimes  # noqa: E402

RUNTIMES = project_runtimes()


class _Chain(torch.nn.Module):
    def forward(self, x):
        a = x + 1.0
        b = a * 2.0
        c = b - 3.0
        return torch.cat([c * c, x[:2]])


def _specs():
    """An edge graph's TensorSpecs with lifetimes, as upstream's planners receive them."""
    from executorch.exir.memory_planning import lifetimes
    from executorch.exir.passes import SpecPropPass
    from executorch.exir.tensor import TensorSpec

    ep = to_edge(torch.export.export(_Chain(), (torch.randn(4, 4),))).exported_program()
    gm = ep.graph_module
    SpecPropPass()(gm)
    specs = []
    for node, life in lifetimes(gm).items():
        spec = node.meta.get("spec")
        if isinstance(spec, TensorSpec):
            spec.lifetime = list(life)
            specs.append(spec)
    return gm, ep.graph_signature, specs


def _live_together_disjoint(specs) -> None:
    for a in specs:
        for b in specs:
            if a is b or a.mem_id != b.mem_id or a.lifetime[1] < b.lifetime[0] or b.lifetime[1] < a.lifetime[0]:
                continue
            assert (a.mem_offset + a.allocated_memory <= b.mem_offset
                    or b.mem_offset + b.allocated_memory <= a.mem_offset)


def test_greedy_and_naive_return_a_plan_and_leave_the_specs_alone():
    from executorch.exir.memory_planning import MemoryAlgoResult, greedy, naive

    gm, sig, specs = _specs()
    results = {algo.__name__: algo(16, specs, gm, sig, 0) for algo in (greedy, naive)}
    assert all(isinstance(r, MemoryAlgoResult) for r in results.values())
    assert all(s.mem_offset is None and s.mem_id is None for s in specs)
    greedy_size, naive_size = results["greedy"].bufsizes[1], results["naive"].bufsizes[1]
    assert results["greedy"].bufsizes[0] == results["naive"].bufsizes[0] == 0
    assert naive_size == sum(s.allocated_memory for s in specs)  # naive: one after another
    assert greedy_size < naive_size  # the chain's dead temporaries are reused
    naive_offsets = sorted(r.mem_offset for r in results["naive"].spec_dict.values())
    assert len(set(naive_offsets)) == len(naive_offsets)


def test_suite_writes_the_smallest_plan_into_the_specs():
    from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite, Verifier, greedy, naive

    gm, sig, specs = _specs()
    best = greedy(16, specs, gm, sig, 0).bufsizes
    for algos, want in (([naive, greedy], best), ([naive], None), (None, best)):
        for s in specs:
            s.mem_id = s.mem_offset = s.mem_obj_id = None
        sizes = MemoryPlanningAlgorithmSuite(algo_list=algos)(16, specs, gm, sig, 0)
        if want is not None:
            assert sizes == want
        assert all(s.mem_id == 1 and s.mem_offset % 16 == 0 and s.mem_obj_id is not None for s in specs)
        assert max(s.mem_offset + s.allocated_memory for s in specs) <= sizes[1]
        _live_together_disjoint(specs)
        reuse = Verifier(gm, alloc_graph_input=True, alloc_graph_output=True).verify_storage_reuse()
        assert (reuse > 0) == (algos != [naive])


def test_greedy_options_padding_reserved_bytes_and_preset_memory_ids():
    from executorch.exir.memory_planning import greedy

    gm, sig, specs = _specs()
    plain = greedy(16, specs, gm, sig, 0)
    assert greedy(16, specs, gm, sig, 64).bufsizes[1] == plain.bufsizes[1] + 64
    gm.input_mem_buffer_sizes = [0, 256]  # bytes a submodule's plan reserves at the start of arena 1
    shifted = greedy(16, specs, gm, sig, 0)
    assert shifted.bufsizes[1] == plain.bufsizes[1] + 256
    assert all(shifted.spec_dict[s].mem_offset == plain.spec_dict[s].mem_offset + 256 for s in specs)
    del gm.input_mem_buffer_sizes
    specs[0].mem_id = 3  # a custom pool, as upstream's tests set it
    pools = greedy(16, specs, gm, sig, 0)
    assert len(pools.bufsizes) == 4 and pools.bufsizes[3] == specs[0].allocated_memory
    assert pools.spec_dict[specs[0]].mem_id == 3 and pools.spec_dict[specs[0]].mem_offset == 0


def test_greedy_without_overlapping_allocations_gives_whole_objects():
    from executorch.exir.memory_planning import greedy

    gm, sig, specs = _specs()
    result = greedy(16, specs, gm, sig, 0, allow_overlapping_allocations=False)
    placed = result.spec_dict
    for s in specs:
        s.mem_id, s.mem_offset = placed[s].mem_id, placed[s].mem_offset
    _live_together_disjoint(specs)
    # each spec starts where its storage object starts: objects are numbered by start offset
    starts = sorted({p.mem_offset for p in placed.values()})
    assert all(starts.index(p.mem_offset) == p.mem_obj_id for p in placed.values())
    assert result.bufsizes[1] >= greedy(16, specs, gm, sig, 0).bufsizes[1]


@pytest.mark.parametrize("algo", ["suite", "greedy", "partial"])
def test_memory_planning_pass_takes_upstream_algorithms(algo):
    from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite, greedy, naive
    from executorch.exir.passes import MemoryPlanningPass

    model, x = _Chain(), torch.randn(4, 4)
    edge = to_edge(torch.export.export(model, (x,)))
    planner = {"suite": MemoryPlanningAlgorithmSuite(algo_list=[naive, greedy]), "greedy": greedy,
               "partial": functools.partial(greedy, allow_overlapping_allocations=False)}[algo]
    pm = edge.to_executorch(
        ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(memory_planning_algo=planner)))
    if algo != "partial":  # greedy through upstream's protocol plans exactly as the default planner
        assert pm.buffer == edge.to_executorch().buffer
    naive_pm = edge.to_executorch(
        ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(memory_planning_algo="naive")))
    arena = pm.executorch_program.execution_plan[0].non_const_buffer_sizes[1]
    assert arena < naive_pm.executorch_program.execution_plan[0].non_const_buffer_sizes[1]
    for runtime in RUNTIMES.values():
        out = runtime.load_program(pm.buffer).load_method("forward").execute([x])
        assert_outputs_close(out, [model(x)])


def test_memory_planning_pass_refuses_a_plan_it_cannot_keep_and_bad_algorithms():
    from executorch.exir.passes import MemoryPlanningPass

    def second_pool(alignment, specs, graph_module, graph_signature, extra_padding):
        for s in specs:
            s.mem_id, s.mem_offset = 2, 0
        return [0, 0, 64]

    edge = to_edge(torch.export.export(_Chain(), (torch.randn(4, 4),)))
    config = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(memory_planning_algo=second_pool))
    with pytest.raises(ExportError, match="second_pool placed a tensor in memory id 2"):
        edge.to_executorch(config)
    with pytest.raises(ExportError, match="takes neither upstream's planner arguments"):
        MemoryPlanningPass(memory_planning_algo=lambda buffers: 0)
    assert MemoryPlanningPass(memory_planning_algo=None).memory_planning_algo == "greedy"  # upstream's default


# --- EmitterOutput -----------------------------------------------------------------------------

class _Linear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(5, 5)

    def forward(self, x):
        return self.linear(x)


def test_emitter_output_external_constant_tables():
    edge = to_edge(torch.export.export(_Linear(), (torch.ones(5, 5),)))
    out = edge.to_executorch(ExecutorchBackendConfig(external_constants=True))._emitter_output
    assert len(out.program.constant_buffer) == 1  # only the reserved empty entry stays in the .pte
    table = out.external_constant_map["_default_external_constant"]
    assert sorted(table) == ["linear.bias", "linear.weight"] and len(out.external_constant_buffer) == 2
    weights = edge.exported_program().state_dict
    for fqn, idx in table.items():
        assert out.external_constant_buffer[idx] == weights[fqn].detach().contiguous().numpy().tobytes()
    custom = edge.to_executorch(ExecutorchBackendConfig(
        external_constants=lambda n: "linear_weight" if "weight" in n.name else None))._emitter_output
    assert custom.external_constant_map == {"linear_weight": {"linear.weight": 0}}
    assert len(custom.program.constant_buffer) == 2  # the bias stays in the .pte
    plain = edge.to_executorch()._emitter_output
    assert plain.external_constant_buffer == [] and plain.external_constant_map == {}


class _Twins(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Parameter(torch.ones(3))
        self.b = torch.nn.Parameter(torch.ones(3))

    def forward(self, x):
        return x * self.a + self.b


def test_emitter_output_stores_equal_external_constants_once():
    edge = to_edge(torch.export.export(_Twins(), (torch.ones(3),)))
    out = edge.to_executorch(ExecutorchBackendConfig(external_constants=True))._emitter_output
    assert out.external_constant_map["_default_external_constant"] == {"a": 0, "b": 0}
    assert out.external_constant_buffer == [torch.ones(3).numpy().tobytes()]


def test_emitter_output_counts_each_delegate_call_s_outputs():
    from executorch.exir.backend.test.op_partitioner_demo import AddMulPartitionerDemo
    from executorch.exir.emit import emit_program

    class TwoOut(torch.nn.Module):
        def forward(self, a, x, b):
            y = a @ x
            return y + b, y

    inputs = (torch.randn(2, 2), torch.randn(2, 2), torch.randn(2, 2))
    lowered = to_edge(torch.export.export(TwoOut(), inputs)).to_backend(AddMulPartitionerDemo())
    out = emit_program(lowered.exported_program())
    plan = out.program.execution_plan[0]
    calls = [pc for pc, i in enumerate(plan.chains[0].instructions) if type(i.instr_args).__name__ == "DelegateCall"]
    assert calls and out.instruction_id_to_num_outs_map == {"forward": {pc: 2 for pc in calls}}
    assert (emit_program(to_edge(torch.export.export(TwoOut(), inputs)).exported_program())
            .instruction_id_to_num_outs_map == {"forward": {}})


# --- executorch.exir.capture: CaptureConfig and capture ----------------------------------------

def test_capture_config_is_at_upstream_s_paths_and_refuses_old_tracers_by_name():
    import executorch.exir as exir
    from executorch.exir.capture import CaptureConfig
    from executorch.exir.capture._config import CaptureConfig as Config

    assert exir.CaptureConfig is CaptureConfig is Config
    CaptureConfig()
    CaptureConfig(enable_aot=True)
    CaptureConfig(enable_dynamic_shape=True)
    for kwargs, name in (({"pt2_mode": False}, "pt2_mode=False"),
                         ({"enable_functionalization": False}, "enable_functionalization=False"),
                         ({"_unlift": True}, "_unlift=True"),
                         ({"_use_old_decomp_table": True}, "_use_old_decomp_table"),
                         ({"_dynamo_config": object()}, "_dynamo_config"),
                         ({"enable_aot": True, "enable_dynamic_shape": True}, "enable_dynamic_shape=True does nothing"),
                         ({"enable_aot": "yes"}, "enable_aot must be True or False")):
        with pytest.raises(ExportError, match=f"CaptureConfig.{name}"):
            CaptureConfig(**kwargs)


class _Scale(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        return torch.nn.functional.silu(x * self.w)

    def double(self, x):
        return x * 2.0 + self.w


def _targets(ep) -> set:
    return {str(aten_op(n.target)) for n in ep.graph_module.graph.nodes if n.op == "call_function"}


def test_capture_then_to_edge_then_to_executorch_runs():
    import executorch.exir as exir

    model, x = _Scale(), torch.randn(4, 3)
    with pytest.warns(DeprecationWarning):
        captured = exir.capture(model, (x,), exir.CaptureConfig())
    assert "aten.silu.default" in _targets(captured.exported_program)  # traced as is, not decomposed
    aot = exir.capture(model, (x,), exir.CaptureConfig(enable_aot=True)).exported_program
    assert "aten.silu.default" not in _targets(aot)  # enable_aot: core ATen, as upstream's ahead-of-time path
    assert_outputs_close([captured(x)], [model(x)])
    edge = captured.to_edge()
    with pytest.raises(ExportError, match="call to_edge"):
        captured.to_executorch()
    pm = edge.to_executorch()
    for runtime in RUNTIMES.values():
        assert_outputs_close(runtime.load_program(pm.buffer).load_method("forward").execute([x]), [model(x)])
    # a module's method is exported in place of its forward; a plain function works too
    method = exir.capture(model.double, (x,)).to_edge().to_executorch()
    out = RUNTIMES["python"].load_program(method.buffer).load_method("forward").execute([x])
    assert_outputs_close(out, [model.double(x)])
    assert "forward" not in vars(model)
    fn = exir.capture(lambda a, b: a @ b, (torch.randn(2, 3), torch.randn(3, 2))).exported_program
    assert "aten.matmul.default" in _targets(fn)


def test_capture_dynamic_shapes_need_the_option():
    import executorch.exir as exir

    x = torch.randn(4, 3)
    dims = ({0: torch.export.Dim("n", min=2, max=8)},)
    with pytest.raises(ExportError, match=r"needs CaptureConfig\(enable_dynamic_shape=True\)"):
        exir.capture(_Scale(), (x,), exir.CaptureConfig(), dynamic_shapes=dims)
    ep = exir.capture(_Scale(), (x,), exir.CaptureConfig(enable_dynamic_shape=True),
                      dynamic_shapes=dims).exported_program
    placeholder = next(n for n in ep.graph_module.graph.nodes if n.op == "placeholder" and n.name == "x")
    assert not isinstance(placeholder.meta["val"].shape[0], int)
    with pytest.raises(ExportError, match="args must be a tuple"):
        exir.capture(_Scale(), x)
