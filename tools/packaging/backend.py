"""PEP 517 backend: setuptools, asking for what the selected rows build with (CMake, Ninja and friends for
native code, zopfli for the minimal wheel)."""

from __future__ import annotations

from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (  # noqa: F401  (re-exported hooks)
    build_editable,
    build_sdist,
    build_wheel,
    get_requires_for_build_sdist,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

from .mode import BuildConfigError, mode_from_env
from .plan import plan
from .target import target_from_env


def _planned_requires() -> list[str]:
    try:
        return list(plan(Path.cwd(), mode_from_env(), target_from_env()).build_requires)
    except BuildConfigError as err:
        raise SystemExit(f"error: {err}") from None


def get_requires_for_build_wheel(config_settings=None) -> list[str]:
    """setuptools' own needs plus the selected rows' build requirements."""
    return _setuptools.get_requires_for_build_wheel(config_settings) + _planned_requires()


def get_requires_for_build_editable(config_settings=None) -> list[str]:
    """Same as for a wheel: an editable install builds the same native parts."""
    return _setuptools.get_requires_for_build_editable(config_settings) + _planned_requires()
