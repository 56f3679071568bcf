"""`--backend xnnpack` on both CLIs, and `inspect` decoding an XNNPACK payload (ours and the published exporter's)."""

from __future__ import annotations

import re

import pytest

from conftest import zoo_factory_spec  # noqa: E402
from xnnpack_structure import structure  # noqa: E402

from executorch.cli.main import main  # noqa: E402


def _xnnpack_line(text: str) -> str:
    (line,) = [ln for ln in text.splitlines() if "XNNPACK graph:" in ln]
    return line


def test_exir_cli_backend_xnnpack_delegates_and_summarizes(tmp_path, capsys):
    out = tmp_path / "mio.pte"
    assert main(["export", "multi_io", "--backend", "xnnpack", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    s = structure(out)
    assert s.delegates == 1 and not s.kernel_calls, s
    line = _xnnpack_line(text)
    assert f"{sum(s.node_kinds.values())} nodes" in line and "FullyConnected 3" in line, line
    # The verdict says whether the runtime could run the delegate, never a silent pass.
    assert re.search(r"^(OK: .* matches eager|wrote .*not checked against eager: .*XnnpackBackend)", text, re.M), text


def test_exir_cli_portable_backend_has_no_delegate(tmp_path, capsys):
    out = tmp_path / "mio.pte"
    assert main(["export", "multi_io", "--backend", "portable", "--no-verify", "-o", str(out)]) == 0
    assert structure(out).delegates == 0


def test_export_cli_backend_xnnpack(tmp_path, capsys):
    from executorch.cli.recipe import main as export_main

    out = tmp_path / "mio.pte"
    assert export_main(["multi_io", "--backend", "xnnpack", "-o", str(out)]) == 0
    assert structure(out).delegates == 1
    assert "+xnnpack" in capsys.readouterr().out


def test_inspect_decodes_the_published_exporters_payload(tmp_path, capsys, reference_runtime):
    pte = reference_runtime.export(zoo_factory_spec("mobilenet_v2"), tmp_path / "ref.pte", "--xnnpack")
    assert main(["inspect", str(pte)]) == 0
    line = _xnnpack_line(capsys.readouterr().out)
    kinds = structure(pte).node_kinds
    for kind in ("Conv2d", "DepthwiseConv2d", "FullyConnected"):
        assert f"{kind} {kinds[kind]}" in line, line
    weights = int(re.search(r"weights ([\d,]+) bytes", line).group(1).replace(",", ""))
    assert 3_400_000 * 4 < weights < 3_600_000 * 4, line  # MobileNetV2's 3.5 M float parameters


@pytest.mark.parametrize("argv", [["export", "multi_io", "--backend", "tpu", "-o", "x.pte"]])
def test_unknown_backend_is_refused(argv, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    assert "tpu" in capsys.readouterr().err
