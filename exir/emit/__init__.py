"""Emission: edge programs -> the in-memory `Program` (`emit_program`); the per-method emitter is in `_emitter`."""

from executorch.exir.emit._emit_program import EmitterOutput, emit_program

__all__ = ["EmitterOutput", "emit_program"]
