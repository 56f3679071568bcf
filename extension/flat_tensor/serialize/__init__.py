"""The `.ptd` (flat-tensor) writer and reader: FlatBuffers written and read directly from Python."""
