"""Our Inspector over our ETDump and ETRecord: grouped events, op types, the pandas extra's error."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from executorch.devtools import Inspector
from executorch.exir import to_edge_transform_and_lower

sys.path.insert(0, str(Path(__file__).parent))
from conftest import project_runtimes  # noqa: E402
from test_devtools_etdump import ConvLinear, _inputs  # noqa: E402


@pytest.mark.parametrize("engine", sorted(project_runtimes()))
def test_events_are_grouped_per_instruction_with_their_op_types(engine, tmp_path):
    inputs = _inputs()
    et = to_edge_transform_and_lower(torch.export.export(ConvLinear(), inputs), generate_etrecord=True).to_executorch()
    record = et.get_etrecord()
    record.update_representative_inputs([inputs])
    record.save(tmp_path / "r.etrecord")
    program = project_runtimes()[engine].load_program(et.buffer, enable_etdump=True, debug_buffer_size=1 << 20)
    method = program.load_method("forward")
    for _ in range(3):
        method.execute(list(inputs))
    program.write_etdump_result_to_file(tmp_path / "r.etdp", tmp_path / "r.bin")
    inspector = Inspector(tmp_path / "r.etdp", str(tmp_path / "r.etrecord"), tmp_path / "r.bin")
    assert [b.name for b in inspector.event_blocks] == ["Default", "Execute"]
    kernels = [e for e in inspector.event_blocks[1].events if e.name.startswith("native_call_")]
    assert kernels and all(len(e.perf_data) == 3 and all(t >= 0 for t in e.perf_data) for e in kernels)
    ops = {t for e in kernels for t in e.op_types}
    assert {"aten.convolution.default", "aten.addmm.default", "aten.relu.default"} <= ops
    conv = next(e for e in kernels if "convolution" in e.name)
    torch.testing.assert_close(conv.debug_data[-1], torch.nn.functional.conv2d(
        inputs[1], record.exported_program.state_dict["conv.weight"], record.exported_program.state_dict["conv.bias"]))
    if importlib.util.find_spec("pandas") is None:
        with pytest.raises(ImportError, match=r"pip install executorch\[devtools\]"):
            inspector.to_dataframe()
    else:
        gap = inspector.calculate_numeric_gap("MSE")
        assert len(gap) >= 5 and max(g[0] for g in gap["gap"]) < 1e-10
