"""Emission: edge programs -> the in-memory `Program`; `emit_program` (full wheel) as upstream names it."""

__all__ = ["EmitterOutput", "emit_program"]


def __getattr__(name: str):
    if name in __all__:
        from executorch.exir.emit import _emit_program

        return getattr(_emit_program, name)
    raise AttributeError(f"module 'executorch.exir.emit' has no attribute {name!r}")
