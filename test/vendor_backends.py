"""Vendor backends from the published wheel, copied at test time and laid beside this package.

A vendor ships its backend next to the slim wheel: its folders become `executorch.backends.<name>`
without being part of our package. Tests do the same with the published wheel's vendor folders,
copied from the reference environment (ET_REFERENCE_PYTHON) into a temporary directory that is
added to `executorch.backends.__path__`. Nothing of them enters the repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Sequence

import pytest

# Arm's backend imports the shared graph transforms and Cortex-M's passes, quantizer and target config.
ARM_FOLDERS = ("arm", "transforms", "cortex_m")
# Vulkan's imports the shared graph transforms (and XNNPACK's FuseBatchNormPass, which is ours).
VULKAN_FOLDERS = ("vulkan", "transforms")
# Core ML's imports nothing else of the published wheel (its executorchcoreml extension sits in its folder).
COREML_FOLDERS = ("apple/coreml",)
# OpenVINO's imports nothing else either.
OPENVINO_FOLDERS = ("openvino",)


def reference_site_packages() -> Path:
    """The reference environment's site-packages (where the published `executorch` lives), or a
    pytest skip naming what is missing."""
    python = os.environ.get("ET_REFERENCE_PYTHON")
    if not python:
        pytest.skip("ET_REFERENCE_PYTHON is not set: the vendor backends are copied from the published wheel "
                    "in that environment (see ../shared/tools/reference-runtime/README.md)")
    if not Path(python).exists():
        pytest.skip(f"ET_REFERENCE_PYTHON={python} does not exist")
    proc = subprocess.run([python, "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        pytest.skip(f"ET_REFERENCE_PYTHON={python} does not start: {proc.stderr.strip()[-500:]}")
    site = Path(proc.stdout.strip())
    if not (site / "executorch" / "backends").is_dir():
        pytest.skip(f"the reference environment has no published executorch in {site}")
    return site


def copy_vendor_backends(dest: Path, folders: Sequence[str] = ARM_FOLDERS) -> Path:
    """Copy the published wheel's `executorch/backends/<folder>` for each folder into
    `dest/executorch/backends/` and return that directory (the entry for `executorch.backends.__path__`)."""
    source = reference_site_packages() / "executorch" / "backends"
    missing = [name for name in folders if not (source / name).is_dir()]
    if missing:
        pytest.skip(f"the published wheel in the reference environment has no backends/{', '.join(missing)}")
    backends = dest / "executorch" / "backends"
    for name in folders:
        shutil.copytree(source / name, backends / name, ignore=shutil.ignore_patterns("__pycache__"))
    return backends


def add_vendor_path(backends: Path) -> None:
    """Make the folders in `backends` importable as `executorch.backends.<name>` in this process.

    `executorch.backends` is a namespace package: its `__path__` keeps an entry appended to it as long as
    `executorch.__path__` does not change, so the vendor's modules resolve beside ours, ours first."""
    import executorch.backends

    entry = str(backends)
    if entry not in list(executorch.backends.__path__):
        executorch.backends.__path__.append(entry)
    # A vendor name imported before (and failed, or resolved elsewhere) would otherwise stay cached.
    for name in [m for m in sys.modules if m.split(".")[:2] == ["executorch", "backends"]
                 and len(m.split(".")) > 2 and (backends / m.split(".")[2]).is_dir()]:
        del sys.modules[name]


def vendor_python_command(backends: Path, module: str, *args: str, python: str = sys.executable) -> list[str]:
    """The command that runs `python -m <module> args...` in a new process of this interpreter with the
    vendor folders in `backends` laid beside our package, as `add_vendor_path` does in this one."""
    launcher = ("import runpy, sys, executorch.backends as b; b.__path__.append(sys.argv[1]); "
                "sys.argv = sys.argv[2:]; runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)")
    return [python, "-c", launcher, str(backends), module, *args]


@pytest.fixture(scope="session")
def arm_backends(tmp_path_factory) -> Path:
    """Arm's backend and the folders it imports, copied from the published wheel and importable here."""
    backends = copy_vendor_backends(tmp_path_factory.mktemp("vendor"), ARM_FOLDERS)
    add_vendor_path(backends)
    return backends


@pytest.fixture(scope="session")
def vulkan_backends(tmp_path_factory) -> Path:
    """Vulkan's backend and the folders it imports, copied from the published wheel and importable here."""
    backends = copy_vendor_backends(tmp_path_factory.mktemp("vendor_vulkan"), VULKAN_FOLDERS)
    add_vendor_path(backends)
    return backends


@pytest.fixture(scope="session")
def coreml_backends(tmp_path_factory) -> Path:
    """Core ML's backend, copied from the published wheel and importable here."""
    backends = copy_vendor_backends(tmp_path_factory.mktemp("vendor_coreml"), COREML_FOLDERS)
    add_vendor_path(backends)
    return backends


@pytest.fixture(scope="session")
def openvino_backends(tmp_path_factory) -> Path:
    """OpenVINO's backend, copied from the published wheel (it is imported in the processes that run its flow)."""
    return copy_vendor_backends(tmp_path_factory.mktemp("vendor_openvino"), OPENVINO_FOLDERS)
