"""`BundledProgram`: a program (manager or `.pte` file) and test suites checked against its methods."""

from __future__ import annotations

from typing import Optional, Sequence

import torch

import executorch.devtools.bundled_program.schema as bp
from executorch.devtools.bundled_program.config import MethodTestSuite
from executorch.devtools.bundled_program.version import BUNDLED_PROGRAM_SCHEMA_VERSION
from executorch.exir import schema as S
from executorch.exir._dtypes import scalar_type
from executorch.exir._tensor_data import tensor_bytes
from executorch.exir.error import ExportError

_PRIMS = {S.Int: int, S.Bool: bool, S.Double: float}


class BundledProgram:
    """Bundles `executorch_program` (or the `.pte` at `pte_file_path`) with test suites; each
    suite's inputs must match its method's inputs in count, kind, dtype and shape."""

    def __init__(self, executorch_program=None, method_test_suites: Sequence[MethodTestSuite] = (),
                 pte_file_path: Optional[str] = None) -> None:
        if (executorch_program is None) == (pte_file_path is None):
            raise ExportError(
                "BundledProgram takes exactly one of executorch_program (a program manager) and pte_file_path")
        self.executorch_program = executorch_program
        self._pte_file_path = pte_file_path
        self.method_test_suites = sorted(method_test_suites, key=lambda s: s.method_name)
        self._schema: Optional[bp.BundledProgram] = None
        if executorch_program is not None:
            _check_suites(executorch_program.executorch_program, self.method_test_suites)

    def _program_bytes(self):
        if self.executorch_program is not None:
            # The manager's pieces (views of tensor data): the writer copies them once, into the .bpte.
            chunks = getattr(self.executorch_program, "_chunks", None)
            return chunks() if chunks is not None and self.executorch_program._buffer is None \
                else self.executorch_program.buffer
        with open(self._pte_file_path, "rb") as f:
            return f.read()

    def serialize_to_schema(self) -> bp.BundledProgram:
        """The bundle as `.bpte` schema dataclasses; tensor data are views over the test tensors."""
        if self._schema is None:
            suites = [
                bp.BundledMethodTestSuite(suite.method_name, [
                    bp.BundledMethodTestCase([_value(v) for v in case.inputs],
                                             [_value(v) for v in case.expected_outputs])
                    for case in suite.test_cases])
                for suite in self.method_test_suites
            ]
            self._schema = bp.BundledProgram(BUNDLED_PROGRAM_SCHEMA_VERSION, suites, self._program_bytes())
        return self._schema


def _value(v) -> bp.Value:
    if isinstance(v, torch.Tensor):
        t = v.detach().cpu().contiguous()
        # Keep the contiguous copy alive with the view over its memory.
        return bp.Value(bp.Tensor(scalar_type(t.dtype), list(t.shape), tensor_bytes(t), list(range(t.dim()))))
    if isinstance(v, bool):
        return bp.Value(bp.Bool(v))
    if isinstance(v, int):
        return bp.Value(bp.Int(v))
    return bp.Value(bp.Double(float(v)))


def _check_suites(program: S.Program, suites: Sequence[MethodTestSuite]) -> None:
    plans = {p.name: p for p in program.execution_plan}
    for suite in suites:
        plan = plans.get(suite.method_name)
        if plan is None:
            raise ExportError(
                f"MethodTestSuite for method {suite.method_name!r}, which the program does not have; its methods "
                f"are {sorted(plans)}")
        for c, case in enumerate(suite.test_cases):
            where = f"method {suite.method_name!r} test case {c}"
            if len(case.inputs) != len(plan.inputs):
                raise ExportError(f"{where} has {len(case.inputs)} inputs; the method takes {len(plan.inputs)}")
            for i, (given, index) in enumerate(zip(case.inputs, plan.inputs)):
                _check_value(f"{where} input {i}", given, plan.values[index].val)
            if case.expected_outputs and len(case.expected_outputs) != len(plan.outputs):
                raise ExportError(
                    f"{where} expects {len(case.expected_outputs)} outputs; the method returns {len(plan.outputs)}")
            for i, (given, index) in enumerate(zip(case.expected_outputs, plan.outputs)):
                _check_value(f"{where} expected output {i}", given, plan.values[index].val)


def _check_value(where: str, given, want) -> None:
    if isinstance(want, S.Tensor):
        if not isinstance(given, torch.Tensor):
            raise ExportError(f"{where} is a {type(given).__name__}; the method takes a tensor there")
        if scalar_type(given.dtype) != want.scalar_type:
            raise ExportError(
                f"{where} has dtype {given.dtype}; the method needs {S.ScalarType(want.scalar_type).name.lower()}")
        return
    kind = _PRIMS.get(type(want))
    if kind is None or type(given) is not kind:
        raise ExportError(
            f"{where} is a {type(given).__name__}; the method takes a {kind.__name__ if kind else type(want).__name__}")
