"""ExportPass rebuilding graphs faithfully, PTEFile carrying a file's named data, and internal_assert, as upstream
code expects."""

from __future__ import annotations

import pytest
import torch

from executorch.exir import to_edge
from executorch.runtime import Runtime

from conftest import load_zoo  # noqa: E402


class AddMul(torch.nn.Module):
    def forward(self, x, y):
        return (x + y) * y


def _inputs():
    return torch.randn(2, 3), torch.randn(2, 3)


def _edge():
    return to_edge(torch.export.export(AddMul(), _inputs()))


def test_user_export_pass_inserting_an_operator_keeps_values_and_names_consistent():
    from executorch.exir.dialects._ops import ops as exir_ops
    from executorch.exir.pass_base import ExportPass

    class DoubleAfterMul(ExportPass):
        def call_operator(self, op, args, kwargs, meta):
            out = super().call_operator(op, args, kwargs, meta)
            if op == exir_ops.edge.aten.mul.Tensor:
                return super().call_operator(exir_ops.edge.aten.mul.Scalar, (out, 2.0), {}, meta)
            return out

    transformed = _edge().transform([DoubleAfterMul()])
    ep = transformed.exported_program()
    last = next(n for n in ep.graph.nodes if n.op == "output").args[0][0]
    assert last.target == exir_ops.edge.aten.mul.Scalar and tuple(last.meta["val"].shape) == (2, 3)
    assert ep.graph_signature.output_specs[0].arg.name == last.name
    x, y = _inputs()
    (out,) = Runtime.get().load_program(transformed.to_executorch().buffer).load_method("forward").execute([x, y])
    torch.testing.assert_close(out, (x + y) * y * 2)


@pytest.mark.parametrize("name", ["multi_io", "transformer_encoder"])
@pytest.mark.parametrize("dynamic", [False, True])
def test_identity_export_pass_leaves_the_pte_bytes_unchanged(name, dynamic):
    from executorch.exir.pass_base import ExportPass

    zoo = load_zoo()
    if dynamic and name not in zoo.DYNAMIC_SHAPES:
        pytest.skip(f"{name} has no dynamic-shape variant")
    model, inputs = zoo.MODELS[name]()
    shapes = zoo.DYNAMIC_SHAPES[name]() if dynamic else None
    edge = to_edge(torch.export.export(model, inputs, dynamic_shapes=shapes))
    assert edge.transform([ExportPass()]).to_executorch().buffer == edge.to_executorch().buffer


def test_deserialize_pte_binary_exposes_named_data_and_refuses_disagreeing_extras():
    from executorch.exir import schema as S
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary
    from executorch.exir.error import SerializeError

    plain = deserialize_pte_binary(_edge().to_executorch().buffer)
    assert plain.named_data is None and plain.mutable_data is None
    program = plain.program
    program.segment_data = [b"", b"weights!"]
    program.named_data = [S.NamedData(key="w", segment_index=1)]
    data = serialize_pte_binary(program)
    pte = deserialize_pte_binary(data)
    named = pte.named_data
    assert {k: bytes(named.buffers[e.buffer_index]) for k, e in named.pte_data.items()} == {"w": b"weights!"}
    assert serialize_pte_binary(pte) == data
    named.buffers[0] = b"other!!!"
    with pytest.raises(SerializeError, match="differ from the data"):
        serialize_pte_binary(pte)


def test_internal_assert_raises_internal_error_only_when_the_condition_fails():
    from executorch.exir.error import InternalError, internal_assert

    internal_assert(True, "fine")
    with pytest.raises(InternalError, match="broken invariant"):
        internal_assert(False, "broken invariant")


def test_export_pass_over_a_module_graph_places_attributes_where_used_and_names_ops_by_packet():
    # Vendor quantizers retrace `ExportedProgram.module()` graphs (get_attr weights) through ExportPass
    # before pt2e, and convert_pt2e numbers its frozen parameters in the order the new graph uses them:
    # the weights move to their first use as `_param_constantN`, and torch operators keep their short
    # names, as upstream's retrace leaves them.
    from executorch.exir.pass_base import ExportPass

    class ConvConvLinear(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1, self.c2, self.l = torch.nn.Conv2d(3, 8, 3), torch.nn.Conv2d(8, 8, 3), torch.nn.Linear(8, 4)

        def forward(self, x):
            return self.l(self.c2(torch.relu(self.c1(x))).mean((2, 3)))

    torch.manual_seed(0)
    model, x = ConvConvLinear().eval(), torch.randn(1, 3, 8, 8)
    gm = torch.export.export(model, (x,)).module()
    for node in [n for n in gm.graph.nodes if n.op == "call_module" and not n.users]:
        gm.graph.erase_node(node)  # export's input guard
    gm.recompile()
    assert [n.op for n in gm.graph.nodes][:6] == ["get_attr"] * 6
    out = ExportPass()(gm).graph_module
    assert [(n.op, n.name) for n in out.graph.nodes] == [
        ("placeholder", "x"), ("get_attr", "_param_constant0"), ("get_attr", "_param_constant1"),
        ("call_function", "conv2d"), ("call_function", "relu"), ("get_attr", "_param_constant2"),
        ("get_attr", "_param_constant3"), ("call_function", "conv2d_1"), ("call_function", "mean"),
        ("get_attr", "_param_constant4"), ("get_attr", "_param_constant5"), ("call_function", "linear"),
        ("output", "output")]
    assert out._param_constant0 is model.c1.weight and not hasattr(out, "c1_weight")
    with torch.no_grad():
        torch.testing.assert_close(out(x), model(x))
