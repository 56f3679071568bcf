"""Emission: edge programs -> the in-memory `Program`; `emit_program` (full wheel) and `EmitterOutput` as
upstream names them."""

__all__ = ["EmitterOutput", "emit_program"]


def __getattr__(name: str):
    if name == "EmitterOutput":
        from executorch.exir.emit._output import EmitterOutput

        return EmitterOutput
    if name == "emit_program":
        from executorch.exir.emit._emit_program import emit_program

        return emit_program
    raise AttributeError(f"module 'executorch.exir.emit' has no attribute {name!r}")
