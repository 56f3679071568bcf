"""Memory planning: planners never overlap live tensors, greedy reuses space, plans are honoured."""

from __future__ import annotations

import random

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close
from executorch.exir import ExecutorchBackendConfig, to_edge
from executorch.exir import memory_planning as mp
from executorch.exir.memory_planning import MemoryPlanningPass
from executorch.runtime import Runtime


def _random_buffers(rng: random.Random, n: int) -> list[mp.Buffer]:
    out = []
    for _ in range(n):
        first = rng.randrange(50)
        out.append(mp.Buffer(size=rng.choice([0, 1, 7, 16, 100, 4096, rng.randrange(1, 10000)]),
                             first=first, last=first + rng.randrange(10)))
    return out


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("planner", ["greedy", "naive"])
def test_planners_never_overlap_live_buffers(seed, planner):
    buffers = _random_buffers(random.Random(seed), 60)
    arena = mp.PLANNERS[planner](buffers, 16)
    mp.verify(buffers)
    assert all(b.offset % 16 == 0 and b.offset + b.size <= arena for b in buffers)


@pytest.mark.parametrize("seed", range(20))
def test_greedy_never_needs_more_than_naive(seed):
    buffers = _random_buffers(random.Random(seed), 60)
    copy = [mp.Buffer(b.size, b.first, b.last) for b in buffers]
    assert mp.greedy(buffers, 16) <= mp.naive(copy, 16)


def test_verify_catches_an_overlap():
    a, b = mp.Buffer(64, 0, 5, offset=0), mp.Buffer(64, 3, 8, offset=32)
    with pytest.raises(AssertionError):
        mp.verify([a, b])
    b.first = 6  # not live at once: sharing bytes is fine
    mp.verify([a, b])


class Chain(torch.nn.Module):
    def forward(self, x):
        for _ in range(6):
            x = torch.relu(x * 2.0 + 1.0)
        return x.view(-1)


def _lower(algo: str):
    ep = torch.export.export(Chain(), (torch.randn(8, 64),))
    return to_edge(ep).to_executorch(ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(algo)))


def test_greedy_plan_is_smaller_and_both_plans_run():
    x = torch.randn(8, 64)
    sizes = {}
    for algo in ("greedy", "naive"):
        pte = _lower(algo)
        plan = pte.executorch_program.execution_plan[0]
        sizes[algo] = plan.non_const_buffer_sizes[1]
        out = Runtime.get().load_program(pte.buffer).load_method("forward").execute([x])
        assert_outputs_close(out[0], Chain()(x))
    # 8x64 floats = 2 KiB per tensor; greedy keeps about three alive, naive gives each its own
    assert sizes["greedy"] < sizes["naive"] / 3


def test_static_view_aliases_its_base():
    plan = _lower("greedy").executorch_program.execution_plan[0]
    tensors = [v.val for v in plan.values if type(v.val).__name__ == "Tensor"]
    out = plan.values[plan.outputs[0]].val
    assert out.sizes == [512]
    base = [t for t in tensors if t.sizes == [8, 64] and t.allocation_info is not None
            and t.allocation_info.memory_offset == out.allocation_info.memory_offset]
    assert base, "the flattened output should share its base tensor's bytes"
    ops = {(o.name, o.overload) for o in plan.operators}
    assert ("aten::view_copy", "out") not in ops


class _Heads(torch.nn.Module):
    """The attention head shuffles: squeeze, unsqueeze, a same-shape expand, and a real expand
    (which must stay a copy)."""

    def forward(self, qkv, row):
        q = qkv[:1].squeeze(0) * 2.0
        k = q.unsqueeze(0).expand(1, 6, 5, 8) + 1.0
        return k, row.expand(4, 8) * 3.0


def test_same_order_copies_alias_their_base():
    inputs = (torch.randn(3, 6, 5, 8), torch.randn(1, 8))
    pte = to_edge(torch.export.export(_Heads(), inputs)).to_executorch()
    plan = pte.executorch_program.execution_plan[0]
    called = [plan.operators[i.instr_args.op_index].name for chain in plan.chains for i in chain.instructions
              if type(i.instr_args).__name__ == "KernelCall"]
    assert "aten::squeeze_copy" not in called and "aten::unsqueeze_copy" not in called
    # The [1, 8] -> [4, 8] expand repeats the row: only that one stays a copy.
    assert called.count("aten::expand_copy") == 1
    from executorch.runtime import _python
    from executorch.runtime._backend import Verification

    engines = [_python]
    try:
        from executorch.runtime import _native
        import executorch.extension.pybindings._portable_lib  # noqa: F401
        engines.append(_native)
    except ImportError:
        pass  # native runtime not built: the Python engine still checks the aliases
    want = _Heads()(*inputs)
    for engine in engines:
        got = (engine.load_program(pte.buffer, Verification.InternalConsistency).load_method("forward")
               .execute(list(inputs)))
        for g, w in zip(got, want):
            assert torch.equal(g, w), engine.__name__


def test_user_planner_callable():
    calls = []

    def planner(buffers, alignment):
        calls.append(len(buffers))
        return mp.naive(buffers, alignment)

    ep = torch.export.export(Chain(), (torch.randn(8, 64),))
    pte = to_edge(ep).to_executorch(ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(planner)))
    assert calls and calls[0] > 1
    x = torch.randn(8, 64)
    assert_outputs_close(Runtime.get().load_program(pte.buffer).load_method("forward").execute([x])[0], Chain()(x))


class _Split(torch.nn.Module):
    def forward(self, x):
        a, b = torch.split(x * 2.0, 4)
        return torch.relu(a) + 1.0, b


def _edge_graph(model, inputs):
    return to_edge(torch.export.export(model, inputs)).exported_program().graph_module


def test_lifetimes_run_from_definition_to_last_use():
    gm = _edge_graph(Chain(), (torch.randn(8, 64),))
    nodes = list(gm.graph.nodes)
    life = mp.lifetimes(gm)
    assert set(life) == set(nodes)
    for i, n in enumerate(nodes):
        if n.op == "placeholder":
            assert life[n].first == 0
        else:
            assert life[n].first == i
        if n.op == "output":
            continue
        users = [nodes.index(u) if u.op != "output" else len(nodes) for u in n.users]
        assert life[n].last == max([i] + users)
    returned = nodes[-1].args[0][0]
    assert life[returned].last == len(nodes)  # outputs outlive every instruction


def test_lifetimes_of_a_multi_output_node_follow_its_getitems():
    gm = _edge_graph(_Split(), (torch.randn(8, 3),))
    nodes = list(gm.graph.nodes)
    life = mp.lifetimes(gm)
    split = next(n for n in nodes if "split" in str(n.target))
    first, second = sorted((u for u in split.users), key=lambda u: u.args[1])
    relu_user = next(iter(first.users))
    assert life[first].last == nodes.index(relu_user)  # used once, by relu
    assert life[second].last == len(nodes)  # returned
    assert life[split] == mp.Lifetime(nodes.index(split), len(nodes))


def test_emitted_plan_gives_each_tensor_its_lifetime():
    # Chain's intermediates live one step each, so greedy fits the chain in two activations.
    plan = _lower("greedy").executorch_program.execution_plan[0]
    one = 8 * 64 * 4
    assert plan.non_const_buffer_sizes[1] <= 3 * one
    naive = _lower("naive").executorch_program.execution_plan[0]
    assert naive.non_const_buffer_sizes[1] > 6 * one


def test_alloc_graph_input_false_leaves_inputs_to_the_caller_on_every_engine():

    from conftest import project_runtimes

    x = torch.randn(8, 64)
    ep = torch.export.export(Chain(), (x,))
    planned = to_edge(ep).to_executorch().executorch_program.execution_plan[0]
    unplanned = to_edge(ep).to_executorch(ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False))).executorch_program.execution_plan[0]
    assert planned.values[planned.inputs[0]].val.allocation_info is not None
    assert unplanned.values[unplanned.inputs[0]].val.allocation_info is None
    assert all(unplanned.values[i].val.allocation_info is not None for i in unplanned.outputs)
    pte = to_edge(ep).to_executorch(ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False))).buffer
    for name, rt in project_runtimes().items():
        method = rt.load_program(pte).load_method("forward")
        assert method.metadata.input_tensor_meta(0).is_memory_planned() is False, name
        assert_outputs_close(method.execute([x]), [Chain()(x)])


def test_alloc_graph_output_false_is_refused_by_name():
    with pytest.raises(Exception, match="alloc_graph_output=False is not supported"):
        MemoryPlanningPass(alloc_graph_output=False)
