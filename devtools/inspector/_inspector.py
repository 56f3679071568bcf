"""`Inspector(etdump_path, etrecord, debug_buffer_path)`: event blocks, a table per event, numeric gaps.

Profile events are grouped, per block, by (name, chain, instruction, delegate id) across runs, as
the published Inspector groups them; `raw` holds each run's duration in milliseconds (ticks are
nanoseconds). pandas and tabulate are needed only for the tables (`pip install executorch[devtools]`).
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Optional, Union

import torch

from executorch.devtools.etdump import schema_flatcc as E
from executorch.exir.dialects.edge._ops import aten_op
from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

COLUMNS = ["event_block_name", "event_name", "raw", "p10 (ms)", "p50 (ms)", "p90 (ms)", "avg (ms)", "min (ms)",
           "max (ms)", "op_types", "delegate_debug_identifier", "stack_traces", "module_hierarchy",
           "is_delegated_op", "delegate_backend_name", "debug_data", "start_time"]
_TORCH_DTYPES = {6: torch.float32, 7: torch.float64, 5: torch.float16, 15: torch.bfloat16, 4: torch.int64,
                 3: torch.int32, 2: torch.int16, 1: torch.int8, 0: torch.uint8, 11: torch.bool}


def _pandas():
    try:
        import pandas
    except ImportError:
        raise ImportError("the Inspector's tables need pandas and tabulate: pip install executorch[devtools]") from None
    return pandas


@dataclasses.dataclass
class Event:
    name: str
    perf_data: list  # durations in ms, one per run
    start_time: list
    op_types: list = dataclasses.field(default_factory=list)
    delegate_debug_identifier: Optional[Union[int, str]] = None
    is_delegated_op: bool = False
    delegate_backend_name: Optional[str] = None
    debug_handles: Optional[int] = None
    debug_data: list = dataclasses.field(default_factory=list)
    _instruction_id: Optional[int] = None
    stack_traces: dict = dataclasses.field(default_factory=dict)
    module_hierarchy: dict = dataclasses.field(default_factory=dict)
    _ends: list = dataclasses.field(default_factory=list)
    _runs: list = dataclasses.field(default_factory=list)  # per sample: its block's index in the ETDump

    def stats(self) -> list:
        d = sorted(self.perf_data)
        if not d:
            return [None] * 6
        q = lambda p: d[min(len(d) - 1, int(round(p * (len(d) - 1))))]  # noqa: E731
        return [q(0.1), q(0.5), q(0.9), statistics.fmean(d), d[0], d[-1]]


@dataclasses.dataclass
class EventBlock:
    name: str
    events: list


class Inspector:
    def __init__(self, etdump_path=None, etrecord=None, debug_buffer_path=None, etdump_data: Optional[bytes] = None,
                 source_time_scale: str = "ns", target_time_scale: str = "ms", **_unused) -> None:
        if etdump_path is None and etdump_data is None:
            raise ValueError("Inspector needs etdump_path (the .etdp file the runtime wrote) or etdump_data")
        data = etdump_data if etdump_data is not None else Path(etdump_path).read_bytes()
        self._etdump = deserialize_from_etdump_flatcc(data)
        scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
        if source_time_scale not in scale or target_time_scale not in scale:
            raise ValueError(f"time scales are {source_time_scale!r} -> {target_time_scale!r}; each must be one of "
                             f"{', '.join(scale)}")
        self._tick_ns = scale[source_time_scale]  # nanoseconds per ETDump tick
        self._to_ms = scale[source_time_scale] / scale[target_time_scale] * 1.0
        self._to_ms = scale[source_time_scale] / scale["ms"] if target_time_scale == "ms" else self._to_ms
        self._debug = Path(debug_buffer_path).read_bytes() if debug_buffer_path else b""
        if etrecord is not None and not hasattr(etrecord, "_debug_handle_map"):
            from executorch.devtools.etrecord import parse_etrecord

            etrecord = parse_etrecord(etrecord)
        self._etrecord = etrecord
        self.event_blocks = self._blocks()

    # ---- joining ------------------------------------------------------------------------------

    def _graph(self):
        edge = getattr(self._etrecord, "edge_dialect_program", None)
        return edge.get("forward") if isinstance(edge, dict) else edge

    def _nodes_by_handle(self) -> dict:
        """Operator nodes by debug handle, those inside delegated partitions included."""
        out: dict = {}
        graph = self._graph()
        todo = [graph.graph_module] if graph is not None else []
        while todo:
            gm = todo.pop()
            for node in gm.graph.nodes:
                if node.op == "get_attr":
                    original = getattr(getattr(gm, node.target, None), "original_module", None)
                    if original is not None:
                        todo.append(original.graph_module)
                elif (node.op == "call_function" and "debug_handle" in node.meta
                      and "call_delegate" not in str(node.target)):
                    out.setdefault(node.meta["debug_handle"], []).append(node)
        return out

    def _tensor(self, t: E.Tensor) -> Optional[torch.Tensor]:
        dtype = _TORCH_DTYPES.get(int(t.scalar_type))
        if dtype is None:
            return None
        n = 1
        for s in t.sizes:
            n *= s
        nbytes = n * torch.empty((), dtype=dtype).element_size()
        if t.offset is None or t.offset + nbytes > len(self._debug):
            return None
        return torch.frombuffer(bytearray(self._debug[t.offset:t.offset + nbytes]), dtype=dtype).reshape(t.sizes)

    def _blocks(self) -> list:
        handles = (self._etrecord._debug_handle_map or {}).get("forward", {}) if self._etrecord else {}
        delegates = (self._etrecord._delegate_map or {}).get("forward", {}) if self._etrecord else {}
        nodes = self._nodes_by_handle()
        grouped: dict = {}
        for run, block in enumerate(self._etdump.run_data):
            events = grouped.setdefault(block.name, {})
            debug: dict = {}
            for ev in block.events or ():
                d = ev.debug_event
                if d is not None and d.debug_entry.output is None and d.debug_entry.tensor is not None:
                    debug.setdefault(d.instruction_id, []).append(self._tensor(d.debug_entry.tensor))
                p = ev.profile_event
                if p is None:
                    continue
                did = p.delegate_debug_id_str or (p.delegate_debug_id_int if p.delegate_debug_id_int != -1 else None)
                name = p.name if did is None else str(did)
                key = (name, p.chain_index, p.instruction_id, did)
                e = events.get(key)
                if e is None:
                    e = events[key] = Event(name, [], [], delegate_debug_identifier=did,
                                            is_delegated_op=did is not None,
                                            _instruction_id=p.instruction_id if p.chain_index >= 0 else None)
                    handle = handles.get(str(p.instruction_id)) if p.chain_index >= 0 else None
                    if isinstance(handle, list):  # a DelegateCall: the handles of the partition's nodes
                        handle = handle[0] if len(handle) == 1 else tuple(handle)
                    entry = delegates.get(str(p.instruction_id)) if p.chain_index >= 0 else None
                    if entry is not None:
                        e.delegate_backend_name = entry.get("name")
                        if did is not None:  # a delegate's own event: its handles come from the delegate's map
                            inner = (entry.get("delegate_map") or {}).get(str(did))
                            handle = (inner[0] if len(inner) == 1 else tuple(inner)) if inner else None
                    e.debug_handles = handle
                    if handle is not None:
                        found = [n for h in (handle if isinstance(handle, tuple) else (handle,))
                                 for n in nodes.get(h, [])]
                        e.op_types = [str(aten_op(n.target)) for n in found]  # "aten.add.Tensor"
                        e.stack_traces = {n.name: n.meta.get("stack_trace") for n in found}
                e.perf_data.append((p.end_time - p.start_time) * self._to_ms)
                e.start_time.append(p.start_time)
                e._ends.append(p.end_time)
                e._runs.append(run)
                if did is None and debug.get(p.instruction_id) and p.chain_index >= 0:
                    e.debug_data = [t for t in debug[p.instruction_id] if t is not None]
        return [EventBlock(name, list(events.values())) for name, events in grouped.items()]

    # ---- tables ------------------------------------------------------------------------------

    def to_dataframe(self, include_units: bool = True, include_delegate_debug_data: bool = False):
        rows = [[b.name, e.name, e.perf_data, *e.stats(), e.op_types, e.delegate_debug_identifier, e.stack_traces,
                 e.module_hierarchy, e.is_delegated_op, e.delegate_backend_name, e.debug_data, e.start_time]
                for b in self.event_blocks for e in b.events]
        return _pandas().DataFrame(rows, columns=COLUMNS)

    def print_data_tabular(self, file=None, include_units: bool = True,
                           include_delegate_debug_data: bool = False) -> None:
        df = self.to_dataframe()[["event_block_name", "event_name", "p50 (ms)", "avg (ms)", "op_types",
                                  "is_delegated_op", "delegate_backend_name"]]
        try:
            from tabulate import tabulate
        except ImportError:
            raise ImportError("print_data_tabular needs tabulate: pip install executorch[devtools]") from None
        print(tabulate(df, headers="keys", tablefmt="fancy_grid", showindex=False), file=file)

    def save_data_to_tsv(self, file_path) -> None:
        self.to_dataframe().to_csv(file_path, sep="\t", index=False)

    def find_total_for_module(self, module_name: str) -> float:
        """Total average time (ms) of the kernel events whose nodes come from `module_name`."""
        total = 0.0
        nodes = self._nodes_by_handle()
        for block in self.event_blocks:
            for e in block.events:
                if e.name == "OPERATOR_CALL" or e.debug_handles is None or e.is_delegated_op:
                    continue
                if not e.name.startswith("native_call_"):
                    continue
                stacks = [n.meta.get("nn_module_stack") or {} for n in nodes.get(e.debug_handles, [])]
                if any(module_name in (str(k) + str(v)) for s in stacks for k, v in s.items()):
                    total += statistics.fmean(e.perf_data)
        return total

    def calculate_numeric_gap(self, distance: str = "MSE"):
        """Per debug handle: the edge program's output (run on the ETRecord's representative inputs)
        against the runtime's logged output, by MSE, L1 or SNR (dB)."""
        metrics = {"MSE": lambda a, b: float(torch.mean((a - b) ** 2)),
                   "L1": lambda a, b: float(torch.sum(torch.abs(a - b))),
                   "SNR": lambda a, b: float(10 * torch.log10(torch.sum(a ** 2)
                                                               / torch.sum((a - b) ** 2).clamp_min(1e-30)))}
        if distance.upper() not in metrics:
            raise ValueError(f"distance {distance!r} is not one of MSE, L1, SNR")
        if self._etrecord is None or not self._etrecord._representative_inputs:
            raise ValueError("calculate_numeric_gap needs an ETRecord with representative inputs "
                             "(ETRecord.update_representative_inputs)")
        aot = self._aot_outputs(self._etrecord._representative_inputs[0])
        rows = []
        for block in self.event_blocks[-1:]:
            # A handle shared by a decomposition's pieces is compared once, at its last piece: the
            # graph's output for the handle is that of its last node.
            last: dict = {}
            for e in block.events:
                if e.name.startswith("native_call_") and e.debug_data and e.debug_handles in aot:
                    if e.debug_handles not in last or e._instruction_id > last[e.debug_handles]._instruction_id:
                        last[e.debug_handles] = e
            for e in block.events:
                if e.name == "DELEGATE_CALL" and e.debug_data and isinstance(e.debug_handles, (int, tuple)):
                    # A delegate logs its arguments, outputs last: its last output is that of the last of
                    # its nodes (in graph order) whose edge-program output has the same shape.
                    r = e.debug_data[-1]
                    handles = e.debug_handles if isinstance(e.debug_handles, tuple) else (e.debug_handles,)
                    match = [h for h in handles if h in aot and aot[h].shape == r.shape]
                    if match:
                        a = aot[match[-1]]
                        gap = metrics[distance.upper()](a.float().reshape(-1), r.float().reshape(-1))
                        rows.append([handles, list(e.op_types), a, [e.name], handles, r, [gap]])
                    continue
                if last.get(e.debug_handles) is not e:
                    continue
                a, r = aot[e.debug_handles].float(), e.debug_data[-1].float()
                gap = (metrics[distance.upper()](a.reshape(-1), r.reshape(-1)) if a.numel() == r.numel()
                       else float("nan"))
                rows.append([(e.debug_handles,), [n for n in e.op_types], a, [e.name], (e.debug_handles,), r, [gap]])
        return _pandas().DataFrame(rows, columns=["aot_debug_handle", "aot_ops", "aot_intermediate_output",
                                                  "runtime_ops", "runtime_debug_handle", "runtime_intermediate_output",
                                                  "gap"])

    def _aot_outputs(self, inputs) -> dict:
        """Each debug handle's last node output, running the edge program with torch."""
        graph = self._graph()
        module = graph.module()
        seen: dict = {}
        handles = {n.name: n.meta.get("debug_handle") for n in graph.graph.nodes if n.op == "call_function"}

        class _Capture(torch.fx.Interpreter):
            def run_node(self, n):
                out = super().run_node(n)
                h = handles.get(n.name)
                if h is not None and isinstance(out, torch.Tensor):
                    seen[h] = out.detach()
                return out

        with torch.no_grad():
            _Capture(module).run(*inputs)
        return seen
