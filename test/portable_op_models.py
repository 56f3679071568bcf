"""One-operator models for the portable kernels upstream's library has beyond the common ones, by family.

Each `PortableOpCase` calls one operator and names the operator the program must then hold (`op`,
as programs name it) and the ATen ops the exporter must keep whole (`preserve`, "aten.glu.default":
torch.export/to_edge decomposes many of them otherwise). Importable by the published ExecuTorch's
Python too (only torch), so both exporters write the same models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F

A = torch.ops.aten


@dataclass(frozen=True)
class PortableOpCase:
    name: str
    family: str
    op: str  # the operator the program holds, e.g. "aten::glu.out"
    fn: Callable[..., Any]
    inputs: Callable[[], tuple]
    preserve: tuple[str, ...] = ()
    # How outputs are checked: "eager" (against the module run eagerly), "shape" (sizes and dtypes only:
    # uninitialised memory), or "random" (test-specific statistics).
    check: str = "eager"
    # Why the published exporter cannot write this case (then only this package's exporter does), or ours.
    published_skip: Optional[str] = None
    ours_skip: Optional[str] = None
    # Why the published 1.5.1 runtime cannot run this case, when it cannot.
    reference_failure: Optional[str] = None


def _seed(fn: Callable[[], tuple]) -> Callable[[], tuple]:
    def make() -> tuple:
        torch.manual_seed(0)
        return fn()
    return make


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def _ints(lo: int, hi: int) -> torch.Tensor:
    return torch.randint(lo, hi, (3, 5), dtype=torch.int32)


def _case(name, family, op, fn, inputs, **kw) -> PortableOpCase:
    return PortableOpCase(name, family, op, fn, _seed(inputs), **kw)


def _bn_legit_no_training(x, w, b, rm, rv):
    # The program is rewritten into _native_batch_norm_legit.out (training=True) by the test: no exporter writes it.
    return A._native_batch_norm_legit_no_training.default(x, w, b, rm, rv, 0.1, 1e-5)


def _maxpool_backward_inputs() -> tuple:
    x = _r(1, 3, 6, 6)
    _, idx = F.max_pool2d(x, 2, return_indices=True)
    return _r(1, 3, 3, 3), x, idx


CASES: list[PortableOpCase] = [
    # Elementwise math and activations (op_unary.cpp).
    _case("acosh", "unary", "aten::acosh.out", torch.acosh, lambda: (torch.rand(3, 5) * 4 + 1,)),
    _case("asinh", "unary", "aten::asinh.out", torch.asinh, lambda: (_r(3, 5) * 3,)),
    _case("atanh", "unary", "aten::atanh.out", torch.atanh, lambda: (torch.rand(3, 5) * 1.8 - 0.9,)),
    _case("logit", "unary", "aten::logit.out", lambda x: torch.logit(x), lambda: (torch.rand(3, 5) * 0.98 + 0.01,),
          preserve=("aten.logit.default",)),
    _case("logit_eps", "unary", "aten::logit.out", lambda x: torch.logit(x, 0.05), lambda: (torch.rand(3, 5),),
          preserve=("aten.logit.default",)),
    _case("bitwise_not", "unary", "aten::bitwise_not.out", torch.bitwise_not,
          lambda: (torch.randint(-100, 100, (3, 5), dtype=torch.int32),)),
    _case("bitwise_not_bool", "unary", "aten::bitwise_not.out", torch.bitwise_not, lambda: (torch.rand(3, 5) > 0.5,)),
    _case("glu", "unary", "aten::glu.out", lambda x: F.glu(x, -1), lambda: (_r(3, 8),), preserve=("aten.glu.default",)),
    _case("glu_dim0", "unary", "aten::glu.out", lambda x: F.glu(x, 0), lambda: (_r(4, 3, 2),),
          preserve=("aten.glu.default",)),
    _case("conj_physical", "unary", "aten::_conj_physical.out", lambda x: A._conj_physical.default(x) * 2,
          lambda: (_r(3, 4),), reference_failure="the published kernel takes complex tensors only (0x12)"),
    # Shifts (op_binary.cpp).
    _case("left_shift", "binary", "aten::bitwise_left_shift.Tensor_out", torch.bitwise_left_shift,
          lambda: (torch.randint(-1000, 1000, (3, 5)), torch.randint(0, 70, (3, 5))),
          preserve=("aten.bitwise_left_shift.Tensor",)),
    _case("left_shift_scalar", "binary", "aten::bitwise_left_shift.Tensor_Scalar_out",
          lambda x: torch.bitwise_left_shift(x, 3), lambda: (torch.randint(-100, 100, (3, 5), dtype=torch.int32),),
          preserve=("aten.bitwise_left_shift.Tensor_Scalar",)),
    _case("right_shift", "binary", "aten::bitwise_right_shift.Tensor_out", torch.bitwise_right_shift,
          lambda: (torch.randint(-1000, 1000, (3, 5), dtype=torch.int32), _ints(0, 32)),
          preserve=("aten.bitwise_right_shift.Tensor",)),
    _case("right_shift_past_width", "binary", "aten::bitwise_right_shift.Tensor_out", torch.bitwise_right_shift,
          lambda: (torch.randint(-1000, 1000, (3, 5), dtype=torch.int32), _ints(30, 40)),
          preserve=("aten.bitwise_right_shift.Tensor",),
          reference_failure="the published kernel shifts an int32 by 32 or more as the CPU does, not as torch"),
    _case("right_shift_scalar", "binary", "aten::bitwise_right_shift.Tensor_Scalar_out",
          lambda x: torch.bitwise_right_shift(x, 2), lambda: (torch.randint(-100, 100, (3, 5), dtype=torch.int8),),
          preserve=("aten.bitwise_right_shift.Tensor_Scalar",)),
    # Copies and views (op_layout.cpp).
    _case("as_strided_copy", "layout", "aten::as_strided_copy.out", lambda x: torch.as_strided(x, (3, 3), (4, 1), 1),
          lambda: (_r(4, 4),)),
    _case("detach_copy", "layout", "aten::detach_copy.out", lambda x: A.detach_copy.default(x) * 2,
          lambda: (_r(3, 4),)),
    _case("lift_fresh_copy", "layout", "aten::lift_fresh_copy.out", lambda x: A.lift_fresh_copy.default(x) * 2,
          lambda: (_r(3, 4),), published_skip="the published exporter turns lift_fresh_copy into a clone"),
    _case("diagonal_copy", "layout", "aten::diagonal_copy.out", lambda x: torch.diagonal(x, 1, 0, 2),
          lambda: (_r(4, 3, 5),)),
    _case("diagonal_copy_below", "layout", "aten::diagonal_copy.out", lambda x: torch.diagonal(x, -2),
          lambda: (_r(5, 4),)),
    _case("narrow_copy", "layout", "aten::narrow_copy.out", lambda x: torch.narrow_copy(x, 1, 1, 2),
          lambda: (_r(3, 4),)),
    _case("t_copy", "layout", "aten::t_copy.out", lambda x: A.t_copy.default(x), lambda: (_r(3, 4),),
          preserve=("aten.t_copy.default",)),
    _case("unfold_copy", "layout", "aten::unfold_copy.out", lambda x: x.unfold(1, 3, 2), lambda: (_r(2, 7, 3),)),
    _case("pixel_shuffle", "layout", "aten::pixel_shuffle.out", lambda x: F.pixel_shuffle(x, 2),
          lambda: (_r(2, 8, 3, 5),), preserve=("aten.pixel_shuffle.default",)),
    _case("pixel_unshuffle", "layout", "aten::pixel_unshuffle.out", lambda x: F.pixel_unshuffle(x, 2),
          lambda: (_r(2, 3, 4, 6),), preserve=("aten.pixel_unshuffle.default",)),
    _case("roll", "layout", "aten::roll.out", lambda x: torch.roll(x, (1, -2), (0, 2)), lambda: (_r(3, 2, 5),),
          preserve=("aten.roll.default",)),
    _case("roll_flat", "layout", "aten::roll.out", lambda x: torch.roll(x, 4), lambda: (_r(3, 5),),
          preserve=("aten.roll.default",), reference_failure="the published kernel refuses a roll without dims (0x12)"),
    _case("tril", "layout", "aten::tril.out", lambda x: torch.tril(x, -1), lambda: (_r(2, 4, 5),),
          preserve=("aten.tril.default",)),
    _case("tril_int", "layout", "aten::tril.out", lambda x: torch.tril(x, 2), lambda: (torch.randint(1, 9, (5, 4)),),
          preserve=("aten.tril.default",)),
    # Padding by mirroring or repeating the edge (op_layout.cpp).
    _case("reflection_pad1d", "pad", "aten::reflection_pad1d.out", lambda x: F.pad(x, (2, 3), mode="reflect"),
          lambda: (_r(2, 3, 6),), preserve=("aten.reflection_pad1d.default",)),
    _case("reflection_pad2d", "pad", "aten::reflection_pad2d.out", lambda x: F.pad(x, (2, 1, 1, 3), mode="reflect"),
          lambda: (_r(2, 3, 5, 6),), preserve=("aten.reflection_pad2d.default",)),
    _case("reflection_pad3d", "pad", "aten::reflection_pad3d.out",
          lambda x: F.pad(x, (1, 2, 1, 0, 0, 2), mode="reflect"), lambda: (_r(1, 2, 3, 4, 5),),
          preserve=("aten.reflection_pad3d.default",)),
    _case("replication_pad1d", "pad", "aten::replication_pad1d.out", lambda x: F.pad(x, (2, 3), mode="replicate"),
          lambda: (_r(2, 3, 6),), preserve=("aten.replication_pad1d.default",)),
    _case("replication_pad2d", "pad", "aten::replication_pad2d.out",
          lambda x: F.pad(x, (2, 1, 1, 3), mode="replicate"), lambda: (_r(3, 5, 6),),
          preserve=("aten.replication_pad2d.default",)),
    _case("replication_pad3d", "pad", "aten::replication_pad3d.out",
          lambda x: F.pad(x, (1, 2, 1, 0, 0, 2), mode="replicate"), lambda: (_r(1, 2, 3, 4, 5),),
          preserve=("aten.replication_pad3d.default",)),
    # Factories (op_fill.cpp, op_layout.cpp).
    _case("fill_scalar", "fill", "aten::fill.Scalar_out", lambda x: torch.fill(x, 2.5), lambda: (_r(3, 4),),
          preserve=("aten.fill.Scalar",)),
    _case("fill_tensor", "fill", "aten::fill.Tensor_out", lambda x, v: torch.fill(x, v),
          lambda: (_r(3, 4), torch.tensor(1.5)), preserve=("aten.fill.Tensor",)),
    _case("empty", "fill", "aten::empty.out", lambda x: A.empty.memory_format([3, 4]), lambda: (_r(3, 4),),
          check="shape", published_skip="the published exporter writes empty as _empty_dim_order"),
    _case("empty_dim_order", "fill", "dim_order_ops::_empty_dim_order.out", lambda x: torch.empty(2, 5),
          lambda: (_r(3, 4),), check="shape", ours_skip="this package's exporter writes torch.empty as empty.out"),
    # Reductions (op_reduce.cpp).
    _case("max_unary", "reduce", "aten::max.unary_out", lambda x: torch.max(x), lambda: (_r(3, 4),)),
    _case("min_unary", "reduce", "aten::min.unary_out", lambda x: torch.min(x), lambda: (_r(3, 4),)),
    _case("max_unary_int", "reduce", "aten::max.unary_out", lambda x: torch.max(x),
          lambda: (torch.randint(-50, 50, (4, 3)),)),
    _case("var_mean", "reduce", "aten::var_mean.correction_out",
          lambda x: torch.var_mean(x, 1, correction=1, keepdim=True), lambda: (_r(3, 6),),
          preserve=("aten.var_mean.correction",)),
    _case("var_mean_all", "reduce", "aten::var_mean.correction_out", lambda x: torch.var_mean(x, correction=0),
          lambda: (_r(3, 6),), preserve=("aten.var_mean.correction",)),
    # Data-dependent output sizes (op_index.cpp) and masked writes (op_scatter.cpp).
    _case("nonzero", "masked", "aten::nonzero.out", torch.nonzero, lambda: (torch.randint(0, 2, (3, 4, 2)),)),
    _case("masked_select", "masked", "aten::masked_select.out", torch.masked_select,
          lambda: (_r(3, 4), torch.rand(4) > 0.4), preserve=("aten.masked_select.default",)),
    _case("masked_scatter", "masked", "aten::masked_scatter.out", lambda x, m, s: x.masked_scatter(m, s),
          lambda: (_r(3, 4), torch.rand(3, 4) > 0.5, _r(13))),
    _case("repeat_interleave", "masked", "aten::repeat_interleave.Tensor_out",
          lambda r: torch.repeat_interleave(r, output_size=6), lambda: (torch.tensor([1, 0, 2, 3]),)),
    # Normalisation (op_normalization.cpp): written by rewriting the no-training call (see the test).
    _case("batch_norm_legit_training", "norm", "aten::_native_batch_norm_legit_no_training.out",
          _bn_legit_no_training, lambda: (_r(2, 3, 4, 4), _r(3), _r(3), torch.zeros(3), torch.ones(3)),
          check="rewrite", reference_failure="the published kernel refuses this call (error 0x12)"),
    # Distances (op_linear.cpp).
    _case("cdist", "distance", "aten::_cdist_forward.out", torch.cdist, lambda: (_r(2, 4, 3), _r(2, 5, 3))),
    _case("cdist_p1_broadcast", "distance", "aten::_cdist_forward.out", lambda a, b: torch.cdist(a, b, p=1.0),
          lambda: (_r(2, 1, 4, 3), _r(3, 5, 3))),
    _case("cdist_p3", "distance", "aten::_cdist_forward.out", lambda a, b: torch.cdist(a, b, p=3.0),
          lambda: (_r(4, 3), _r(5, 3))),
    _case("pdist", "distance", "aten::_pdist_forward.out", F.pdist, lambda: (_r(5, 3),)),
    _case("pdist_inf", "distance", "aten::_pdist_forward.out", lambda x: F.pdist(x, float("inf")), lambda: (_r(5, 3),)),
    # Resampling (op_upsample.cpp).
    _case("upsample_bilinear_aa_down", "resample", "aten::_upsample_bilinear2d_aa.out",
          lambda x: F.interpolate(x, size=(3, 5), mode="bilinear", antialias=True), lambda: (_r(1, 2, 8, 11),)),
    _case("upsample_bilinear_aa_up", "resample", "aten::_upsample_bilinear2d_aa.out",
          lambda x: F.interpolate(x, size=(7, 9), mode="bilinear", antialias=True, align_corners=True),
          lambda: (_r(2, 2, 4, 5),)),
    _case("grid_sampler_bilinear", "resample", "aten::grid_sampler_2d.out",
          lambda x, g: F.grid_sample(x, g, align_corners=False),
          lambda: (_r(2, 3, 5, 6), torch.rand(2, 4, 3, 2) * 2.4 - 1.2)),
    _case("grid_sampler_nearest_border", "resample", "aten::grid_sampler_2d.out",
          lambda x, g: F.grid_sample(x, g, mode="nearest", padding_mode="border", align_corners=True),
          lambda: (_r(1, 2, 5, 6), torch.rand(1, 4, 3, 2) * 2.4 - 1.2)),
    _case("grid_sampler_reflection", "resample", "aten::grid_sampler_2d.out",
          lambda x, g: F.grid_sample(x, g, padding_mode="reflection", align_corners=False),
          lambda: (_r(1, 2, 5, 6), torch.rand(1, 4, 3, 2) * 3 - 1.5)),
    # Gradients (op_convolution.cpp, op_pool.cpp).
    _case("convolution_backward", "backward", "aten::convolution_backward.out",
          lambda g, x, w: A.convolution_backward.default(g, x, w, [4], [2, 1], [1, 1], [1, 2], False, [0, 0], 2,
                                                         [True, True, True]),
          lambda: (_r(2, 4, 3, 4), _r(2, 6, 6, 6), _r(4, 3, 3, 3))),
    _case("convolution_backward_1d", "backward", "aten::convolution_backward.out",
          lambda g, x, w: A.convolution_backward.default(g, x, w, [2], [1], [1], [1], False, [0], 1,
                                                         [True, True, True]),
          lambda: (_r(1, 2, 7), _r(1, 3, 7), _r(2, 3, 3)),
          reference_failure="the published kernel takes 2-D convolutions only (error 0x12)"),
    _case("max_pool2d_backward", "backward", "aten::max_pool2d_with_indices_backward.grad_input",
          lambda g, x, i: A.max_pool2d_with_indices_backward.default(g, x, [2, 2], [2, 2], [0, 0], [1, 1], False, i),
          _maxpool_backward_inputs),
    # Random (op_random.cpp): checked by their statistics.
    _case("rand", "random", "aten::rand.out", lambda x: torch.rand(64, 128) + x, lambda: (torch.zeros(1),),
          check="random"),
    _case("randn", "random", "aten::randn.out", lambda x: torch.randn(64, 128) + x, lambda: (torch.zeros(1),),
          check="random"),
    _case("dropout", "random", "aten::native_dropout.out", lambda x: A.native_dropout.default(x, 0.25, True),
          lambda: (torch.rand(64, 128) + 1,), check="random",
          reference_failure="the published kernel keeps elements unscaled, where torch scales them by 1 / (1 - p)"),
    _case("dropout_p0", "random", "aten::native_dropout.out", lambda x: A.native_dropout.default(x, 0.0, True),
          lambda: (_r(8, 16),)),
    _case("dropout_eval", "random", "aten::native_dropout.out", lambda x: A.native_dropout.default(x, 0.5, False),
          lambda: (_r(8, 16),)),
]

CASES_BY_NAME = {c.name: c for c in CASES}
FAMILIES = sorted({c.family for c in CASES})


class OneOp(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def preserved(case: PortableOpCase) -> list:
    """The case's ops to keep whole, as operator overloads."""
    found = []
    for dotted in case.preserve:
        ns, name, overload = dotted.split(".")
        found.append(getattr(getattr(getattr(torch.ops, ns), name), overload))
    return found


def export(case: PortableOpCase) -> bytes:
    """The case's `.pte` written by the executorch importable here (this package's or the published one)."""
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    ep = torch.export.export(OneOp(case.fn), case.inputs())
    config = EdgeCompileConfig(preserve_ops=preserved(case), _check_ir_validity=False)
    return bytes(to_edge_transform_and_lower(ep, compile_config=config).to_executorch().buffer)


if __name__ == "__main__":
    # With the published ExecuTorch's Python: OUT_DIR [NAME ...] writes NAME.pte for each case it can.
    import sys
    from pathlib import Path

    out = Path(sys.argv[1])
    for case in CASES:
        if case.published_skip or (sys.argv[2:] and case.name not in sys.argv[2:]):
            continue
        try:
            (out / f"{case.name}.pte").write_bytes(export(case))
        except Exception as e:  # reported per case by the test that needs the file
            (out / f"{case.name}.err.txt").write_text(f"{type(e).__name__}: {e}")
