"""The torch check the minimal wheel relies on: missing or old torch fails with the torch to install."""

from __future__ import annotations

import sys
import types

import pytest

from executorch.exir import _torch_check


def _fake_torch(tmp_path, version: str):
    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('the check must not import torch')\n")
    (package / "version.py").write_text(f"__version__ = '{version}'\ngit_version = 'abc'\n")
    return tmp_path


def test_loaded_torch_passes():
    import torch

    assert _torch_check.installed_torch_version() == torch.__version__
    _torch_check.require_torch()


def test_missing_torch_names_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError) as err:
        _torch_check.require_torch()
    assert f"pip install {_torch_check.TESTED}" in str(err.value) and "not installed" in str(err.value)


@pytest.mark.parametrize("version", ["2.12.1", "2.1.0+cu121", "1.13.1"])
def test_old_torch_on_disk_names_what_to_install(monkeypatch, tmp_path, version):
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.syspath_prepend(str(_fake_torch(tmp_path, version)))
    with pytest.raises(ImportError) as err:
        _torch_check.require_torch()
    assert f"torch {version} is installed" in str(err.value) and "torch>=2.13" in str(err.value)
    assert "torch" not in sys.modules or sys.modules["torch"].__version__ != version


@pytest.mark.parametrize("version", ["2.13.0", "2.13.0+cpu", "2.14.0.dev20260101", "3.0.0"])
def test_new_enough_torch_on_disk_passes_without_importing_it(monkeypatch, tmp_path, version):
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.syspath_prepend(str(_fake_torch(tmp_path, version)))
    assert _torch_check.installed_torch_version() == version
    _torch_check.require_torch()


def test_loaded_old_torch_fails(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="2.5.1"))
    with pytest.raises(ImportError, match="torch 2.5.1 is installed"):
        _torch_check.require_torch()
