"""`pretty_print`: a `Program` (or any part of one) printed field by field, as its schema names them; `inspect_node`."""

from __future__ import annotations

import dataclasses
import enum
import sys
from typing import Any, Optional, TextIO

from torch import fx

from executorch.exir import schema as s
from executorch.exir.error import ExportError, ExportErrorType

_MAX_BYTES_SHOWN = 32


def pretty_print(obj: Any, indent: int = 0, out: Optional[TextIO] = None) -> None:
    """Print `obj` (a schema dataclass, list, enum or scalar) with nested fields indented."""
    if isinstance(obj, fx.GraphModule):
        raise ExportError(
            ExportErrorType.INVALID_INPUT_TYPE,
            "pretty_print() takes a Program or a part of one, not a GraphModule; print gm.graph instead",
        )
    _print(obj, indent, out or sys.stdout)
    print(file=out or sys.stdout)


def print_program(program: s.Program, out: Optional[TextIO] = None) -> None:
    """Print `program` condensed: per method its inputs, outputs and one line per instruction."""
    out = out or sys.stdout
    for plan in program.execution_plan:
        out.write(f"method {plan.name}: {len(plan.values)} values, inputs {plan.inputs}, outputs {plan.outputs}, "
                  f"planned memory {plan.non_const_buffer_sizes[1:]} bytes\n")
        for c, chain in enumerate(plan.chains):
            for i, instr in enumerate(chain.instructions):
                out.write(f"  {c}.{i}: {_instruction(plan, instr.instr_args)}\n")


def inspect_node(graph: fx.Graph, node: fx.Node) -> str:
    """The graph with `-->` before `node`'s line, then the node's spec and the stack trace that made it."""
    lines = [f"{'-->' if n is node else '   '} {n.format_node()}" for n in graph.nodes]
    text = ("Here is the node in the graph module:\ngraph():\n" + "\n".join(lines)
            + f"\nThis node {node} has metadata of:\n")
    if "spec" in node.meta:
        text += f"The node spec:\n{node.meta['spec']}\n"
    if node.meta.get("stack_trace"):
        text += f"The node stacktrace:\nTraceback (most recent call last):\n{node.meta['stack_trace'].rstrip()}\n"
    return text


def _instruction(plan: s.ExecutionPlan, args: s.InstructionArguments) -> str:
    if isinstance(args, s.KernelCall):
        op = plan.operators[args.op_index]
        return f"{op.name}{'.' + op.overload if op.overload else ''}{tuple(args.args)}"
    if isinstance(args, s.DelegateCall):
        return f"delegate {plan.delegates[args.delegate_index].id}{tuple(args.args)}"
    if isinstance(args, s.MoveCall):
        return f"move {args.move_from} -> {args.move_to}"
    if isinstance(args, s.JumpFalseCall):
        return f"jump to {args.destination_instruction} if not value {args.cond_value_index}"
    return f"free value {args.value_index}"


def _print(obj: Any, indent: int, out: TextIO) -> None:
    pad = "  " * (indent + 1)
    if isinstance(obj, enum.Enum):
        out.write(f"{type(obj).__name__}.{obj.name}")
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        data = bytes(obj[:_MAX_BYTES_SHOWN])
        more = f"... ({len(obj)} bytes)" if len(obj) > _MAX_BYTES_SHOWN else ""
        out.write(f"{data!r}{more}")
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out.write(f"{type(obj).__name__}(\n")
        for f in dataclasses.fields(obj):
            out.write(f"{pad}{f.name}=")
            _print(getattr(obj, f.name), indent + 1, out)
            out.write(",\n")
        out.write("  " * indent + ")")
    elif isinstance(obj, (list, tuple)):
        if not obj:
            out.write("[]")
            return
        out.write("[\n")
        for item in obj:
            out.write(pad)
            _print(item, indent + 1, out)
            out.write(",\n")
        out.write("  " * indent + "]")
    else:
        out.write(repr(obj))
