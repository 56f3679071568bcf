"""Runs every test case of a `.bpte` on `executorch.runtime` and reports pass/fail per case."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Optional, Union

import torch

import executorch.devtools.bundled_program.schema as bp
from executorch.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program
from executorch.devtools.compare import Comparison, compare_outputs
from executorch.runtime._errors import ExecuTorchError
from executorch.exir._dtypes import to_torch as _torch_dtype


@dataclass(frozen=True)
class TestCaseResult:
    method_name: str
    index: int
    comparison: Optional[Comparison]  # None: the case has no expected outputs (run only)

    @property
    def ok(self) -> bool:
        return self.comparison is None or self.comparison.ok

    def __str__(self) -> str:
        c = self.comparison
        if c is None:
            detail = "no expected outputs (ran)"
        elif c.ok:
            detail = str(c)
        else:  # the reasons; an error only where values were compared (it is infinite where none could be)
            detail = "; ".join(c.mismatches) + (f" (max rel err {c.max_rel_err:.3g})" if math.isfinite(c.max_rel_err)
                                                else "")
        return f"{'PASS' if self.ok else 'FAIL'} {self.method_name}[{self.index}]: {detail}"


def to_torch(value: bp.Value) -> Union[torch.Tensor, int, bool, float]:
    """A bundled value as the runtime takes it (tensors copied out of the file's bytes)."""
    v = value.val
    if not isinstance(v, bp.Tensor):
        return getattr(v, ("int_val", "bool_val", "double_val")[bp.VALUE_TYPES.index(type(v)) - 1])
    dtype = _torch_dtype(int(v.scalar_type))
    if dtype is None:
        raise ExecuTorchError(f"a bundled tensor has scalar type {int(v.scalar_type)}, which torch cannot hold")
    order = list(v.dim_order)
    physical = [v.sizes[d] for d in order]
    data = bytearray(v.data)  # writable, aligned for the dtype
    flat = torch.frombuffer(data, dtype=dtype) if data else torch.empty(0, dtype=dtype)
    t = flat.reshape(physical)
    return t.permute([order.index(d) for d in range(len(order))]) if order else t


def run_bundled_program(source, *, rtol: Optional[float] = None, atol: Optional[float] = None,
                        data_path: Optional[Union[str, os.PathLike]] = None) -> list[TestCaseResult]:
    """Load the program inside a `.bpte` (path, bytes or a deserialized bundle) and run every test
    case, comparing outputs with the expected ones (executorch.devtools.compare's tolerances)."""
    from executorch.runtime import Runtime

    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            source = f.read()
    bundle = source if isinstance(source, bp.BundledProgram) else deserialize_from_flatbuffer_to_bundled_program(source)
    program = Runtime.get().load_program(bytes(bundle.program), data_path=data_path)
    results = []
    for suite in bundle.method_test_suites:
        method = program.load_method(suite.method_name)
        for i, case in enumerate(suite.test_cases):
            outputs = method.execute([to_torch(v) for v in case.inputs])
            comparison = None
            if case.expected_outputs and len(outputs) != len(case.expected_outputs):
                comparison = Comparison(len(outputs), math.inf, (
                    f"the method returned {len(outputs)} outputs; the test case expects {len(case.expected_outputs)}",))
            elif case.expected_outputs:
                expected = [to_torch(v) for v in case.expected_outputs]
                comparison = compare_outputs(list(outputs), expected, rtol=rtol, atol=atol)
            results.append(TestCaseResult(suite.method_name, i, comparison))
    return results
