"""Memory planning: planners never overlap live tensors, greedy reuses space, plans are honoured."""

from __future__ import annotations

import random

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close
from executorch.exir import ExecutorchBackendConfig, to_edge
from executorch.exir import memory_planning as mp
from executorch.exir.memory_planning import MemoryPlanningPass
from executorch.exir.tensor import TensorSpec, is_alias
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


def test_alloc_graph_output_false_leaves_outputs_to_the_caller():
    # The whole story (views, constants, state, delegates, the published files): test_exir_caller_bound_outputs.py.
    from conftest import project_runtimes

    x = torch.randn(8, 64)
    ep = torch.export.export(Chain(), (x,))
    pte = to_edge(ep).to_executorch(ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(alloc_graph_output=False))).buffer
    for name, rt in project_runtimes().items():
        method = rt.load_program(pte).load_method("forward")
        assert method.metadata.output_tensor_meta(0).is_memory_planned() is False, name
        assert_outputs_close(method.execute([x]), [Chain()(x)])


# --- planning is a step before emission; the emitter reads the plan from the graph ------------------------------

class _Mixed(torch.nn.Module):
    """Views the plan keeps in place (squeeze, flatten), a split's several results, and a cond whose branch
    results move into the cond's outputs."""

    def forward(self, x, flag):
        y = (x * 2.0).squeeze(0)
        a, b = torch.split(y + 1.0, 2)
        z = torch.cond(flag.sum() > 0, lambda u: u * 3.0, lambda u: u - 1.0, (a,))
        return z.flatten(), torch.relu(b)


_MIXED_INPUTS = (torch.randn(1, 4, 3), torch.ones(1))


def _specs(gm):
    """Every distinct TensorSpec in the graph and its branches."""
    from torch.utils import _pytree as pytree

    seen = {}
    for mod in gm.modules():
        if isinstance(mod, torch.fx.GraphModule):
            for node in mod.graph.nodes:
                for spec in pytree.tree_leaves(node.meta.get("spec")):
                    if isinstance(spec, TensorSpec):
                        seen[id(spec)] = spec
    return list(seen.values())


def _placed(specs):
    from collections import Counter

    return Counter((s.mem_id, s.mem_offset, tuple(s.shape)) for s in specs if s.mem_id is not None)


def _emitted(plan):
    from collections import Counter

    tensors = [v.val for v in plan.values if type(v.val).__name__ == "Tensor" and v.val.allocation_info is not None]
    return Counter((t.allocation_info.memory_id, t.allocation_info.memory_offset, tuple(t.sizes)) for t in tensors)


def _live_values_apart(specs) -> None:
    """AssertionError when two storages of one arena share a byte while both are live (a view shares its
    base's storage, `mem_obj_id`, and is not a second tensor)."""
    places = {}  # (arena, storage) -> (start, end, lifetime)
    for s in specs:
        if s.mem_id is not None:
            end = max(s.mem_offset + s.nbytes(), places.get((s.mem_id, s.mem_obj_id), (0, 0))[1])
            places[(s.mem_id, s.mem_obj_id)] = (s.mem_offset, end, s.lifetime)
    items = sorted(places.items())
    for i, ((mem, _), (start, end, life)) in enumerate(items):
        for (other_mem, _), (o_start, o_end, o_life) in items[i + 1:]:
            if mem == other_mem and start < o_end and o_start < end and life[0] <= o_life[1] and o_life[0] <= life[1]:
                raise AssertionError(f"arena {mem}: bytes {start}..{end} and {o_start}..{o_end} live together")


def test_emitted_places_are_the_plan_recorded_in_the_graph():
    pm = to_edge(torch.export.export(_Mixed(), _MIXED_INPUTS)).to_executorch()
    gm = pm.exported_program().graph_module
    plan = pm.executorch_program.execution_plan[0]
    specs = _specs(gm)
    assert len(_placed(specs)) > 6 and _placed(specs) == _emitted(plan)  # every planned value, and only those
    assert plan.non_const_buffer_sizes == gm.meta["non_const_buffer_sizes"]
    nodes = list(gm.graph.nodes)
    user_inputs = [n for n in nodes if n.op == "placeholder"]
    for node, idx in zip(user_inputs, plan.inputs):
        info = plan.values[idx].val.allocation_info
        assert (node.meta["spec"].mem_id, node.meta["spec"].mem_offset) == (info.memory_id, info.memory_offset)
    for node, idx in zip(nodes[-1].args[0], plan.outputs):
        info = plan.values[idx].val.allocation_info
        assert (node.meta["spec"].mem_id, node.meta["spec"].mem_offset) == (info.memory_id, info.memory_offset)
    flat = nodes[-1].args[0][0]
    assert is_alias(flat) and flat.meta["spec"].mem_obj_id == flat.args[0].meta["spec"].mem_obj_id
    _live_values_apart(specs)


def test_the_planning_step_alone_plans_an_edge_graph_as_to_executorch_does():
    edge = to_edge(torch.export.export(_Mixed(), _MIXED_INPUTS))
    ep = edge.exported_program()
    result = MemoryPlanningPass().run(ep.graph_module, ep.graph_signature)
    assert result.graph_module is ep.graph_module and result.modified
    alone = {n.name: (n.meta["spec"].mem_id, n.meta["spec"].mem_offset) for n in ep.graph_module.graph.nodes
             if isinstance(n.meta.get("spec"), TensorSpec)}
    assert len(alone) > 6
    sizes = list(ep.graph_module.meta["non_const_buffer_sizes"])
    pm = edge.to_executorch()
    plan = pm.executorch_program.execution_plan[0]
    assert plan.non_const_buffer_sizes == sizes
    assert _emitted(plan) == _placed(_specs(ep.graph_module))
    gm = pm.exported_program().graph_module
    assert alone == {n.name: (n.meta["spec"].mem_id, n.meta["spec"].mem_offset) for n in gm.graph.nodes
                     if isinstance(n.meta.get("spec"), TensorSpec)}


def test_the_graph_pass_form_plans_every_placeholder_and_the_verifier_accepts_it():
    from executorch.exir.memory_planning import Verifier

    gm = _edge_graph(Chain(), (torch.randn(8, 64),))
    assert MemoryPlanningPass()(gm).graph_module is gm
    assert all(n.meta["spec"].mem_id == 1 for n in gm.graph.nodes if n.op == "placeholder")
    assert gm.meta["non_const_buffer_sizes"][1] >= 2 * 8 * 64 * 4
    verifier = Verifier(gm, alloc_graph_input=True, alloc_graph_output=True)
    assert verifier.verify_storage_reuse() > 0  # the chain's dead temporaries are reused
    verifier.verify_graph_input_output()
    _live_values_apart(_specs(gm))


def test_the_live_values_check_fails_on_a_wrong_plan():
    ep = to_edge(torch.export.export(_Mixed(), _MIXED_INPUTS)).exported_program()
    MemoryPlanningPass().run(ep.graph_module, ep.graph_signature)
    specs = _specs(ep.graph_module)
    _live_values_apart(specs)
    from executorch.exir.memory_planning import Verifier

    Verifier(ep.graph_module, True, True).verify_storage_reuse()  # views are their base's bytes, not an overlap
    a, b = next((a, b) for a in specs for b in specs if a.mem_obj_id != b.mem_obj_id and a.mem_id == b.mem_id == 1
                and a.nbytes() and b.nbytes() and a.lifetime[0] <= b.lifetime[1] and b.lifetime[0] <= a.lifetime[1])
    for s in specs:  # move all of b's storage (b and its views) onto a's bytes
        if s.mem_obj_id == b.mem_obj_id:
            s.mem_offset = a.mem_offset
    with pytest.raises(AssertionError, match="live together"):
        _live_values_apart(specs)
    with pytest.raises(AssertionError, match="memory plan overlap"):
        Verifier(ep.graph_module, True, True).verify_storage_reuse()


def test_a_custom_planner_sees_every_buffer_before_anything_is_emitted(monkeypatch):
    from executorch.exir.program import _program

    events = []

    def backwards(buffers, alignment):  # naive, last buffer first: a plan no built-in planner makes
        events.append(("plan", len(buffers)))
        end = 0
        for b in reversed(buffers):
            b.offset = end
            end += -(-b.size // alignment) * alignment
        events.append(("offsets", sorted(b.offset for b in buffers)))
        return end

    emit = _program.emit_method_with_delegates
    monkeypatch.setattr(_program, "emit_method_with_delegates",
                        lambda name, *a: events.append(("emit", name)) or emit(name, *a))
    programs = {"forward": torch.export.export(Chain(), (torch.randn(8, 64),)),
                "other": torch.export.export(_Split(), (torch.randn(8, 3),))}
    pm = to_edge(programs).to_executorch(ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(backwards)))
    assert [e[0] for e in events] == ["plan", "offsets", "plan", "offsets", "emit", "emit"]
    for (_, offsets), plan in zip(events[1::2], pm.executorch_program.execution_plan):
        planned = sorted(v.val.allocation_info.memory_offset for v in plan.values
                         if type(v.val).__name__ == "Tensor" and v.val.allocation_info is not None)
        assert sorted(set(planned)) == sorted(set(offsets))  # views add values, never places
    x = torch.randn(8, 64)
    assert_outputs_close(Runtime.get().load_program(pm.buffer).load_method("forward").execute([x])[0], Chain()(x))


def test_the_emitter_takes_places_from_the_specs_not_its_own_reckoning(monkeypatch):
    from executorch.exir.program import _program

    plan_program = _program.plan_program

    def shifted(programs, config):  # the plan, then every place 64 bytes further on
        plan_program(programs, config)
        for ep in programs.values():
            for spec in _specs(ep.graph_module):
                if spec.mem_id is not None:
                    spec.mem_offset += 64
            ep.graph_module.meta["non_const_buffer_sizes"][1] += 64

    ep = torch.export.export(_Mixed(), _MIXED_INPUTS)
    plain = to_edge(ep).to_executorch().executorch_program.execution_plan[0]
    monkeypatch.setattr(_program, "plan_program", shifted)
    moved = to_edge(ep).to_executorch().executorch_program.execution_plan[0]
    assert moved.non_const_buffer_sizes[1] == plain.non_const_buffer_sizes[1] + 64
    assert _emitted(moved) == {(m, off + 64, sizes): n for (m, off, sizes), n in _emitted(plain).items()}


class _State(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("a", torch.zeros(3))
        self.register_buffer("b", torch.zeros(2, 2))

    def forward(self, x):
        self.a.add_(x)
        self.b.mul_(2.0)
        return self.a * 1.0


def test_shared_state_is_planned_in_arena_2_at_one_place_per_buffer_in_every_method():
    ep = torch.export.export(_State(), (torch.ones(3),))
    config = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True))
    pm = to_edge({"forward": ep, "again": ep}).to_executorch(config)
    places = []
    for name, plan in zip(("forward", "again"), pm.executorch_program.execution_plan):
        gm = pm.exported_program(name).graph_module
        state = {n.target: n.meta["spec"] for n in gm.graph.nodes if n.op == "placeholder" and n.target != "x"}
        assert {s.mem_id for s in state.values()} == {mp.SHARED_STATE_ARENA}
        assert state["b_a"].lifetime == [0, len(gm.graph.nodes)]  # state lives for the whole call
        places.append({k: s.mem_offset for k, s in state.items()})
        assert plan.non_const_buffer_sizes == gm.meta["non_const_buffer_sizes"]
        assert plan.non_const_buffer_sizes[2] == 16 + 16  # 3 floats and 4 floats, each 16-byte aligned
        assert _placed(_specs(gm)) == _emitted(plan)
    assert places[0] == places[1] and len(set(places[0].values())) == 2
