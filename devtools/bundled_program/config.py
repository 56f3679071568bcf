"""Test cases for a bundled program: `MethodTestCase` (inputs, expected outputs) and `MethodTestSuite`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

import torch
from torch.utils._pytree import tree_flatten

from executorch.exir.error import ExportError

ConfigValue = Union[torch.Tensor, int, bool, float]


class MethodTestCase:
    """One run of a method: its inputs and, optionally, the outputs it must produce. Nested
    lists, tuples and dicts are flattened; every leaf must be a tensor, int, bool or float."""

    def __init__(self, inputs: Any, expected_outputs: Optional[Any] = None) -> None:
        self.inputs: list[ConfigValue] = _flatten(inputs, "inputs")
        self.expected_outputs: list[ConfigValue] = [] if expected_outputs is None else _flatten(
            expected_outputs, "expected_outputs")
        for i, out in enumerate(self.expected_outputs):
            if not isinstance(out, torch.Tensor):
                raise ExportError(
                    f"MethodTestCase expected_outputs[{i}] is a {type(out).__name__}; bundled programs check "
                    "tensor outputs only, so pass the method's tensor outputs")


def _flatten(data: Any, what: str) -> list[ConfigValue]:
    # A single tensor is one value (a method with one output), as ExecuTorch's flattening takes it.
    if isinstance(data, torch.Tensor):
        data = [data]
    if not isinstance(data, (list, tuple, dict)):
        raise ExportError(f"MethodTestCase {what} is a {type(data).__name__}; pass a tensor, or a list or tuple "
                          "of values")
    leaves, _ = tree_flatten(data)
    for i, leaf in enumerate(leaves):
        if not isinstance(leaf, (torch.Tensor, int, bool, float)):
            raise ExportError(
                f"MethodTestCase {what}[{i}] is a {type(leaf).__name__}; values must be tensors, ints, bools "
                "or floats")
    return leaves


@dataclass
class MethodTestSuite:
    """The test cases of one method."""

    method_name: str
    test_cases: Sequence[MethodTestCase]
