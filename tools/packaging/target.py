"""Read the machine the native build targets (this one, or aarch64 by cross-compiling) from the environment."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .mode import BuildConfigError

TARGET_VAR = "EXECUTORCH_TARGET_ARCH"
# Cross builds this tree knows how to make: target CPU -> (build machines it runs on, toolchain file).
_CROSS = {"aarch64": (("x86_64",), "tools/cmake/toolchains/aarch64-linux-gnu.cmake")}
# Spellings other tools use for the same CPU.
_ALIASES = {"arm64": "aarch64", "amd64": "x86_64"}


@dataclass(frozen=True)
class Target:
    """The CPU the compiled rows run on; `toolchain` (from the source root) is set for a cross build."""

    machine: str
    host: str
    toolchain: str | None = None

    @property
    def cross(self) -> bool:
        return self.toolchain is not None

    def platform_tag(self, host_tag: str) -> str:
        """The wheel's platform tag: the build machine's (linux_x86_64) with the target's CPU."""
        return host_tag.replace(self.host, self.machine) if self.cross else host_tag

    def cmake_args(self, root: Path) -> list[str]:
        return [f"-DCMAKE_TOOLCHAIN_FILE={root / self.toolchain}"] if self.toolchain else []


def host_machine() -> str:
    machine = platform.machine().lower()
    return _ALIASES.get(machine, machine)


def target_from_env(env: Mapping[str, str] | None = None, host: str | None = None) -> Target:
    """This machine unless EXECUTORCH_TARGET_ARCH names another CPU this tree can cross-build for."""
    env = os.environ if env is None else env
    host = host or host_machine()
    word = (env.get(TARGET_VAR) or "").strip().lower()
    word = _ALIASES.get(word, word)
    if word in ("", host):
        return Target(machine=host, host=host)
    if word in _CROSS and host in _CROSS[word][0]:
        return Target(machine=word, host=host, toolchain=_CROSS[word][1])
    known = sorted({host} | {cpu for cpu, (hosts, _) in _CROSS.items() if host in hosts})
    raise BuildConfigError(
        f"{TARGET_VAR}={env.get(TARGET_VAR)!r} is not a CPU this {host} machine builds for: set it to one of "
        f"{', '.join(known)}, or leave it unset for this machine's"
    )
