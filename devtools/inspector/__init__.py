"""The Inspector: an ETDump's events joined to the ETRecord's graph (op types, numeric gaps)."""

from executorch.devtools.inspector._inspector import Event, EventBlock, Inspector

__all__ = ["Event", "EventBlock", "Inspector"]
