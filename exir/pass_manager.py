"""Upstream's pass managers: `PassManager` over a GraphModule (torch.fx's, nested pass lists flattened),
`ExportedProgramPassManager` over an ExportedProgram; and `dead_code_elimination_pass`."""

from __future__ import annotations

from typing import Callable, Optional

import torch
from torch.fx.passes.infra.pass_manager import PassManager as _FxPassManager, pass_result_wrapper
from torch.utils import _pytree as pytree

from executorch.exir.error import ExportError
from executorch.exir.pass_base import ExportedProgramPassResult, PassResult
from executorch.exir.passes._graph import _copy_program

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
        _check_graph(module)


def _check_graph(module: torch.fx.GraphModule) -> None:
    module.recompile()
    module.graph.lint()
    for node in module.graph.nodes:
        if node.op == "call_method":
            raise ExportError(f"node {node.name} calls method {node.target!r}; edge graphs call operators only")


class ExportedProgramPassManager(_FxPassManager):
    """Runs `passes` in order over an ExportedProgram, `steps` times at most (stopping once a round changes
    nothing): an ExportedProgramPassBase gets the program, any other pass its graph module (returning a
    PassResult, a GraphModule or None for changed in place) and the signature and range constraints follow
    the graph. Returns an ExportedProgramPassResult. Passes run on a copy of the graph, so the program given
    keeps its graph (its tensors are shared). `add_pass` and `constraints` are torch.fx's PassManager's."""

    def __init__(self, passes: Optional[list] = None, constraints: Optional[list] = None,
                 run_checks_after_each_pass: bool = False, suppress_check_failures: bool = False,
                 steps: int = 1) -> None:
        super().__init__(pytree.tree_leaves(passes or []), constraints=constraints, steps=steps,
                         run_checks_after_each_pass=run_checks_after_each_pass,
                         suppress_check_failures=suppress_check_failures)

    def __call__(self, exported_program, override_verifiers: Optional[list] = None) -> ExportedProgramPassResult:
        from executorch.exir.program._transform import _run_pass

        if not self._validated:
            self.solve_constraints()
        ep = _copy_program(exported_program)
        if override_verifiers:
            ep._verifiers = list(override_verifiers)
        self.check(ep)
        modified = False
        for _ in range(self.steps):
            changed = False
            for p in self.passes:
                ep, modified_now = _run_pass(ep, p, override_verifiers)
                changed = changed or modified_now
                if self.run_checks_after_each_pass:
                    self.check(ep)
            modified = modified or changed
            if not changed:
                break
        self.check(ep)
        return ExportedProgramPassResult(ep, modified)

    def check(self, exported_program) -> None:
        """The program's graph is linted and calls no methods; the program validates."""
        _check_graph(exported_program.graph_module)
        exported_program.validate()


def dead_code_elimination_pass(graph_module: torch.fx.GraphModule) -> PassResult:
    """Drops the nodes whose values nothing uses (`executorch.exir.passes.dead_code_elimination_pass`)."""
    modified = graph_module.graph.eliminate_dead_code()
    graph_module.recompile()
    return PassResult(graph_module, modified)
