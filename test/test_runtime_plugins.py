"""The runtime finds the Python backends, event tracers and operator libraries above it through entry points in
the installed packages' metadata, never by importing them by name: this package's own come from the component
table, and a vendor's package adds its backend the same way."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from executorch.runtime import _plugins

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_declares_its_plugins_from_the_component_table():
    from tools.packaging.components import COMPONENTS

    declared = {(group, entry.split("=")[0].strip()) for row in COMPONENTS for group, entry in row.entry_points
                if group != "console_scripts"}
    assert declared == {(_plugins.BACKENDS, "XnnpackBackend"), (_plugins.BACKENDS, "ExecutorBackend"),
                        (_plugins.EVENT_TRACERS, "etdump"), (_plugins.OPERATOR_LIBRARIES, "llama")}
    # The installed metadata (the editable install here, a wheel elsewhere) holds what the table declares.
    installed = {(group, ep.name) for group in (_plugins.BACKENDS, _plugins.EVENT_TRACERS, _plugins.OPERATOR_LIBRARIES)
                 for ep in _plugins._entries(group)}
    assert declared <= installed, f"reinstall the package (pip install -e .): {sorted(declared - installed)}"


_VENDOR_MODULE = '''
from executorch.runtime.python_backend import PythonBackend, register_backend

class VendorX(PythonBackend):
    def init(self, processed, compile_specs, named_data):
        return bytes(processed)
    def execute(self, handle, args):
        pass

register_backend("VendorX", VendorX())
'''

_PROBE = '''
import sys
from executorch.runtime import python_backend
assert "vendorx_backend" not in sys.modules            # nothing imported it yet
backend = python_backend.get_backend("VendorX")
print(type(backend).__name__ if backend else None, "vendorx_backend" in sys.modules)
print("VendorX" in python_backend.registered_backend_names())
'''


def _vendor_site(tmp_path: Path, entry_points: str) -> Path:
    site = tmp_path / "site"
    info = site / "vendorx-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vendorx\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)
    (site / "vendorx_backend.py").write_text(_VENDOR_MODULE)
    return site


def _probe(site: Path) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", _PROBE], env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=300, cwd=site)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.split("\n")[:2]


def test_a_vendor_package_registers_its_backend_through_an_entry_point(tmp_path: Path):
    site = _vendor_site(tmp_path, "[executorch.runtime.backends]\nVendorX = vendorx_backend\n")
    assert _probe(site) == ["VendorX True", "True"]


def test_without_the_entry_point_the_backend_is_not_found(tmp_path: Path):
    site = _vendor_site(tmp_path, "[console_scripts]\nvendorx = vendorx_backend:main\n")
    assert _probe(site) == ["None False", "False"]


def test_the_runtime_imports_only_the_plugin_a_program_needs():
    """A program delegating to ExecutorBackend loads that backend alone: nothing above the runtime is imported."""
    probe = textwrap.dedent('''
        import sys, torch
        from executorch.exir import to_edge_transform_and_lower
        from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import ExecutorBackendPartitioner
        import executorch.runtime._python as engine
        ep = torch.export.export(torch.nn.Linear(2, 2), (torch.ones(1, 2),))
        lowered = to_edge_transform_and_lower(ep, partitioner=[ExecutorBackendPartitioner()]).to_executorch()
        program = engine.load_program(lowered.buffer)
        out = program.load_method("forward").execute([torch.ones(1, 2)])
        assert "executorch.runtime._python._executor_backend" in sys.modules
        above = ("executorch.backends", "executorch.devtools", "executorch.extension.llm")
        print(sorted({m for m in sys.modules if m.startswith(above)}))
    ''')
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]"
