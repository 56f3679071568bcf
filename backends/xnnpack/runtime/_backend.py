"""`XnnpackBackend` for the Python runtime: a payload checked and compiled once at init, run as torch steps."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from executorch.backends.xnnpack.runtime._nodes import Compiler
from executorch.backends.xnnpack.runtime._values import STORAGE, Value, ValueTable, bad
from executorch.backends.xnnpack.serialization.event_names import event_names
from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import deserialize_xnnpack_binary
from executorch.exir.error import SerializeError
from executorch.runtime import _layout, python_backend
from executorch.runtime._errors import ExecuTorchError, InvalidProgramError
from executorch.runtime._python import _kernels
from executorch.runtime._python._method import now



@dataclass
class _Plan:
    env: list  # one slot per value; constants filled in
    inputs: list[Value]
    outputs: list[Value]
    steps: list  # (node index, kind, step, output values)
    event_names: list  # per node index: the name its profiling event carries (`Conv2d #1`)


class XnnpackBackend(python_backend.PythonBackend):
    """Runs XNNPACK payloads (`XH00` header or a bare `XN00`/`XN01` flatbuffer) with torch ops.

    As in the published runtime, a value's external id is its position in the DelegateCall's
    arguments (the partition's inputs, then its outputs), and each tensor is seen in its memory
    order (a channels-last argument is NHWC).
    """

    def init(self, processed, compile_specs, named_data) -> _Plan:
        # Compile specs are a bag the partitioner may share with other backends: none is read here.
        try:
            payload = deserialize_xnnpack_binary(processed)
        except SerializeError as e:
            raise InvalidProgramError(f"XnnpackBackend: {e}") from None
        try:
            table = ValueTable(payload, named_data or {})
            compiler = Compiler(table)
            steps = []
            for i, node in enumerate(payload.graph.xnodes):
                kind, step, ins, outs = compiler.compile(i, node)
                steps.append((i, kind, step, ins, outs))
        except ExecuTorchError:
            raise
        except Exception as e:  # noqa: BLE001 - any other fault is the payload's
            raise bad(f"{type(e).__name__}: {_first_line(e)}") from None
        env = [None] * len(table.values)
        for v in table.values:
            env[v.slot] = v.const
        return _Plan(env, table.inputs, table.outputs, _check_written(table, steps),
                     event_names(payload.graph.xnodes))

    def execute_traced(self, handle: _Plan, args: list, tracer) -> None:
        """`execute`, each node a delegate event inside the DelegateCall's (as the published runtime names them)."""
        self.execute(handle, args, tracer)

    def execute(self, handle: _Plan, args: list, tracer=None) -> None:
        env = list(handle.env)
        for v in handle.inputs:
            env[v.slot] = _memory_order(_arg(args, v), v)
        for i, kind, step, outs in handle.steps:
            try:
                if tracer is None:
                    step(env)
                else:
                    start = now()
                    step(env)
                    tracer.profile_delegate(handle.event_names[i], start, now())
            except ExecuTorchError:
                raise
            except Exception as e:  # noqa: BLE001 - a shape the graph cannot take
                raise ExecuTorchError(f"XnnpackBackend: node {i} ({kind}) failed: {_first_line(e)}") from e
            for v in outs:
                _check_shape(env[v.slot], v, i, kind)
        for v in handle.outputs:
            _write_output(_arg(args, v), env[v.slot], v)


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _check_written(table: ValueTable, steps: list) -> list:
    """Every value a node reads is an input, a constant or an earlier node's output; outputs are written.
    Returns the steps as (node index, kind, step, values written)."""
    ready = {v.id for v in table.values if v.is_input or v.const is not None}
    for i, kind, _step, ins, outs in steps:
        for v in ins:
            if v.id not in ready:
                raise bad(f"node {i} ({kind}) reads {v.describe()} before any node writes it")
        for v in outs:
            if v.const is not None or v.is_input:
                raise bad(f"node {i} ({kind}) writes {v.describe()}, which is an input or a constant")
            ready.add(v.id)
    for v in table.outputs:
        if v.id not in ready:
            raise bad(f"output {v.describe()} is never written")
    return [(i, kind, step, outs) for i, kind, step, _ins, outs in steps]


def _arg(args: list, v: Value) -> torch.Tensor:
    if v.external_id >= len(args) or not isinstance(args[v.external_id], torch.Tensor):
        raise ExecuTorchError(
            f"XnnpackBackend: {v.describe()} is external value {v.external_id}, but the DelegateCall passes "
            f"{len(args)} values{'' if v.external_id >= len(args) else ' and that one is not a tensor'}; "
            "the file is corrupt, re-export it")
    return args[v.external_id]


def _memory_order(t: torch.Tensor, v: Value) -> torch.Tensor:
    if t.dim() == 0 and v.dims == (1,):  # XNNPACK holds a 0-dim tensor as one element
        t = t.reshape(1)
    if t.dim() != len(v.dims) or t.dtype != STORAGE[v.dtype]:
        raise ExecuTorchError(
            f"XnnpackBackend: input {v.describe()} got a {t.dtype} tensor of shape {list(t.shape)}; the graph "
            f"takes {STORAGE[v.dtype]} with {len(v.dims)} dims")
    order = _layout.dim_order_of(t)
    return t.permute(order) if order != list(range(t.dim())) else t


def _check_shape(r, v: Value, i: int, kind: str) -> None:
    t = r[0] if isinstance(r, tuple) else r
    if t.dim() != len(v.dims) or any(a > b for a, b in zip(t.shape, v.dims)):
        raise ExecuTorchError(
            f"XnnpackBackend: node {i} ({kind}) produced shape {list(t.shape)} for {v.describe()}, beyond its "
            "declared dims; the file is corrupt or the inputs exceed its bounds")


def _write_output(slot: torch.Tensor, r, v: Value) -> None:
    if isinstance(r, tuple):
        raise ExecuTorchError(f"XnnpackBackend: output {v.describe()} is dynamically quantized, which no "
                              "program output can hold; re-export the model")
    if slot.dim() == 0 and r.shape == (1,):
        slot.copy_(r.reshape(()))
        return
    if slot.dim() != r.dim():
        raise ExecuTorchError(f"XnnpackBackend: output {v.describe()} has {r.dim()} dims, its program tensor "
                              f"{slot.dim()}; the file is corrupt, re-export it")
    order = _layout.dim_order_of(slot)
    sizes = [0] * r.dim()
    for j, d in enumerate(order):
        sizes[d] = r.shape[j]
    if list(slot.shape) != sizes:
        _kernels.resize(slot, sizes)
    slot.permute(order).copy_(r)


python_backend.register_backend("XnnpackBackend", XnnpackBackend())
