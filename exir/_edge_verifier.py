"""The verifier of edge-dialect programs: what makes `exported_program().dialect == "EDGE"`."""

from __future__ import annotations

from torch._export.verifier import Verifier


class EdgeVerifier(Verifier):
    """torch.export's structural checks under the EDGE dialect name; which operators an edge
    graph may hold is checked by `executorch.exir.passes.edge.check_edge_ops`."""

    dialect = "EDGE"
