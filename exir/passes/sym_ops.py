"""Size arithmetic in the forms ExecuTorch kernels take (`a != b` as `not (a == b)`, sizes as tensors)."""

from __future__ import annotations

import builtins
import operator

import torch
from torch import fx

from executorch.exir.error import ExportError
from executorch.exir.passes._graph import fake_mode_of, source_line


def _val(a):
    return a.meta.get("val") if isinstance(a, fx.Node) else a


def ne_as_not_eq(gm: fx.GraphModule) -> None:
    """`operator.ne` on sizes becomes `sym_not(eq)`: ExecuTorch runtimes (the published one too) have
    `executorch_prim::eq` and `sym_not` kernels but no `ne`."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not operator.ne:
            continue
        with gm.graph.inserting_before(node):
            eq = gm.graph.call_function(operator.eq, node.args)
            eq.meta = dict(node.meta)
            eq.meta["val"] = operator.eq(*(_val(a) for a in node.args))
            negated = gm.graph.call_function(torch.sym_not, (eq,))
            negated.meta = dict(node.meta)
        node.replace_all_uses_with(negated)
        gm.graph.erase_node(node)
        changed = True
    if changed:
        gm.recompile()


def round_to_int(gm: fx.GraphModule, method: str) -> None:
    """`round(a, None)` (how torch records `round(a)`) becomes `round(a)`, the prim kernel's one
    argument; rounding to digits has no prim kernel."""
    changed = False
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not builtins.round or len(node.args) < 2:
            continue
        if node.args[1] is not None:
            where = source_line(node)
            raise ExportError(
                f"method '{method}': round(..., {node.args[1]!r}) on a size (node '{node.name}'"
                f"{', from ' + where if where else ''}) has no ExecuTorch prim kernel; round to an integer, "
                "or compute it on a tensor")
        node.args = node.args[:1]
        changed = True
    if changed:
        gm.recompile()


_SYM_KINDS = (bool, int, float, torch.SymBool, torch.SymInt, torch.SymFloat)
# a sample of each kind, for torch's promotion of a tensor with a Python scalar of that kind
_SAMPLE = {torch.SymBool: True, torch.SymInt: 1, torch.SymFloat: 1.0}


def sizes_as_tensor_operands(gm: fx.GraphModule) -> None:
    """A size passed where an op's schema takes a Tensor (`x + n` records `aten.add.Tensor(x, n)` with
    `n` a SymInt) becomes a 0-dim tensor made at run time by `aten.scalar_tensor`. ExecuTorch kernels
    (the published runtime's too) read a Tensor slot as a tensor and abort on the Int a size is.
    The tensor has the dtype torch gives the op's first tensor operand with a Python scalar of the
    size's kind, so results keep their eager dtype; one per size and dtype, made before its first use."""
    made: dict[tuple[fx.Node, torch.dtype], fx.Node] = {}
    fake_mode = None
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        schema = node.target._schema
        ref = next((v for v in map(_val, node.args) if isinstance(v, torch.Tensor)), None)
        args, kwargs, changed = list(node.args), dict(node.kwargs), False
        for i, a in enumerate(schema.arguments):
            if i < len(args):
                given = args[i]
            elif a.name in kwargs:
                given = kwargs[a.name]
            else:
                continue
            if not (_takes_tensor(a.type) and isinstance(given, fx.Node) and isinstance(_val(given), _SYM_KINDS)):
                continue
            size = _val(given)
            sample = _SAMPLE.get(type(size), size)
            dtype = torch.result_type(ref, sample) if ref is not None else torch.tensor(sample).dtype
            if (given, dtype) not in made:
                fake_mode = fake_mode or _fake_mode(gm)
                with gm.graph.inserting_before(node):
                    wrapped = gm.graph.call_function(torch.ops.aten.scalar_tensor.default, (given,), {"dtype": dtype})
                for key in ("stack_trace", "nn_module_stack"):
                    if key in node.meta:
                        wrapped.meta[key] = node.meta[key]
                with fake_mode:
                    wrapped.meta["val"] = torch.empty((), dtype=dtype)
                made[given, dtype] = wrapped
            if i < len(args):
                args[i] = made[given, dtype]
            else:
                kwargs[a.name] = made[given, dtype]
            changed = True
        if changed:
            node.args, node.kwargs = tuple(args), kwargs
    if made:
        gm.recompile()


def _fake_mode(gm: fx.GraphModule):
    from torch._guards import detect_fake_mode
    from torch._subclasses.fake_tensor import FakeTensorMode

    return fake_mode_of(gm.graph) or detect_fake_mode([n.meta.get("val") for n in gm.graph.nodes]) or FakeTensorMode()


def _takes_tensor(ty: torch.Type) -> bool:
    if ty.kind() == "OptionalType":
        ty = ty.getElementType()
    return ty.kind() == "TensorType"
