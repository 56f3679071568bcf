"""Plugins above the runtime (Python backends, event tracers, operator libraries), found by the entry points their
packages declare and imported on first use, so the runtime imports none of them by name."""

from __future__ import annotations

import functools
from importlib import metadata

BACKENDS = "executorch.runtime.backends"
EVENT_TRACERS = "executorch.runtime.event_tracers"
OPERATOR_LIBRARIES = "executorch.runtime.operator_libraries"


@functools.cache
def _entries(group: str) -> tuple:
    # Every distribution's, not only the first of each name: a stale egg-info in a checkout hides none.
    found = {(ep.name, ep.value): ep for d in metadata.distributions() for ep in d.entry_points.select(group=group)}
    return tuple(found.values())


@functools.cache
def _load(ep: metadata.EntryPoint):
    return ep.load()  # a module registers itself when imported: once per process


def load(group: str, name: str | None = None) -> dict:
    """name -> loaded object, for the group's entries named `name` (all when None)."""
    return {ep.name: _load(ep) for ep in _entries(group) if name in (None, ep.name)}

