"""Device placement around delegates: a delegate whose compile specs name a `target_device` (such as
`cuda:0`) reads and writes device memory, so its inputs are copied there first (`et_copy._h2d_copy`)
and its results copied back (`et_copy._d2h_copy`) for the host code that reads them.

Each node whose value lives on a device carries `node.meta["et_device"] = (DeviceType, index)`;
memory planning gives those values arenas of their own and the emitter writes the device into each
tensor and into the plan's `non_const_buffer_device`. A copy back to the host that only feeds another
delegate on the same device is dropped: that delegate reads the first one's result where it is.
"""

from __future__ import annotations

import operator
from typing import Optional

import torch
from torch import fx

from executorch.exir import schema
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.error import ExportError
from executorch.exir.passes import _device_copy_ops_registry as copies
from executorch.exir.passes.propagate_device_config import PropagateDeviceConfig

__all__ = ["TARGET_DEVICE_COMPILE_SPEC_KEY", "PropagateDeviceConfig", "PropagateDevicePass", "device_of",
           "names_a_device", "parse_device", "propagate_device"]

# The compile spec a partitioner adds to a delegate that runs on a device; its value names the
# device, e.g. b"cuda:0" (type case-insensitive, index 0 when left out).
TARGET_DEVICE_COMPILE_SPEC_KEY = "target_device"
DEVICE_META = "et_device"
CPU = (schema.DeviceType.CPU, 0)


def parse_device(value: bytes) -> tuple[schema.DeviceType, int]:
    """(device type, index) of a `target_device` value such as b"cuda:0"; ExportError if unknown."""
    text = bytes(value).decode("utf-8", errors="replace").strip()
    kind, _, index = text.lower().partition(":")
    known = {t.name.lower(): t for t in schema.DeviceType}
    if kind not in known or (index and not index.isdigit()) or int(index or 0) > 127:
        raise ExportError(
            f"compile spec {TARGET_DEVICE_COMPILE_SPEC_KEY}={text!r} names no device this program format knows; "
            f"use one of {', '.join(sorted(known))}, optionally with an index 0..127 (e.g. 'cuda:0')")
    return known[kind], int(index or 0)


def device_of(node: fx.Node) -> tuple[schema.DeviceType, int]:
    """Where `node`'s value lives: (DeviceType, index), the host unless the pass placed it."""
    return node.meta.get(DEVICE_META, CPU)


def _target_device(gm: fx.GraphModule, call: fx.Node) -> Optional[tuple[schema.DeviceType, int]]:
    lowered = getattr(gm, call.args[0].target)
    for spec in lowered.compile_specs:
        if spec.key == TARGET_DEVICE_COMPILE_SPEC_KEY:
            device = parse_device(spec.value)
            return None if device[0] == schema.DeviceType.CPU else device
    return None


def names_a_device(gm: fx.GraphModule, method: str) -> bool:
    """Whether a delegate of the method's graph names a device other than the host (refused inside
    control flow, whose branches run with host memory only)."""
    from executorch.exir.passes.edge import graph_modules

    found = False
    for sub in graph_modules(gm):
        for n in sub.graph.nodes:
            if n.op != "call_function" or n.target is not executorch_call_delegate or _target_device(sub, n) is None:
                continue
            if sub is not gm:
                raise ExportError(
                    f"method '{method}': delegate '{n.name}' names a {TARGET_DEVICE_COMPILE_SPEC_KEY} inside a "
                    "control-flow branch, where only host memory is planned; partition it outside torch.cond/map/scan "
                    f"or drop the {TARGET_DEVICE_COMPILE_SPEC_KEY} compile spec")
            found = True
    return found


def _copy_node(graph: fx.Graph, op, src: fx.Node, device) -> fx.Node:
    node = graph.call_function(op, (src,))
    node.meta["val"] = src.meta.get("val")
    node.meta[DEVICE_META] = device
    return node


def _is_tensor(node) -> bool:
    return isinstance(node, fx.Node) and isinstance(node.meta.get("val"), torch.Tensor)


def propagate_device(gm: fx.GraphModule, copy: bool = True) -> bool:
    """Place the values of delegates on their target devices; True if any delegate names one.

    With `copy` (ExecuTorch's `enable_non_cpu_memory_planning`), inputs are copied to the device and
    results back, each side planned in its own memory. Without it the delegate's inputs and results
    are only marked with the device and stay in host memory, as ExecuTorch's legacy mode does."""
    graph = gm.graph
    placed: dict[fx.Node, tuple] = {}
    for call in [n for n in graph.nodes if n.op == "call_function" and n.target is executorch_call_delegate]:
        device = _target_device(gm, call)
        if device is None:
            continue
        placed[call] = device
        call.meta[DEVICE_META] = device
        args = list(call.args)
        for i, arg in enumerate(args[1:], start=1):
            if not _is_tensor(arg):
                continue
            if not copy:
                arg.meta[DEVICE_META] = device
                continue
            with graph.inserting_before(call):
                args[i] = _copy_node(graph, copies.h2d_copy, arg, device)
        call.args = tuple(args)
    if not placed:
        return False
    for call, device in placed.items():
        results = [u for u in call.users if u.target is operator.getitem] if isinstance(
            call.meta.get("val"), (list, tuple)) else [call]
        for result in results:
            result.meta[DEVICE_META] = device
            if not copy:
                continue
            with graph.inserting_after(result):
                back = _copy_node(graph, copies.d2h_copy, result, CPU)
            result.replace_all_uses_with(back, delete_user_cb=lambda user, b=back: user is not b)
    if copy:
        _drop_round_trips(graph)
    graph.lint()
    gm.recompile()
    return True


def _drop_round_trips(graph: fx.Graph) -> None:
    """`_h2d_copy(_d2h_copy(x))` back to x's own device: the reader takes x itself."""
    for node in list(graph.nodes):
        if node.target is not copies.h2d_copy:
            continue
        back = node.args[0]
        if back.target is copies.d2h_copy and device_of(back.args[0]) == device_of(node):
            node.replace_all_uses_with(back.args[0])
            graph.erase_node(node)
            if not back.users:
                graph.erase_node(back)


class PropagateDevicePass:
    """`propagate_device` as a pass object (ExecuTorch's name), configured like its namesake."""

    def __init__(self, skip_h2d_for_method_inputs: bool = False, skip_d2h_for_method_outputs: bool = False,
                 enable_non_cpu_memory_planning: bool = True) -> None:
        for name, value in (("skip_h2d_for_method_inputs", skip_h2d_for_method_inputs),
                            ("skip_d2h_for_method_outputs", skip_d2h_for_method_outputs)):
            if value:
                raise ExportError(
                    f"PropagateDevicePass({name}=True) is not supported: it leaves device memory to the caller, "
                    "which the runtimes here cannot bind (inputs and outputs are always planned); leave it False")
        self.enable_non_cpu_memory_planning = bool(enable_non_cpu_memory_planning)

    def __call__(self, graph_module: fx.GraphModule) -> fx.GraphModule:
        propagate_device(graph_module, self.enable_non_cpu_memory_planning)
        return graph_module
