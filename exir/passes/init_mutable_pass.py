"""`InitializedMutableBufferPass`: mutated buffers whose name matches keep their initial contents in the file."""

from __future__ import annotations

from typing import Any

from executorch.exir.pass_base import ExportPass, NodeMetadata, ProxyValue


class InitializedMutableBufferPass(ExportPass):
    """Marks each buffer placeholder whose name contains one of `patterns`: the emitter then stores
    the buffer's contents in the program's mutable data, which the runtime loads into the planned
    buffer when it loads the method. Without the mark a mutated buffer starts zeroed or undefined,
    as in ExecuTorch. Run it from `ExecutorchBackendConfig(passes=[...])`."""

    def __init__(self, patterns: list[str]) -> None:
        super().__init__()
        self.patterns = list(patterns)

    def placeholder(self, name: str, arg: Any, meta: NodeMetadata) -> ProxyValue:
        if any(p in name for p in self.patterns):
            meta["et_init_buffer"] = True
        return super().placeholder(name, arg, meta)
