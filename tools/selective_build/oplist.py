"""Operator info (names and the dtypes each is called with) from programs, and merging it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable, Union

from executorch.exir import schema as s
from executorch.exir._serialize import read_program
from executorch.exir.error import SerializeError
from executorch.tools.selective_build import yaml_subset

# et_kernel_metadata entries: "v1/" then, per tensor argument, "<ScalarType code>;<dim order>".
_METADATA_VERSION = "v1/"


@dataclass
class SelectedOperators:
    """What a set of programs needs: operator name -> sources and kernel dtype signatures."""

    operators: dict[str, list[str]] = field(default_factory=dict)  # op -> debug_info (sources)
    kernel_metadata: dict[str, list[str]] = field(default_factory=dict)  # op -> sorted signatures
    include_all_operators: bool = False

    def add(self, op: str, source: str, signature: str | None) -> None:
        sources = self.operators.setdefault(op, [])
        if source not in sources:
            sources.append(source)
        signatures = self.kernel_metadata.setdefault(op, [])
        if signature is not None and signature not in signatures:
            signatures.append(signature)

    def dtypes(self, op: str) -> set[s.ScalarType]:
        """The ScalarTypes any tensor argument of `op` is called with."""
        found = set()
        for signature in self.kernel_metadata.get(op, []):
            if not signature.startswith(_METADATA_VERSION):
                continue  # "default": dtypes not recorded
            for arg in signature[len(_METADATA_VERSION):].split("|"):
                if arg:
                    found.add(s.ScalarType(int(arg.split(";")[0])))
        return found

    def to_dict(self) -> dict:
        return {
            "include_all_operators": self.include_all_operators,
            "operators": {
                op: {"is_root_operator": True, "include_all_overloads": False,
                     "debug_info": sorted(self.operators[op])}
                for op in sorted(self.operators)
            },
            "et_kernel_metadata": {op: sorted(self.kernel_metadata.get(op, [])) for op in sorted(self.operators)},
        }


def operator_name(op: s.Operator) -> str:
    """`namespace::name.overload`, as kernels are registered."""
    return f"{op.name}.{op.overload}" if op.overload else op.name


def _signature(plan: s.ExecutionPlan, args: list[int]) -> str:
    parts = []
    for index in args:
        if not 0 <= index < len(plan.values):
            raise SerializeError(f"plan {plan.name!r}: kernel argument {index} is outside its "
                                 f"{len(plan.values)} values; the file is corrupt")
        val = plan.values[index].val
        if isinstance(val, s.Tensor):
            parts.append(f"{int(val.scalar_type)};{','.join(str(d) for d in val.dim_order)}")
    return _METADATA_VERSION + "|".join(parts)


def add_program(selected: SelectedOperators, program: s.Program, source: str) -> SelectedOperators:
    """Records every operator the non-delegated instructions of `program` call."""
    for plan in program.execution_plan:
        for chain in plan.chains:
            for instruction in chain.instructions:
                call = instruction.instr_args
                if not isinstance(call, s.KernelCall):
                    continue
                if not 0 <= call.op_index < len(plan.operators):
                    raise SerializeError(f"plan {plan.name!r}: operator index {call.op_index} is outside "
                                         f"its {len(plan.operators)} operators; the file is corrupt")
                op = operator_name(plan.operators[call.op_index])
                selected.add(op, source, _signature(plan, call.args))
    return selected


def _as_program(item) -> s.Program:
    """A schema Program from an ExecutorchProgramManager, EdgeProgramManager or ExportedProgram."""
    if isinstance(item, s.Program):
        return item
    if hasattr(item, "executorch_program"):
        return item.executorch_program
    if hasattr(item, "to_executorch"):
        return item.to_executorch().executorch_program
    from executorch.exir import to_edge
    return to_edge(item).to_executorch().executorch_program


ProgramLike = Union[str, os.PathLike, bytes, s.Program, object]


def gen_oplist(programs: Iterable[ProgramLike]) -> SelectedOperators:
    """Operator info for `programs`: .pte paths or bytes, schema Programs, ExportedPrograms,
    EdgeProgramManagers or ExecutorchProgramManagers."""
    selected = SelectedOperators()
    for number, item in enumerate(programs):
        if isinstance(item, (str, os.PathLike)):
            path = os.fspath(item)
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError as e:
                raise FileNotFoundError(f"{path}: cannot read the program ({e.strerror})") from None
            try:
                program = read_program(data)
            except SerializeError as e:
                raise SerializeError(f"{path}: not a readable .pte ({e})") from None
            add_program(selected, program, os.path.basename(path))
        elif isinstance(item, (bytes, bytearray, memoryview)):
            add_program(selected, read_program(item), f"program{number}")
        else:
            add_program(selected, _as_program(item), type(item).__name__)
    return selected


def load_selected(path: str) -> SelectedOperators:
    """Reads a selected_operators.yaml (ours or one listing only `operators`)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml_subset.loads(f.read(), path)
    except OSError as e:
        raise FileNotFoundError(f"{path}: cannot read the operator list ({e.strerror})") from None
    if not isinstance(data, dict) or not isinstance(data.get("operators", {}), (dict, list)):
        raise yaml_subset.YamlError(f"{path}: expected a mapping with an 'operators' mapping")
    selected = SelectedOperators(include_all_operators=data.get("include_all_operators") is True)
    operators = data.get("operators") or {}
    for op in operators:
        info = operators[op] if isinstance(operators, dict) else None
        debug = info.get("debug_info") if isinstance(info, dict) else None
        selected.operators[op] = list(debug) if isinstance(debug, list) else []
    metadata = data.get("et_kernel_metadata") or {}
    if not isinstance(metadata, dict):
        raise yaml_subset.YamlError(f"{path}: 'et_kernel_metadata' must map operators to lists")
    for op, signatures in metadata.items():
        if not isinstance(signatures, list) or not all(isinstance(x, str) for x in signatures):
            raise yaml_subset.YamlError(f"{path}: et_kernel_metadata of {op!r} must be a list of strings")
        selected.operators.setdefault(op, [])
        selected.kernel_metadata[op] = list(signatures)
    return selected


def merge(parts: Iterable[SelectedOperators]) -> SelectedOperators:
    """The union: every operator, source and dtype signature of any part."""
    merged = SelectedOperators()
    for part in parts:
        merged.include_all_operators = merged.include_all_operators or part.include_all_operators
        for op, sources in part.operators.items():
            merged.operators.setdefault(op, [])
            merged.kernel_metadata.setdefault(op, [])
            for source in sources:
                if source not in merged.operators[op]:
                    merged.operators[op].append(source)
            for signature in part.kernel_metadata.get(op, []):
                if signature not in merged.kernel_metadata[op]:
                    merged.kernel_metadata[op].append(signature)
    return merged


def write_selected(selected: SelectedOperators, path: str) -> None:
    """Writes the yaml atomically: a failure leaves no half-written file."""
    text = yaml_subset.dumps(selected.to_dict())
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
