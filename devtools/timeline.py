"""An ETDump as a Chrome/Perfetto trace: Trace Event Format JSON, one track per event block.

Every profile event the Inspector reports becomes a complete ("X") event on the track of the block
it was recorded in, timestamped in microseconds from the first event of the dump. Events nest by
time: a kernel inside its instruction, a delegate's own nodes inside their DELEGATE_CALL. Open the
file in https://ui.perfetto.dev or chrome://tracing.
"""

from __future__ import annotations

import json
import os
from typing import Optional, Union

from executorch.devtools.inspector import Inspector

__all__ = ["build_trace", "write_trace"]

PID = 1


def _category(event) -> str:
    if event.is_delegated_op:
        return "delegate"
    if event.name.startswith("native_call_"):
        return "kernel"
    if event.name.endswith("_CALL"):
        return "instruction"
    return "method"


def _us(ticks: int, t0: int, tick_ns: float) -> float:
    # Rounded to whole nanoseconds, so a reader recovers the recorded ticks exactly.
    return round((ticks - t0) * tick_ns) / 1000.0


def _args(block_name: str, event) -> dict:
    args = {"event_block": block_name}
    if event._instruction_id is not None:
        args["instruction_id"] = event._instruction_id
    if event.op_types:
        args["op_types"] = list(event.op_types)
    if event.debug_handles is not None:
        args["debug_handle"] = event.debug_handles
    if event.delegate_debug_identifier is not None:
        args["delegate_debug_identifier"] = event.delegate_debug_identifier
    if event.delegate_backend_name:
        args["delegate_backend_name"] = event.delegate_backend_name
    return args


def _nest(track: list) -> None:
    """Sort one track's events so parents come first and clip any event that overruns its parent
    (a backend's clock may disagree with the runtime's): a track then nests strictly."""
    track.sort(key=lambda e: (e["ts"], -e["dur"]))
    stack: list = []
    for e in track:
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
            stack.pop()
        if stack:
            parent_end = stack[-1]["ts"] + stack[-1]["dur"]
            if e["ts"] + e["dur"] > parent_end:
                e["args"]["recorded_dur_us"] = e["dur"]
                e["dur"] = round((parent_end - e["ts"]) * 1000) / 1000.0
        stack.append(e)


def build_trace(inspector: Inspector, process_name: str = "executorch") -> dict:
    """The trace of every profile event `inspector` holds, as a JSON-ready dict."""
    blocks = inspector._etdump.run_data
    samples = [(b.name, e, run, start, end) for b in inspector.event_blocks for e in b.events
               for run, start, end in zip(e._runs, e.start_time, e._ends)]
    t0 = min((s[3] for s in samples), default=0)
    tracks: dict = {run: [] for run in range(len(blocks))}
    for block_name, e, run, start, end in samples:
        ts = _us(start, t0, inspector._tick_ns)
        tracks[run].append({"name": e.name, "cat": _category(e), "ph": "X", "ts": ts,
                            "dur": max(0.0, round((_us(end, t0, inspector._tick_ns) - ts) * 1000) / 1000.0),
                            "pid": PID, "tid": run, "args": _args(block_name, e)})
    meta = [{"name": "process_name", "ph": "M", "pid": PID, "tid": 0, "args": {"name": process_name}}]
    events: list = []
    for run, track in tracks.items():
        meta.append({"name": "thread_name", "ph": "M", "pid": PID, "tid": run,
                     "args": {"name": f"{blocks[run].name} #{run}"}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": PID, "tid": run, "args": {"sort_index": run}})
        _nest(track)
        events.extend(track)
    return {"traceEvents": meta + events, "displayTimeUnit": "ms"}


def write_trace(etdump_path: Union[str, os.PathLike], output: Union[str, os.PathLike],
                etrecord: Optional[Union[str, os.PathLike, object]] = None,
                source_time_scale: str = "ns") -> dict:
    """Read `etdump_path` (with its ETRecord, for op types) and write the trace to `output`
    atomically; returns the trace."""
    from executorch.exir._serialize._atomic import write_chunks

    inspector = Inspector(etdump_path=etdump_path, etrecord=etrecord, source_time_scale=source_time_scale)
    trace = build_trace(inspector, process_name=os.path.basename(os.fspath(etdump_path)))
    write_chunks(output, [json.dumps(trace, indent=None).encode("utf-8")])
    return trace
