"""The single-op suite itself: every case is seeded, runs eagerly and survives torch.export."""

from __future__ import annotations

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close
from torch.utils._pytree import tree_flatten

from single_op_models import CASES, CASES_BY_NAME  # noqa: E402

IDS = [case.name for case in CASES]


def _assert_same(actual, expected) -> None:
    assert tree_flatten(expected)[0], "a case with no outputs checks nothing"
    assert_outputs_close(actual, expected)


def test_suite_is_broad_with_unique_names_and_dynamic_cases():
    assert len(CASES) >= 60 and len(CASES_BY_NAME) == len(CASES)
    dynamic = [c for c in CASES if c.dynamic_shapes is not None]
    assert len(dynamic) >= 5 and all(c.resized_inputs is not None for c in dynamic)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_case_is_deterministic(case):
    (m1, in1), (m2, in2) = case.factory(), case.factory()
    assert not m1.training
    _assert_same(in1, in2)
    _assert_same(m1(*in1), m2(*in2))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_case_exports_and_matches_eager(case):
    model, inputs = case.factory()
    dynamic_shapes = case.dynamic_shapes() if case.dynamic_shapes else None
    ep = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    runs = [inputs] + ([case.resized_inputs()] if case.resized_inputs else [])
    for args in runs:
        with torch.no_grad():
            _assert_same(ep.module()(*args), model(*args))
