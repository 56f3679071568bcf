"""Platform checks upstream's recipe tests and target recipes guard backend lowering with."""

from __future__ import annotations

import platform
import sys

import torch


def is_fbcode() -> bool:
    """Whether torch is Meta's internal build (it has no `torch.version.git_version`)."""
    return not hasattr(torch.version, "git_version")


def is_supported_platform_for_coreml_lowering() -> bool:
    """Whether coremltools, which Core ML lowering needs, has wheels here: Linux x86_64 or macOS on Apple
    silicon, Python before 3.14. It says nothing of whether a Core ML backend is installed."""
    if sys.version_info >= (3, 14):
        return False
    system, machine = platform.system(), platform.machine().lower()
    return (system == "Linux" and machine == "x86_64") or (system == "Darwin" and machine in ("arm64", "aarch64"))


def is_supported_platform_for_qnn_lowering() -> bool:
    """Whether Qualcomm's QNN SDK, which QNN lowering needs, exists for this platform: Linux on x86."""
    return platform.system().lower() == "linux" and platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
