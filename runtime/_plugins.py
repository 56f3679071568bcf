"""What the runtime finds by name and never imports by name: the Python backends, event tracers and operator
libraries above it register themselves as entry points in their package's metadata.

An installed distribution declares, for example, `XnnpackBackend = executorch.backends.xnnpack.runtime._backend`
in the group `executorch.runtime.backends`; the runtime imports that module the first time it looks a backend up,
and the module registers itself (`python_backend.register_backend`). A vendor's package adds its backend the
same way, in its own metadata. This package's own entries come from the component table
(`tools/packaging/components.py`), so a wheel declares exactly the plugins it ships.
"""

from __future__ import annotations

import threading
from typing import Any

BACKENDS = "executorch.runtime.backends"
EVENT_TRACERS = "executorch.runtime.event_tracers"
OPERATOR_LIBRARIES = "executorch.runtime.operator_libraries"

_lock = threading.RLock()  # a plugin's import may look another one up
_loaded: dict[tuple[str, str], Any] = {}
_groups: dict[str, list] = {}


def _entries(group: str) -> list:
    """The group's entry points, read from the installed packages' metadata once per process."""
    with _lock:
        if group not in _groups:
            from importlib.metadata import distributions

            # Every distribution's entries, not entry_points()'s first distribution of each name: run from a
            # checkout, a stale executorch.egg-info on sys.path would hide the installed package's entries.
            seen, found = set(), []
            for dist in distributions():
                for ep in dist.entry_points.select(group=group):
                    if (ep.name, ep.value) not in seen:
                        seen.add((ep.name, ep.value))
                        found.append(ep)
            _groups[group] = found
        return _groups[group]


def load(group: str, name: str | None = None) -> dict[str, Any]:
    """Load the group's entries named `name` (all of them when None), each once per process; returns
    name -> the loaded object (a module, or the attribute an entry names after `:`)."""
    out = {}
    for ep in _entries(group):
        if name is not None and ep.name != name:
            continue
        key = (group, ep.value)
        with _lock:
            if key not in _loaded:
                _loaded[key] = ep.load()
            out[ep.name] = _loaded[key]
    return out


def names(group: str) -> list[str]:
    """The names the group's entries declare, without loading them."""
    return sorted({ep.name for ep in _entries(group)})

