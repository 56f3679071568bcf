"""Read the build mode (minimal, minimal with flatc, or full) from the environment."""

from __future__ import annotations

import os
from enum import Enum
from typing import Mapping

MINIMAL_VAR = "EXECUTORCH_BUILD_MINIMAL"
FLATC_VAR = "EXECUTORCH_MINIMAL_WITH_FLATC"

_ON = ("1", "ON", "TRUE", "YES")
_OFF = ("", "0", "OFF", "FALSE", "NO")


class BuildConfigError(ValueError):
    """A build setting or build tool is wrong or missing; the message says which and how to fix it."""


class Mode(str, Enum):
    """Which wheel to build; each component row lists the modes that include it."""

    MINIMAL = "minimal"
    MINIMAL_FLATC = "minimal+flatc"
    FULL = "full"


def parse_flag(name: str, value: str | None) -> bool:
    """Return the boolean an environment flag spells, or raise naming the accepted spellings."""
    word = (value or "").strip().upper()
    if word in _ON:
        return True
    if word in _OFF:
        return False
    raise BuildConfigError(
        f"{name}={value!r} is not a recognised value: set it to one of 1, ON, TRUE, YES (any case) "
        f"to turn it on, or to 0, OFF, FALSE, NO or leave it unset/empty to turn it off"
    )


def mode_from_env(env: Mapping[str, str] | None = None) -> Mode:
    """Pick the build mode from EXECUTORCH_BUILD_MINIMAL and EXECUTORCH_MINIMAL_WITH_FLATC."""
    env = os.environ if env is None else env
    minimal = parse_flag(MINIMAL_VAR, env.get(MINIMAL_VAR))
    # Parse the flatc flag in every mode so a typo fails even where the flag has no effect:
    # the full wheel always ships flatc.
    with_flatc = parse_flag(FLATC_VAR, env.get(FLATC_VAR))
    if not minimal:
        return Mode.FULL
    return Mode.MINIMAL_FLATC if with_flatc else Mode.MINIMAL
