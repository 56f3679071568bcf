"""`profile FILE.pte`: run a program N times with the event tracer on and report where the time goes."""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from executorch.cli.errors import CliError


@dataclass
class Row:
    """One timed event of a run: a kernel, a delegate call, or a node a delegate reported."""

    instruction: Optional[int]
    name: str
    runs_ms: list = field(default_factory=list)  # this event's time in each kept run (summed if it repeats)
    nested: bool = False  # a delegate's own node: its time is part of its DELEGATE_CALL's

    @property
    def p50(self) -> float:
        return statistics.median(self.runs_ms) if self.runs_ms else 0.0


@dataclass
class Profile:
    runtime: str
    method: str
    runs: int
    execute_ms: list  # Method::execute per kept run
    rows: list  # Row, in instruction order, nested rows after their call

    @property
    def total_p50(self) -> float:
        return statistics.median(self.execute_ms) if self.execute_ms else 0.0

    def top_ops(self) -> list:
        """(operator, calls per run, median ms per run, share of execute) for top-level events, largest first."""
        groups: dict = {}
        for r in self.rows:
            if r.nested:
                continue
            key = r.name[len("native_call_"):] if r.name.startswith("native_call_") else r.name
            groups.setdefault(key, []).append(r)
        out = []
        for key, rows in groups.items():
            per_run = [sum(r.runs_ms[i] for r in rows) for i in range(self.runs)]
            ms = statistics.median(per_run)
            out.append((key, len(rows), ms, ms / self.total_p50 if self.total_p50 else 0.0))
        return sorted(out, key=lambda t: -t[2])


def _delegate_names(pte: bytes, method: str) -> dict:
    """Instruction index -> backend id of each DelegateCall in `method`."""
    from executorch.exir import schema as S
    from executorch.exir._serialize import read_program

    plan = next((p for p in read_program(pte).execution_plan if p.name == method), None)
    if plan is None or not plan.chains:
        return {}
    return {pc: plan.delegates[i.instr_args.delegate_index].id
            for pc, i in enumerate(plan.chains[0].instructions) if isinstance(i.instr_args, S.DelegateCall)}


def collect(pte: bytes, inputs, iterations: int, warmup: int, method: str = "forward",
            data_path: Optional[Path] = None, runtime=None) -> Profile:
    """Run `method` warmup + iterations times with ETDump on; the kept runs' events, per instruction.
    `inputs` is the input list, or a function of the method's metadata that makes one; `runtime` is
    an `executorch.runtime.Runtime` (default: `Runtime.get()`)."""
    from executorch.devtools.inspector import Inspector
    from executorch.runtime import Runtime

    runtime = runtime or Runtime.get()
    program = runtime.load_program(pte, enable_etdump=True, data_path=data_path)
    loaded = program.load_method(method)
    if callable(inputs):
        inputs = inputs(loaded.metadata)
    for _ in range(warmup + iterations):
        loaded.execute(inputs)
    etdump, _ = program._handle.etdump_result()
    inspector = Inspector(etdump_data=etdump)
    executes = [i for i, b in enumerate(inspector._etdump.run_data) if b.name == "Execute"]
    kept = {run: n for n, run in enumerate(executes[warmup:])}
    backends = _delegate_names(pte, method)
    execute_ms = [0.0] * len(kept)
    rows: list = []
    for block in inspector.event_blocks:
        if block.name != "Execute":
            continue
        for e in block.events:
            times = [0.0] * len(kept)
            for run, ms in zip(e._runs, e.perf_data):
                if run in kept:
                    times[kept[run]] += ms
            if e.name == "Method::execute":
                execute_ms = times
            elif e.is_delegated_op:
                rows.append(Row(e._instruction_id, f"{e.name}", times, nested=True))
            elif e.name == "DELEGATE_CALL":
                rows.append(Row(e._instruction_id, f"DELEGATE_CALL {backends.get(e._instruction_id, '?')}", times))
            elif e.name != "OPERATOR_CALL":  # a kernel's instruction: its kernel event is the row
                rows.append(Row(e._instruction_id, e.name, times))
    rows.sort(key=lambda r: (r.instruction if r.instruction is not None else -1, r.nested))
    return Profile(runtime.backend, method, len(kept), execute_ms, rows)


def render(profile: Profile, top: int) -> str:
    total = profile.total_p50
    share = lambda ms: f"{100 * ms / total:5.1f}%" if total else "    -"  # noqa: E731
    lines = [f"{profile.method}: {profile.runs} runs on the {profile.runtime} runtime, median "
             f"{total:.3f} ms per run (min {min(profile.execute_ms, default=0):.3f}, "
             f"max {max(profile.execute_ms, default=0):.3f})", ""]
    width = max([len(r.name) + 2 * r.nested for r in profile.rows] + [5])
    lines.append(f"{'instr':>5}  {'event':<{width}}  {'p50 ms':>9}  {'min ms':>9}  {'max ms':>9}  {'share':>6}")
    for r in profile.rows:
        name = ("  " + r.name) if r.nested else r.name
        lines.append(f"{'' if r.instruction is None else r.instruction:>5}  {name:<{width}}  {r.p50:9.3f}  "
                     f"{min(r.runs_ms, default=0):9.3f}  {max(r.runs_ms, default=0):9.3f}  {share(r.p50):>6}")
    covered = sum(r.p50 for r in profile.rows if not r.nested)
    lines.append(f"{'':>5}  {'(between instructions)':<{width}}  {max(0.0, total - covered):9.3f}")
    ops = profile.top_ops()[:top]
    lines += ["", f"top {len(ops)} operators by share of time (median per run):"]
    name_width = max([len(t[0]) for t in ops] + [8])
    for name, calls, ms, frac in ops:
        lines.append(f"  {name:<{name_width}}  {calls:4d} call{'s' if calls != 1 else ' '}  {ms:9.3f} ms  "
                     f"{100 * frac:5.1f}%  {'#' * round(40 * frac)}")
    return "\n".join(lines)


def save_bar_chart(profile: Profile, top: int, path: Path) -> None:
    """The top operators' shares as a horizontal bar chart (PNG); needs matplotlib (the devtools extra)."""
    try:
        import matplotlib
    except ImportError:
        raise CliError("--plot needs matplotlib: pip install executorch[devtools]", 1) from None
    matplotlib.use("Agg")
    from matplotlib import pyplot

    from executorch.exir._serialize._atomic import write_chunks

    ops = profile.top_ops()[:top][::-1]
    fig, ax = pyplot.subplots(figsize=(8, 0.4 * len(ops) + 1.2), dpi=100)
    bars = ax.barh([o[0] for o in ops], [100 * o[3] for o in ops], color="#4c72b0")
    ax.bar_label(bars, labels=[f"{o[2]:.3f} ms" for o in ops], padding=3, fontsize=8)
    ax.set_xlabel("share of Method::execute (%)")
    ax.set_title(f"{profile.method}: top operators, median of {profile.runs} runs ({profile.runtime} runtime)")
    ax.set_xlim(0, max([100 * o[3] for o in ops] + [1]) * 1.25)
    fig.tight_layout()
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    pyplot.close(fig)
    write_chunks(path, [buf.getvalue()])


def _inputs(args: argparse.Namespace, meta) -> list:
    import torch

    from executorch.exir._dtypes import to_torch

    if args.inputs is not None:
        try:
            loaded = torch.load(args.inputs, weights_only=True)
        except Exception as e:  # torch raises many types for a bad file
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise CliError(f"cannot read inputs from {args.inputs}: {first}; save them with torch.save([t1, t2, ...])",
                           1) from None
        return list(loaded) if isinstance(loaded, (list, tuple)) else [loaded]
    generator = torch.Generator().manual_seed(args.seed)
    out = []
    for i in range(meta.num_inputs()):
        try:
            info = meta.input_tensor_meta(i)
        except Exception:
            raise CliError(f"input {i} of {meta.name()} is not a tensor, so it cannot be made up; pass "
                           "--inputs FILE.pt (torch.save of the input list)", 1) from None
        dtype = to_torch(info.dtype())
        if dtype is None:
            raise CliError(f"input {i} has dtype code {info.dtype()}, which cannot be made up; "
                           f"pass --inputs FILE.pt", 1)
        if dtype.is_floating_point:
            out.append(torch.randn(info.sizes(), generator=generator).to(dtype))
        elif dtype == torch.bool:
            out.append(torch.randint(0, 2, info.sizes(), generator=generator).bool())
        else:
            out.append(torch.randint(0, 4, info.sizes(), generator=generator).to(dtype))
    return out


def run_profile(args: argparse.Namespace) -> int:
    from executorch.exir.error import SerializeError
    from executorch.runtime import ExecuTorchError

    if args.iterations < 1 or args.warmup < 0 or args.top < 1:
        raise CliError("--iterations and --top must be at least 1 and --warmup at least 0", 2)
    try:
        pte = args.pte.read_bytes()
    except OSError as e:
        raise CliError(f"cannot read {args.pte}: {e.strerror or e}", 1) from None
    try:
        profile = collect(pte, lambda meta: _inputs(args, meta), args.iterations, args.warmup, args.method,
                          args.data_path)
    except (SerializeError, ExecuTorchError) as e:
        raise CliError(f"{args.pte}: {e}", 1) from None
    print(render(profile, args.top))
    if args.plot is not None:
        save_bar_chart(profile, args.top, args.plot)
        print(f"bar chart: {args.plot}")
    return 0
