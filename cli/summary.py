"""A readable summary of a `.pte` file: its layout and, per method, signature, operators and memory."""

from __future__ import annotations

from collections import Counter
from typing import Optional

from executorch.exir import schema as s
from executorch.exir._dtypes import dtype_name
from executorch.exir._serialize import read_program
from executorch.exir._serialize._flatbuffer_reader import read_flatbuffer
from executorch.exir._serialize._header import decode_header

_SCALAR_NAMES = {s.Null: "None", s.Int: "int", s.Bool: "bool", s.Double: "float", s.String: "str"}
_INSTRUCTION_NAMES = {
    s.KernelCall: "kernel call", s.DelegateCall: "delegate call", s.MoveCall: "move",
    s.JumpFalseCall: "jump", s.FreeCall: "free",
}


def summarize(data: s.BytesLike, name: str = "program") -> str:
    """The summary of the `.pte` image `data` as printable text; raises SerializeError when
    `data` is not a well-formed `.pte`."""
    program = read_program(data)
    view = memoryview(data).cast("B")
    header = decode_header(view)
    program_size = header.program_size if header else len(view)
    # The deserializer folds the segment table away; the raw table gives the file's layout.
    segments = read_flatbuffer(view[:program_size]).segments
    lines = [f"{name}: {len(view):,} bytes, program version {program.version}"]
    if header:
        lines.append(
            f"  FlatBuffer {program_size:,} bytes; segment data {header.segment_data_size:,} bytes "
            f"at offset {header.segment_base_offset:,}"
        )
    else:
        lines.append(f"  FlatBuffer {program_size:,} bytes; no extended header (no segments)")
    lines += _segment_lines(program, segments)
    constant_bytes = sum(len(memoryview(b.storage)) for b in program.constant_buffer)
    lines.append(f"  constant data: {constant_bytes:,} bytes in {_count(len(program.constant_buffer), 'buffer')}")
    if program.named_data:
        lines.append(f"  named data: {', '.join(repr(n.key) for n in program.named_data)}")
    for plan in program.execution_plan:
        lines += _method_lines(program, plan)
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _segment_lines(program: s.Program, segments: list[s.DataSegment]) -> list[str]:
    if not segments:
        return ["  segments: none"]
    roles: dict[int, list[str]] = {}
    if program.constant_buffer or program.constant_segment.offsets:
        roles.setdefault(program.constant_segment.segment_index, []).append("constant tensors")
    for plan in program.execution_plan:
        for d in plan.delegates:
            if d.processed.location == s.DataLocation.SEGMENT:
                roles.setdefault(d.processed.index, []).append(f"delegate {d.id!r} of {plan.name!r}")
    for sub in program.mutable_data_segments or ():
        roles.setdefault(sub.segment_index, []).append("mutable data")
    for named in program.named_data or ():
        roles.setdefault(named.segment_index, []).append(f"named data {named.key!r}")
    lines = [f"  segments: {len(segments)}"]
    for i, seg in enumerate(segments):
        # Delegates with one payload (a repeated block's) share its segment: each role once, with its count.
        counts = {r: roles.get(i, []).count(r) for r in roles.get(i, ["unreferenced"])}
        role = ", ".join(r if n < 2 else f"{r} (x{n})" for r, n in counts.items())
        lines.append(f"    [{i}] offset {seg.offset:,}, {seg.size:,} bytes: {role}")
    return lines


def _describe_value(plan: s.ExecutionPlan, index: int) -> str:
    if not 0 <= index < len(plan.values):
        return f"<value {index} out of range>"
    val = plan.values[index].val
    if isinstance(val, s.Tensor):
        dtype = dtype_name(val.scalar_type)
        text = f"{dtype}[{', '.join(str(d) for d in val.sizes)}]"
        if val.shape_dynamism == s.TensorShapeDynamism.DYNAMIC_BOUND:
            text += " (dynamic; sizes are upper bounds)"
        elif val.shape_dynamism == s.TensorShapeDynamism.DYNAMIC_UNBOUND:
            text += " (dynamic, unbounded)"
        return text
    return _SCALAR_NAMES.get(type(val), type(val).__name__)


def _signature_lines(plan: s.ExecutionPlan, label: str, indices: list[int]) -> list[str]:
    if len(indices) == 1:
        return [f"  {label} (1): {_describe_value(plan, indices[0])}"]
    return [f"  {label} ({len(indices)}):"] + [f"    [{i}] {_describe_value(plan, v)}" for i, v in enumerate(indices)]


def _constant_bytes(program: s.Program, plan: s.ExecutionPlan) -> int:
    used = {
        v.val.data_buffer_idx
        for v in plan.values
        if isinstance(v.val, s.Tensor) and v.val.data_buffer_idx > 0 and v.val.allocation_info is None
    }
    return sum(len(memoryview(program.constant_buffer[i].storage)) for i in used if i < len(program.constant_buffer))


def _operator_name(plan: s.ExecutionPlan, index: int) -> str:
    if not 0 <= index < len(plan.operators):
        return f"<operator {index} out of range>"
    op = plan.operators[index]
    return f"{op.name}.{op.overload}" if op.overload else op.name


def _delegate_size(program: s.Program, ref: s.BackendDelegateDataReference) -> Optional[int]:
    if ref.location == s.DataLocation.INLINE and ref.index < len(program.backend_delegate_data):
        return len(memoryview(program.backend_delegate_data[ref.index].data))
    if ref.location == s.DataLocation.SEGMENT and ref.index < len(program.segment_data):
        return len(memoryview(program.segment_data[ref.index]))
    return None


def _payload(program: s.Program, ref: s.BackendDelegateDataReference) -> Optional[memoryview]:
    pool = program.segment_data if ref.location == s.DataLocation.SEGMENT else [
        d.data for d in program.backend_delegate_data]
    return memoryview(pool[ref.index]).cast("B") if 0 <= ref.index < len(pool) else None


def _xnnpack_graph(program: s.Program, ref: s.BackendDelegateDataReference):
    """The XNNGraph of an XNNPACK payload (None when it does not decode)."""
    data = _payload(program, ref)
    if data is None:
        return None
    from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import deserialize_xnnpack_binary
    from executorch.exir.error import SerializeError

    try:
        return deserialize_xnnpack_binary(data).graph
    except SerializeError:
        return None


def _xnnpack_line(graph) -> str:
    """Node kinds and counts, and the weight bytes (each named blob once) of an XNNGraph."""
    kinds: dict[str, int] = {}
    for node in graph.xnodes:
        name = type(node.xnode_union).__name__.removeprefix("XNN")
        kinds[name] = kinds.get(name, 0) + 1
    sizes = {c.named_key or f"@{c.offset}": c.size for c in graph.constant_data[1:]}
    text = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
    return (f"        XNNPACK graph: {_count(len(graph.xnodes), 'node')} ({text or 'none'}), "
            f"{_count(len(graph.xvalues), 'value')}, weights {sum(sizes.values()):,} bytes in "
            f"{_count(len(sizes), 'constant')}")


def _nested_kernel_calls(program: s.Program, ref: s.BackendDelegateDataReference) -> Optional[int]:
    """Kernel calls inside a payload that is itself a .pte (ExecutorBackend); None if opaque."""
    pool = program.segment_data if ref.location == s.DataLocation.SEGMENT else [
        d.data for d in program.backend_delegate_data]
    if not 0 <= ref.index < len(pool) or bytes(memoryview(pool[ref.index])[4:8]) != b"ET12":
        return None
    from executorch.exir._serialize import read_program
    from executorch.exir.error import SerializeError

    try:
        nested = read_program(pool[ref.index])
    except SerializeError:
        return None
    return sum(isinstance(i.instr_args, s.KernelCall)
               for plan in nested.execution_plan for chain in plan.chains for i in chain.instructions)


def _delegate_lines(program: s.Program, plan: s.ExecutionPlan, instructions: list) -> list[str]:
    """Each delegate (backend, payload, compile specs, calling instructions) and the share of
    operator calls that run inside delegates."""
    lines = [f"  delegates ({len(plan.delegates)}):"]
    callers: dict[int, list[int]] = {}
    for pc, ins in enumerate(instructions):
        if isinstance(ins, s.DelegateCall):
            callers.setdefault(ins.delegate_index, []).append(pc)
    inside: Optional[int] = 0
    for i, d in enumerate(plan.delegates):
        size = _delegate_size(program, d.processed)
        where = "inline" if d.processed.location == s.DataLocation.INLINE else "segment"
        specs = ", ".join(f"{c.key} ({_count(len(c.value), 'byte')})" for c in d.compile_specs) or "none"
        size_text = f"{size:,} bytes" if size is not None else "size unknown"
        pcs = callers.get(i, [])
        called = f"instruction{'s' if len(pcs) != 1 else ''} {', '.join(map(str, pcs))}" if pcs else "never"
        lines.append(f"    [{i}] {d.id}: {size_text} ({where} {d.processed.index}), compile specs: {specs}, "
                     f"called by {called}")
        graph = _xnnpack_graph(program, d.processed) if d.id == "XnnpackBackend" else None
        if graph is not None:
            lines.append(_xnnpack_line(graph))
        nested = len(graph.xnodes) if graph is not None else _nested_kernel_calls(program, d.processed)
        inside = None if inside is None or nested is None else inside + nested * len(pcs)
    portable = sum(isinstance(i, s.KernelCall) for i in instructions)
    if inside is None:
        n_calls = sum(len(v) for v in callers.values())
        lines.append(f"  delegated: {_count(n_calls, 'delegate call')} beside {_count(portable, 'kernel call')} "
                     "(operators inside opaque payloads are not counted)")
    else:
        total = inside + portable
        share = 100.0 * inside / total if total else 0.0
        lines.append(f"  delegated: {inside:,} of {_count(total, 'operator call')} ({share:.0f}%)")
    return lines


def _method_lines(program: s.Program, plan: s.ExecutionPlan) -> list[str]:
    lines = [f"method {plan.name!r}"]
    lines += _signature_lines(plan, "inputs", plan.inputs)
    lines += _signature_lines(plan, "outputs", plan.outputs)
    instructions = [i.instr_args for chain in plan.chains for i in chain.instructions]
    kinds = Counter(type(i) for i in instructions)
    kind_text = ", ".join(_count(kinds[t], n) for t, n in _INSTRUCTION_NAMES.items() if kinds[t])
    lines.append(
        f"  {_count(len(plan.values), 'value')}, {_count(len(instructions), 'instruction')}"
        f"{f' ({kind_text})' if kind_text else ''}, {_count(len(plan.chains), 'chain')}"
    )
    lines.append(f"  constant data used: {_constant_bytes(program, plan):,} bytes")
    arenas = plan.non_const_buffer_sizes[1:]
    if arenas:
        sizes = ", ".join(f"{n:,}" for n in arenas)
        lines.append(f"  planned memory: {sum(arenas):,} bytes in {_count(len(arenas), 'arena')} ({sizes})")
    else:
        lines.append("  planned memory: none")
    if plan.delegates:
        lines += _delegate_lines(program, plan, instructions)
    else:
        lines.append("  delegates: none")
    calls = Counter(_operator_name(plan, i.op_index) for i in instructions if isinstance(i, s.KernelCall))
    lines.append(f"  operators: {len(plan.operators)} distinct, {_count(sum(calls.values()), 'call')}")
    width = max((len(n) for n in calls), default=0)
    for op_name, n in sorted(calls.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"    {op_name:<{width}}  {n:>5,}")
    unused = [o for i, o in enumerate(plan.operators) if _operator_name(plan, i) not in calls]
    if unused:
        lines.append(f"    (listed but never called: {', '.join(f'{o.name}.{o.overload}' for o in unused)})")
    return lines
