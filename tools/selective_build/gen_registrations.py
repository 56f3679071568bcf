"""Build-time codegen: the operator allowlist (`select`) and kernel registrations from it (`register`).

CMake runs this file by path with any Python 3, before the executorch package is installed, so it
imports only the standard library and its sibling yaml_subset module.
"""

from __future__ import annotations

import argparse
import os
import sys

if __package__:
    from executorch.tools.selective_build import yaml_subset
else:
    import yaml_subset

# Kernels in this file are needed by any program with dynamic shapes: always registered.
PRIM_OPS_FILE = "../prim_ops/register_prim_ops.cpp"
# ScalarType codes (schema/scalar_type.fbs; this file may not import executorch, so
# test/test_facts_agree.py checks them against executorch.exir.schema.ScalarType).
_FLOAT = 6
_HALF = 5
_BFLOAT16 = 15
# Float mixed with Half / BFloat16 computes in float32 over 16-bit storage.
_HALF_OR_FLOAT = {_FLOAT, _HALF, _BFLOAT16}


class SelectionError(ValueError):
    """An allowlist that names operators no kernel library provides, or an unreadable file."""


def read_kernels(path: str) -> list[dict]:
    """The entries (op, kernel, file) of a kernel library's functions.yaml."""
    with open(path, encoding="utf-8") as f:
        entries = yaml_subset.loads(f.read(), path)
    if not isinstance(entries, list):
        raise SelectionError(f"{path}: expected a list of '- op: / kernel: / file:' entries")
    for number, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or set(entry) != {"op", "kernel", "file"} or not all(
                isinstance(v, str) for v in entry.values()):
            raise SelectionError(f"{path}: entry {number} must have exactly the string keys op, kernel, file")
    ops = [entry["op"] for entry in entries]
    duplicates = sorted({op for op in ops if ops.count(op) > 1})
    if duplicates:
        raise SelectionError(f"{path}: listed more than once: {', '.join(duplicates)}")
    return entries


def _ops_of_yaml(path: str) -> tuple[list[str], bool, dict]:
    with open(path, encoding="utf-8") as f:
        data = yaml_subset.loads(f.read(), path)
    if not isinstance(data, dict) or not isinstance(data.get("operators"), (dict, list)):
        raise SelectionError(f"{path}: not a selected_operators.yaml: it needs an 'operators' mapping "
                             "(write one with `python -m executorch.tools.selective_build gen-oplist`)")
    metadata = data.get("et_kernel_metadata") or {}
    return list(data["operators"]), data.get("include_all_operators") is True, metadata


def select(kernel_yamls: list[str], ops_yaml: str | None, root_ops: str, include_all: bool,
           dtype_selective: bool = False) -> dict:
    """The union of `ops_yaml` and `root_ops`, checked against the kernel libraries."""
    provided = {entry["op"] for path in kernel_yamls for entry in read_kernels(path)}
    ops: dict[str, list[str]] = {}
    metadata: dict = {}
    if ops_yaml:
        listed, all_from_yaml, metadata = _ops_of_yaml(ops_yaml)
        include_all = include_all or all_from_yaml
        for op in listed:
            ops.setdefault(op, []).append(os.path.basename(ops_yaml))
    for op in filter(None, (x.strip() for x in root_ops.split(","))):
        ops.setdefault(op, []).append("ROOT_OPS")
    missing = sorted(op for op in ops if op not in provided)
    if missing:
        raise SelectionError(
            f"no linked kernel library provides {', '.join(missing)} (selected by "
            f"{', '.join(sorted({src for op in missing for src in ops[op]}))}); kernels come from "
            f"{', '.join(kernel_yamls)}: add a kernel for it there or drop it from the selection")
    if dtype_selective:
        unknown = sorted(op for op in ops if not metadata.get(op)) if not include_all else ["(all operators)"]
        if unknown:
            raise SelectionError(
                f"EXECUTORCH_DTYPE_SELECTIVE_BUILD needs the dtypes of every selected operator, and none "
                f"are recorded for {', '.join(unknown)}: select by model (EXECUTORCH_SELECT_OPS_MODEL) or "
                "by a gen-oplist yaml, or configure without EXECUTORCH_DTYPE_SELECTIVE_BUILD")
    return {
        "include_all_operators": include_all,
        "operators": {op: {"is_root_operator": True, "include_all_overloads": False,
                           "debug_info": sorted(ops[op])} for op in sorted(ops)},
        "et_kernel_metadata": {op: metadata.get(op, []) for op in sorted(ops) if op in metadata},
    }


def registrations(kernel_yaml: str, selected_yaml: str | None) -> dict[str, list[tuple[str, str]]]:
    """Source file -> (op, kernel) pairs to register: every kernel when nothing is selected."""
    entries = read_kernels(kernel_yaml)
    chosen = None
    if selected_yaml:
        listed, include_all, _ = _ops_of_yaml(selected_yaml)
        chosen = None if include_all else set(listed)
    out: dict[str, list[tuple[str, str]]] = {}
    for entry in entries:
        out.setdefault(entry["file"], [])
        if chosen is None or entry["op"] in chosen or entry["file"] == PRIM_OPS_FILE:
            out[entry["file"]].append((entry["op"], entry["kernel"]))
    return out


def compute_kinds(selected_yaml: str | None) -> dict[str, bool]:
    """Which elementwise compute paths the selected calls need: float32 when every tensor of a call
    is Float, the half path when they are Float/Half/BFloat16 with at least one 16-bit, otherwise
    the int64 and double paths (the kernel picks one from its scalars too)."""
    every = {"FLOAT32": True, "INT64": True, "DOUBLE": True, "HALF": True}
    if not selected_yaml:
        return every
    _, include_all, metadata = _ops_of_yaml(selected_yaml)
    if include_all or not metadata:
        return every
    kinds = {"FLOAT32": False, "INT64": False, "DOUBLE": False, "HALF": False}
    for signatures in metadata.values():
        for signature in signatures:
            if not signature.startswith("v1/"):
                # ExecuTorch writes "default" for an op whose dtypes it did not record.
                return every
            codes = {int(arg.split(";")[0]) for arg in signature[3:].split("|") if arg}
            if codes <= {_FLOAT}:
                kinds["FLOAT32"] = True
            elif codes <= _HALF_OR_FLOAT:
                kinds["HALF"] = True
            else:
                kinds["INT64"] = kinds["DOUBLE"] = True
    return kinds


def write_dtype_header(selected_yaml: str | None, dtype_selective: bool, out_dir: str) -> None:
    kinds = compute_kinds(selected_yaml if dtype_selective else None)
    lines = ["// Generated by gen_registrations.py: elementwise compute paths compiled into the kernels",
             "// (all of them unless EXECUTORCH_DTYPE_SELECTIVE_BUILD).", "#pragma once"]
    lines += [f"#define ET_SELECTED_COMPUTE_{kind} {int(on)}" for kind, on in kinds.items()]
    _write_if_changed(os.path.join(out_dir, "portable_registrations", "selected_dtypes.h"), "\n".join(lines) + "\n")


def _write_if_changed(path: str, text: str) -> None:
    # Rewrite only on change, so an unchanged selection does not recompile the kernels.
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def include_name(source: str) -> str:
    """The generated file a kernel source includes: portable_registrations/<stem>.inc."""
    return "portable_registrations/" + os.path.splitext(os.path.basename(source))[0] + ".inc"


def write_registrations(kernel_yaml: str, selected_yaml: str | None, out_dir: str) -> None:
    for source, pairs in registrations(kernel_yaml, selected_yaml).items():
        lines = [f"// Generated from {os.path.basename(kernel_yaml)} by gen_registrations.py: "
                 f"{len(pairs)} kernel(s) of {os.path.basename(source)}."]
        lines += [f'ET_REGISTER_KERNEL("{op}", {kernel});' for op, kernel in pairs]
        _write_if_changed(os.path.join(out_dir, include_name(source)), "\n".join(lines) + "\n")


def _on(value: str) -> bool:
    return value.upper() in ("ON", "TRUE", "1", "YES", "Y")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sel = sub.add_parser("select")
    sel.add_argument("--kernel-yaml", action="append", required=True)
    sel.add_argument("--ops-yaml")
    sel.add_argument("--root-ops", default="")
    sel.add_argument("--include-all-ops", default="OFF")
    sel.add_argument("--dtype-selective", default="OFF")
    sel.add_argument("-o", "--output", required=True)
    reg = sub.add_parser("register")
    reg.add_argument("--kernel-yaml", required=True)
    reg.add_argument("--selected-yaml")
    reg.add_argument("--output-dir", required=True)
    reg.add_argument("--dtype-selective", default="OFF")
    args = parser.parse_args(argv)
    try:
        dtype_selective = _on(args.dtype_selective)
        if args.command == "select":
            text = yaml_subset.dumps(select(args.kernel_yaml, args.ops_yaml, args.root_ops,
                                            _on(args.include_all_ops), dtype_selective))
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(text)
        else:
            write_registrations(args.kernel_yaml, args.selected_yaml, args.output_dir)
            write_dtype_header(args.selected_yaml, dtype_selective, args.output_dir)
    except (OSError, SelectionError, yaml_subset.YamlError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
