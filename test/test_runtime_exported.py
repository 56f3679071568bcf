"""Files written by this package's exporter run on executorch.runtime and match eager torch."""

from __future__ import annotations

import pytest
import torch
from torch.utils._pytree import tree_flatten

from executorch.devtools.compare import assert_outputs_close
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime

import runtime_models  # noqa: E402

# name -> (what the exporter raises, why); strict, so a fixed exporter turns these into failures to update.
# Empty since map is lowered to a loop (test_exir_control_flow.py); kept for the next gap.
_KNOWN_EXPORTER_GAPS: dict = {}


def _cases():
    for name in sorted(runtime_models.FACTORIES):
        marks = ()
        if name in _KNOWN_EXPORTER_GAPS:
            raises, reason = _KNOWN_EXPORTER_GAPS[name]
            marks = pytest.mark.xfail(raises=raises, reason=reason, strict=True)
        yield pytest.param(name, marks=marks)


@pytest.mark.parametrize("name", list(_cases()))
def test_exported_file_matches_eager(name):
    model, inputs = runtime_models.FACTORIES[name]()
    shapes = runtime_models.DYNAMIC_SHAPES[name]() if name in runtime_models.DYNAMIC_SHAPES else None
    pte = to_edge_transform_and_lower(torch.export.export(model, inputs, dynamic_shapes=shapes)).to_executorch()
    method = Runtime.get().load_program(bytes(pte.buffer)).load_method("forward")
    with torch.no_grad():
        expected = tree_flatten(model(*inputs))[0]
    assert_outputs_close(method.execute(list(inputs)), expected)
