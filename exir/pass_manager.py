"""Upstream's `PassManager` (torch.fx's pass manager over a GraphModule, nested pass lists flattened) and `dead_code_elimination_pass`."""

from __future__ import annotations

from typing import Callable, Optional

import torch
from torch.fx.passes.infra.pass_manager import PassManager as _FxPassManager, pass_result_wrapper
from torch.utils import _pytree as pytree

from executorch.exir.error import ExportError
from executorch.exir.pass_base import PassResult

PassType = Callable[[torch.fx.GraphModule], Optional[object]]


class PassManager(_FxPassManager):
    """Runs `passes` (a list, possibly of lists) in order on a GraphModule: `PassManager(passes)(gm)` returns a
    PassResult; a pass may return a PassResult or None (it changed the module in place)."""

    def __init__(self, passes: Optional[list] = None, run_checks_after_each_pass: bool = False,
                 suppress_check_failures: bool = False, steps: int = 1) -> None:
        flat = [pass_result_wrapper(p) for p in pytree.tree_leaves(passes or [])]
        super().__init__(flat, run_checks_after_each_pass=run_checks_after_each_pass,
                         suppress_check_failures=suppress_check_failures, steps=steps)

    def check(self, module: torch.nn.Module) -> None:
        """The module is a linted GraphModule that calls no methods (only a delegate may)."""
        if not isinstance(module, torch.fx.GraphModule):
            raise ExportError(f"PassManager runs on a torch.fx.GraphModule, not {type(module).__name__}")
        module.recompile()
        module.graph.lint()
        for node in module.graph.nodes:
            if node.op == "call_method":
                raise ExportError(f"node {node.name} calls method {node.target!r}; edge graphs call operators only")


def dead_code_elimination_pass(graph_module: torch.fx.GraphModule) -> PassResult:
    """Drops the nodes whose values nothing uses (`executorch.exir.passes.dead_code_elimination_pass`)."""
    modified = graph_module.graph.eliminate_dead_code()
    graph_module.recompile()
    return PassResult(graph_module, modified)
