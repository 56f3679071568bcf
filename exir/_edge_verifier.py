"""The verifier of edge-dialect programs: what makes `exported_program().dialect == "EDGE"`."""

from __future__ import annotations

from torch._export.verifier import Verifier


class EdgeVerifier(Verifier):
    """torch.export's structural checks under the EDGE dialect name, with edge ops (`EdgeOpOverload`)
    as node targets; which operators an edge graph may hold is checked by
    `executorch.exir.passes.edge.check_edge_ops`."""

    dialect = "EDGE"

    def allowed_op_types(self):
        from executorch.exir.dialects.edge._ops import EdgeOpOverload

        return (*super().allowed_op_types(), EdgeOpOverload)
