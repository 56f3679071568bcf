"""`executorch_call_delegate`: the graph operator that stands for one lowered partition (torch's, as upstream uses it).

torch ships the operator with its eager, fake-tensor, functionalization and tracing rules, so a module
that calls a LoweredBackendModule can itself be exported with torch.export (the call is traced as one
node and the lowered module becomes an attribute of the exported graph). `get_lowered_module_name(root,
lowered_module)` adds a lowered module to `root` under a free name (lowered_module_0, _1, ...)."""

from __future__ import annotations

from torch._higher_order_ops.executorch_call_delegate import (  # noqa: F401
    executorch_call_delegate,
    get_lowered_module_name,
    is_lowered_module,
)
