"""Each XNNPACK node kind compiled to a step over torch ops, its parameters checked at compile time.

A step reads and writes an environment: one slot per value, holding a float tensor (float values),
an integer tensor (statically quantized values) or (int8, scale, zero point) (qdint8 values).
Shapes follow XNNPACK's layouts: convolutions and pooling are NHWC, filters OHWI (depthwise 1HWO).
Quantized convolutions and fully-connected layers accumulate exactly (integers held in float64)
and requantize in float32 with round-half-to-even, as XNNPACK's fp32 requantization does.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import torch
import torch.nn.functional as F

from executorch.backends.xnnpack.runtime import _quant
from executorch.backends.xnnpack.runtime._values import FLOATS, STORAGE, Value, ValueTable, bad
from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs
from executorch.runtime._errors import ExecuTorchError

D = xs.XNNDatatype
Step = Callable[[list], None]
F64 = torch.float64
QS8 = (D.xnn_datatype_qint8, D.xnn_datatype_quint8)


class Unsupported(ExecuTorchError):
    """A node kind, datatype or parameter this runtime does not run."""


class Compiler:
    """Turns the graph's nodes into steps; one per node, in order."""

    def __init__(self, table: ValueTable):
        self.t = table
        self._used: list[Value] = []

    # ---- helpers shared by the node kinds

    def val(self, vid: int, kind: str, role: str) -> Value:
        v = self.t.get(vid, f"{kind}'s {role}")
        self._used.append(v)
        return v

    def unsupported(self, kind: str, detail: str) -> Unsupported:
        return Unsupported(f"XnnpackBackend: node kind {kind} {detail}, which this runtime does not run; "
                           "lower without it or run the file on the native runtime")

    def reader(self, v: Value, kind: str) -> Callable[[list], torch.Tensor]:
        """env -> the value as a float32 (or its own float dtype) tensor."""
        s = v.slot
        if v.dtype in FLOATS:
            return lambda env: env[s]
        if v.dtype in QS8 or v.dtype is D.xnn_datatype_qint32:
            return lambda env: _quant.dequantize(env[s], v)
        if v.dtype is D.xnn_datatype_qdint8:
            return lambda env: (env[s][0].to(torch.float32) - env[s][2]) * env[s][1]
        raise self.unsupported(kind, f"with a {v.dtype.name} operand ({v.describe()})")

    def writer(self, v: Value, kind: str, mm: Optional[xs.OutputMinMax]) -> Callable[[list, torch.Tensor], None]:
        """(env, float result) -> stored in v's representation, clamped to the node's output min/max."""
        s = v.slot
        lo, hi = _minmax(mm)
        if v.dtype in FLOATS:
            dt = STORAGE[v.dtype]
            if lo == -math.inf and hi == math.inf:
                def write(env, y):
                    env[s] = y if y.dtype == dt else y.to(dt)
            else:
                def write(env, y):
                    env[s] = torch.clamp(y, lo, hi).to(dt)
            return write
        if v.dtype in QS8:
            qlo, qhi = _quant.bound(lo, v, False), _quant.bound(hi, v, True)

            def write(env, y):
                env[s] = torch.clamp(_quant.quantize(y, v), qlo, qhi)
            return write
        raise self.unsupported(kind, f"producing {v.dtype.name} ({v.describe()})")

    def same_or_requant(self, src: Value, dst: Value, kind: str) -> Callable[[torch.Tensor], torch.Tensor]:
        """A data-movement node's element map from src's representation to dst's."""
        if src.dtype == dst.dtype and src.dtype in FLOATS:
            return lambda t: t
        if src.dtype == dst.dtype and src.dtype in QS8:
            if float(src.scale) == float(dst.scale) and src.zero_point == dst.zero_point:
                return lambda t: t
            return lambda t: _quant.quantize(_quant.dequantize(t, src), dst)
        raise self.unsupported(kind, f"from {src.dtype.name} to {dst.dtype.name}")

    def check_rank(self, v: Value, rank: int, kind: str, role: str) -> None:
        if len(v.dims) != rank:
            raise bad(f"{kind}'s {role} {v.describe()} must have {rank} dims")

    # ---- compile one node

    def compile(self, index: int, node: xs.XNode) -> tuple[str, Step, list[Value], list[Value]]:
        """(kind, step, values it reads, values it writes)."""
        n = node.xnode_union
        if n is None:
            raise bad(f"node {index} has no kind")
        kind = type(n).__name__.removeprefix("XNN")
        build = _BUILDERS.get(type(n))
        if build is None:
            raise Unsupported(f"XnnpackBackend: node {index} is a {kind}, a node kind this runtime does not run; "
                              "lower without it or run the file on the native runtime")
        self._used = []
        step, outs = build(self, kind, n, node.output_min_max)
        ins = [v for v in self._used if all(v is not o for o in outs)]
        if type(n) in _SAME_QUANTIZATION:
            _check_same_quantization(index, kind, ins, outs)
        return kind, step, ins, outs


def _check_same_quantization(index: int, kind: str, ins: list, outs: list) -> None:
    """The published runtime's XNNPACK defines a Copy or a StaticConstantPad on quantized values only with
    the input's scale and zero point equal to the output's (its define call returns invalid_parameter; it
    takes a Clamp or StaticTranspose that requantizes): such a graph is refused here too, naming the node."""
    for y in outs:
        if y.dtype not in QS8:
            continue
        for x in ins:
            if x.dtype != y.dtype or float(x.scale) != float(y.scale) or x.zero_point != y.zero_point:
                raise bad(f"node {index} ({kind}) reads {x.describe()} at scale {float(x.scale):g}, zero point "
                          f"{x.zero_point} and writes {y.describe()} at scale {float(y.scale):g}, zero point "
                          f"{y.zero_point}; XNNPACK defines it only with equal quantization (a Convert requantizes)")


def _minmax(mm: Optional[xs.OutputMinMax]) -> tuple[float, float]:
    if mm is None:
        return -math.inf, math.inf
    lo, hi = float(mm.output_min), float(mm.output_max)
    if math.isnan(lo) or math.isnan(hi) or lo > hi:
        raise bad(f"output_min_max [{lo}, {hi}] is not a range")
    return lo, hi


# ---- elementwise ----------------------------------------------------------------------------------


def _unary(fn: Callable[[torch.Tensor], torch.Tensor]):
    def build(c: Compiler, kind: str, n, mm):
        x, y = c.val(n.input_id, kind, "input"), c.val(n.output_id, kind, "output")
        if x.dims != y.dims:
            raise bad(f"{kind} maps {x.describe()} to {y.describe()}; the dims must match")
        read, write = c.reader(x, kind), c.writer(y, kind, mm)
        return (lambda env: write(env, fn(read(env)))), [y]
    return build


def _binary(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], fixed_sign: int = 0):
    def build(c: Compiler, kind: str, n, mm):
        a, b = c.val(n.input1_id, kind, "input1"), c.val(n.input2_id, kind, "input2")
        y = c.val(n.output_id, kind, "output")
        _check_broadcast(kind, a, b, y)
        if fn is not _prelu and not a.dtype == b.dtype == y.dtype:
            # XNNPACK defines a binary node over one datatype: the published runtime refuses the mix at load.
            raise bad(f"{kind} mixes datatypes ({a.describe()}, {b.describe()} -> {y.describe()}); XNNPACK defines "
                      "a binary node over one datatype (a Convert changes it)")
        if fn is torch.mul and a.dtype in QS8 and b.dtype == a.dtype and y.dtype == a.dtype:
            # XNNPACK multiplies the centred integers exactly and requantizes the product in float32
            scale = a.scale * b.scale / y.scale
            lo, hi = _minmax(mm)
            qlo, qhi = _quant.bound(lo, y, False), _quant.bound(hi, y, True)
            sa, sb, sy, za, zb = a.slot, b.slot, y.slot, a.zero_point, b.zero_point

            def step(env):
                prod = (env[sa].to(F64) - za) * (env[sb].to(F64) - zb)
                env[sy] = _quant.requantize(prod, scale, y, qlo, qhi)
            return step, [y]
        if fixed_sign and a.dtype in QS8 and b.dtype == a.dtype and y.dtype == a.dtype:
            params = _quant.add_params(a, b, y, fixed_sign)
            lo, hi = _minmax(mm)
            qlo, qhi = _quant.bound(lo, y, False), _quant.bound(hi, y, True)
            sa, sb, sy = a.slot, b.slot, y.slot

            def step(env):
                env[sy] = _quant.fixed_add(env[sa], env[sb], params, y, qlo, qhi)
            return step, [y]
        ra, rb, write = c.reader(a, kind), c.reader(b, kind), c.writer(y, kind, mm)
        return (lambda env: write(env, fn(ra(env), rb(env)))), [y]
    return build


def _check_broadcast(kind: str, a: Value, b: Value, y: Value) -> None:
    rank = max(len(a.dims), len(b.dims))
    if len(y.dims) != rank:
        raise bad(f"{kind} of {a.describe()} and {b.describe()} writes {y.describe()}")
    for da, db in zip(reversed(a.dims), reversed(b.dims)):
        if da != db and 1 not in (da, db):
            raise bad(f"{kind} cannot broadcast {a.describe()} with {b.describe()}")


def _hardswish(x):
    return x * torch.clamp(x + 3.0, 0.0, 6.0) / 6.0


def _build_leaky(c, kind, n, mm):
    slope = float(n.negative_slope)
    return _unary(lambda x: F.leaky_relu(x, slope))(c, kind, n, mm)


def _build_elu(c, kind, n, mm):
    alpha = float(n.alpha)
    return _unary(lambda x: F.elu(x, alpha))(c, kind, n, mm)


def _prelu(x, slope):
    return torch.where(x >= 0, x, x * slope)


def _build_convert(c: Compiler, kind: str, n, mm):
    x, y = c.val(n.input_id, kind, "input"), c.val(n.output_id, kind, "output")
    if x.dims != y.dims:
        raise bad(f"{kind} maps {x.describe()} to {y.describe()}; the dims must match")
    sx, sy = x.slot, y.slot
    if y.dtype is D.xnn_datatype_qdint8:
        if x.dtype not in FLOATS:
            raise c.unsupported(kind, f"from {x.dtype.name} to qdint8")
        def step(env):
            # Read at run time: a convolution compiled later may change it (see _build_conv).
            env[sy] = _quant.dynamic_quantize(env[sx], y.num_nonbatch_dims)
        return step, [y]
    if x.dtype in FLOATS or x.dtype in QS8:
        read, write = c.reader(x, kind), c.writer(y, kind, None)
        return (lambda env: write(env, read(env))), [y]
    raise c.unsupported(kind, f"from {x.dtype.name} to {y.dtype.name}")


# ---- matrix products ------------------------------------------------------------------------------


def _weights(c: Compiler, kind: str, w: Value, bias: Optional[Value], x: Value, y: Value):
    """How a weighted node (FC, convolution) computes: 'float', 'qs8' (static int8) or 'qd8' (dynamic)."""
    if x.dtype in FLOATS:
        if w.dtype in FLOATS or (w.dtype in (D.xnn_datatype_qcint8, D.xnn_datatype_qcint4, D.xnn_datatype_qbint4)
                                 and w.const is not None):
            if bias is not None and bias.dtype not in FLOATS:
                raise c.unsupported(kind, f"with a float input and a {bias.dtype.name} bias")
            if y.dtype not in FLOATS:
                raise c.unsupported(kind, f"with a float input and a {y.dtype.name} output")
            return "float"
    elif x.dtype in QS8:
        if (w.dtype in (D.xnn_datatype_qcint8, D.xnn_datatype_qint8) and w.const is not None
                and y.dtype == x.dtype and (bias is None or bias.dtype in (D.xnn_datatype_qint32,
                                                                          D.xnn_datatype_qcint32))):
            return "qs8"
    elif x.dtype is D.xnn_datatype_qdint8:
        if (w.dtype in (D.xnn_datatype_qcint8, D.xnn_datatype_qcint4, D.xnn_datatype_qbint4)
                and w.const is not None and y.dtype in FLOATS and (bias is None or bias.dtype in FLOATS)):
            return "qd8"
    raise c.unsupported(kind, f"with input {x.dtype.name}, filter {w.dtype.name}, bias "
                              f"{bias.dtype.name if bias is not None else 'none'} and output {y.dtype.name}")


def _exact_dtype(x_zero_point: int, x_range: tuple[int, int], w: torch.Tensor, depth: int) -> torch.dtype:
    """float32 when no integer sum of `depth` products can pass 2**24 (where float32 stops being exact),
    else float64: the accumulator is exact either way, as XNNPACK's int32 one is."""
    x_max = max(abs(x_range[0] - x_zero_point), abs(x_range[1] - x_zero_point))
    w_max = int(w.abs().max()) if w.numel() else 0
    return torch.float32 if depth * x_max * w_max < 2 ** 24 else F64


def _dequantized_weight(w: Value) -> torch.Tensor:
    if w.dtype in FLOATS:
        return w.const.to(torch.float32)
    if w.dtype is D.xnn_datatype_qbint4:
        return (w.const.to(torch.float32).reshape(w.dims[0], -1, w.group_size)
                * w.scale.unsqueeze(-1)).reshape(w.dims)
    return _quant.dequantize(w.const, w)


def _sequential_fma_linear(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
    """F.linear for a [1, K] filter, accumulated as XNNPACK's f32 GEMM kernels do: from the bias, one
    fused multiply-add per input channel in order. A float32 product is exact in float64, so each
    step is one rounding to float32 (a double rounding differs only on a 2^-29 sliver)."""
    acc = (torch.zeros(x.shape[:-1], dtype=F64) if bias is None
           else bias.to(F64).expand(x.shape[:-1]).clone())
    xs64, w64 = x.to(F64), w[0].to(F64)
    for k in range(x.shape[-1]):
        acc = (acc + xs64[..., k] * w64[k]).to(torch.float32).to(F64)
    return acc.to(torch.float32).unsqueeze(-1)


def _channel_scale(w: Value, out_dim: int, kind: str) -> torch.Tensor:
    """The filter's scale per output channel (a per-tensor scale repeated)."""
    if w.scale.dim() == 0:
        return w.scale.expand(w.dims[out_dim]).clone()
    if w.channel_dim != out_dim:
        raise bad(f"{kind}'s filter {w.describe()} is quantized along dim {w.channel_dim}; the output channels "
                  f"are dim {out_dim}")
    return w.scale


def _build_fc(c: Compiler, kind: str, n: xs.XNNFullyConnected, mm):
    x, w, y = c.val(n.input1_id, kind, "input"), c.val(n.filter_id, kind, "filter"), c.val(n.output_id, kind, "output")
    bias = None if n.bias_id == xs.XNN_INVALID_VALUE_ID else c.val(n.bias_id, kind, "bias")
    if n.flags & ~xs.XNN_FLAG_TRANSPOSE_WEIGHTS:
        raise c.unsupported(kind, f"with flags {n.flags:#x}")
    transposed = bool(n.flags & xs.XNN_FLAG_TRANSPOSE_WEIGHTS)
    c.check_rank(w, 2, kind, "filter")
    out_ch, in_ch = (w.dims[1], w.dims[0]) if transposed else w.dims
    if not x.dims or x.dims[-1] != in_ch:
        raise bad(f"{kind}'s input {x.describe()} does not end in the filter's {in_ch} input channels")
    if not y.dims or y.dims[-1] != out_ch:
        raise bad(f"{kind}'s output {y.describe()} does not end in the filter's {out_ch} output channels")
    if bias is not None and bias.dims not in ((out_ch,),):
        raise bad(f"{kind}'s bias {bias.describe()} must have dims [{out_ch}]")
    mode = _weights(c, kind, w, bias, x, y)
    sx, sy = x.slot, y.slot
    if transposed and mode != "float":
        raise c.unsupported(kind, f"with transposed {w.dtype.name} weights")

    if mode == "float":
        read, write = c.reader(x, kind), c.writer(y, kind, mm)
        b = None if bias is None else (bias.const.to(torch.float32) if bias.const is not None else None)
        bslot = None if bias is None or bias.const is not None else bias.slot
        if w.const is not None:
            wt = _dequantized_weight(w)
            wt = wt.t().contiguous() if transposed else wt
            # One output channel is a mean (the writer's lowering of mean and layer norm): summed in
            # XNNPACK's order, so a quantize after it rounds a tie as the published runtime does.
            linear = _sequential_fma_linear if out_ch == 1 else F.linear

            def step(env):
                xv = read(env)
                r = linear(xv.to(torch.float32), wt, b if bslot is None else env[bslot].to(torch.float32))
                write(env, r)
        else:
            ws = w.slot

            def step(env):
                wv = env[ws].to(torch.float32)
                r = F.linear(read(env).to(torch.float32), wv.t() if transposed else wv,
                             b if bslot is None else env[bslot].to(torch.float32))
                write(env, r)
        return step, [y]

    if mode == "qs8":
        wc = w.const.to(torch.int32) - w.zero_point
        acc_t = _exact_dtype(x.zero_point, x.qrange, wc, in_ch + 1)
        w64 = wc.to(acc_t)
        scale = x.scale * _channel_scale(w, 0, kind) / y.scale
        b64 = None if bias is None else bias.const.to(F64)
        lo, hi = _minmax(mm)
        qlo, qhi = _quant.bound(lo, y, False), _quant.bound(hi, y, True)
        zx = x.zero_point

        def step(env):
            acc = F.linear(env[sx].to(acc_t) - zx, w64).to(F64)
            env[sy] = _quant.requantize(acc if b64 is None else acc + b64, scale, y, qlo, qhi)
        return step, [y]

    # qd8: per-row int8 input, 8- or 4-bit weights, float bias and output
    write = c.writer(y, kind, mm)
    b = None if bias is None else bias.const.to(torch.float32)
    if w.dtype is D.xnn_datatype_qbint4:
        blocks = in_ch // w.group_size
        w64 = w.const.to(F64).reshape(out_ch, blocks, w.group_size)
        bscale = w.scale  # (out, blocks)

        def step(env):
            q, s, z = env[sx]
            xc = (q.to(F64) - z.to(F64)).reshape(*q.shape[:-1], blocks, w.group_size)
            acc = torch.einsum("...bg,obg->...ob", xc, w64).to(torch.float32)
            r = (acc * bscale).sum(-1) * s
            write(env, r if b is None else r + b)
    else:
        w64 = w.const.to(F64)
        wscale = _channel_scale(w, 0, kind)

        def step(env):
            q, s, z = env[sx]
            acc = F.linear(q.to(F64) - z.to(F64), w64).to(torch.float32)
            r = acc * s * wscale
            write(env, r if b is None else r + b)
    return step, [y]


def _build_bmm(c: Compiler, kind: str, n, mm):
    a, b, y = c.val(n.input1_id, kind, "input1"), c.val(n.input2_id, kind, "input2"), c.val(n.output_id, kind, "output")
    if n.flags & ~xs.XNN_FLAG_TRANSPOSE_B:
        raise c.unsupported(kind, f"with flags {n.flags:#x}")
    if a.dtype not in FLOATS or b.dtype not in FLOATS:
        raise c.unsupported(kind, f"with {a.dtype.name} x {b.dtype.name} operands")
    if len(a.dims) < 2 or len(b.dims) < 2:
        raise bad(f"{kind} needs matrices, got {a.describe()} and {b.describe()}")
    tb = bool(n.flags & xs.XNN_FLAG_TRANSPOSE_B)
    k_b = b.dims[-1] if tb else b.dims[-2]
    if a.dims[-1] != k_b:
        raise bad(f"{kind} multiplies {a.describe()} by {b.describe()}: inner dims differ")
    ra, rb, write = c.reader(a, kind), c.reader(b, kind), c.writer(y, kind, mm)

    def step(env):
        bv = rb(env)
        write(env, torch.matmul(ra(env), bv.transpose(-1, -2) if tb else bv))
    return step, [y]


def _build_sdpa(c: Compiler, kind: str, n, mm):
    q, k, v = (c.val(n.query_id, kind, "query"), c.val(n.key_id, kind, "key"), c.val(n.value_id, kind, "value"))
    scale, mask = c.val(n.scale_id, kind, "scale"), c.val(n.mask_id, kind, "mask")
    y = c.val(n.output_id, kind, "output")
    for t in (q, k, v, scale, mask):
        if t.dtype not in FLOATS:
            raise c.unsupported(kind, f"with a {t.dtype.name} operand")
    if len(q.dims) < 3 or len(scale.dims) != 1 or scale.dims[0] != q.dims[-1] or len(mask.dims) != 2:
        raise bad(f"{kind}: query {q.describe()}, scale {scale.describe()} and mask {mask.describe()} do not fit "
                  "(scale: one per channel of the query; mask: [query tokens, key tokens])")
    rq, rk, rv, rs, rm = (c.reader(t, kind) for t in (q, k, v, scale, mask))
    write = c.writer(y, kind, mm)

    def step(env):
        logits = torch.matmul(rq(env) * rs(env), rk(env).transpose(-1, -2)) + rm(env)
        write(env, torch.matmul(torch.softmax(logits, dim=-1), rv(env)))
    return step, [y]


# ---- convolution and pooling (NHWC) ---------------------------------------------------------------


def _pads(n) -> tuple[int, int, int, int]:
    return n.padding_top, n.padding_right, n.padding_bottom, n.padding_left


def _build_conv(c: Compiler, kind: str, n: xs.XNNNodeConv, mm):
    x, w, y = c.val(n.input1_id, kind, "input"), c.val(n.filter_id, kind, "filter"), c.val(n.output_id, kind, "output")
    bias = None if n.bias_id == xs.XNN_INVALID_VALUE_ID else c.val(n.bias_id, kind, "bias")
    if n.flags:
        raise c.unsupported(kind, f"with flags {n.flags:#x}")
    for t, role in ((x, "input"), (w, "filter"), (y, "output")):
        c.check_rank(t, 4, kind, role)
    g, gin, gout = n.groups, n.group_input_channels, n.group_output_channels
    kh, kw = n.kernel_height, n.kernel_width
    if min(g, gin, gout, kh, kw, n.subsampling_height, n.subsampling_width, n.dilation_height,
           n.dilation_width) < 1:
        raise bad(f"{kind} has a zero size, stride, dilation or group count")
    depthwise = isinstance(n, xs.XNNDepthwiseConv2d)
    transposed = isinstance(n, xs.XNNConvTranspose2d)
    if transposed and x.dtype is D.xnn_datatype_fp16:
        # XNNPACK has no half-precision deconvolution: it refuses the node (invalid parameter) at init.
        raise c.unsupported(kind, "on xnn_datatype_fp16 values (XNNPACK has no half-precision deconvolution)")
    cin, cout = g * gin, g * gout
    want_w = (1, kh, kw, cout) if depthwise else (cout, kh, kw, gin)
    if depthwise and gin != 1:
        raise bad(f"{kind} has {gin} input channels a group; a depthwise convolution has 1")
    if w.dims != want_w:
        raise bad(f"{kind}'s filter {w.describe()} should have dims {list(want_w)} for {g} groups of "
                  f"{gin} -> {gout} channels and a {kh}x{kw} kernel")
    if x.dims[3] != cin or y.dims[3] != cout:
        raise bad(f"{kind} takes {cin} channels to {cout}, but its input is {x.describe()} and its output "
                  f"{y.describe()}")
    if bias is not None and bias.dims != (cout,):
        raise bad(f"{kind}'s bias {bias.describe()} must have dims [{cout}]")
    if w.const is None or (bias is not None and bias.const is None):
        raise c.unsupported(kind, "with a filter or bias computed at run time")
    mode = _weights(c, kind, w, bias, x, y)
    if mode == "qd8" and (depthwise or w.dtype is not D.xnn_datatype_qcint8):
        raise c.unsupported(kind, f"with a dynamically quantized (qdint8) input and a {w.dtype.name} filter")
    pointwise = (not depthwise and not transposed and g == 1 and kh == kw == 1 and not any(_pads(n))
                 and n.subsampling_height == n.subsampling_width == 1 and gin + gout > 2)
    if mode == "qd8" and pointwise:
        # XNNPACK defines such a convolution as a fully connected layer, whose qdint8 input it then
        # quantizes per pixel (one row of channels), whatever the value said.
        x.num_nonbatch_dims = 1
    elif mode == "qd8" and x.num_nonbatch_dims != 3:
        # Its other dynamically quantized convolutions take one scale and zero point per image.
        raise bad(f"{kind}'s input {x.describe()} is quantized per {x.num_nonbatch_dims} trailing dims; a "
                  "convolution reads it per image (3)")
    pt, pr, pb, pl = _pads(n)
    stride, dil = (n.subsampling_height, n.subsampling_width), (n.dilation_height, n.dilation_width)
    adj = (n.adjustment_height, n.adjustment_width)
    out_dim = 3 if depthwise else 0

    if mode == "float":
        wt = _dequantized_weight(w)
        b = None if bias is None else bias.const.to(torch.float32)
        dt = torch.float32
    elif mode == "qd8":
        # The image's int8 values less its zero point, convolved exactly; scaled per image and per output
        # channel in float32, then the float bias added, as XNNPACK's QD8 kernels do.
        wt = w.const.to(torch.int32)
        dt = _exact_dtype(x.qrange[0], x.qrange, wt, kh * kw * gin)
        wt = wt.to(dt)
        fbias = None if bias is None else bias.const.to(torch.float32)
        b = None
        wscale = _channel_scale(w, out_dim, kind)
    else:
        wt = w.const.to(torch.int32) - w.zero_point
        dt = _exact_dtype(x.zero_point, x.qrange, wt, kh * kw * gin)
        wt = wt.to(dt)
        qbias = None if bias is None else bias.const.to(F64)
        b = None
        scale = (x.scale * _channel_scale(w, out_dim, kind) / y.scale).reshape(1, 1, 1, -1)
    # to torch's layouts: conv OIHW, depthwise [C, 1, kh, kw], transposed [in, out / groups, kh, kw]
    if depthwise:
        wt = wt.permute(3, 0, 1, 2).contiguous()
    elif transposed:
        wt = wt.permute(0, 3, 1, 2).reshape(g, gout, gin, kh, kw).transpose(1, 2).reshape(cin, gout, kh, kw)
        wt = wt.contiguous()
    else:
        wt = wt.permute(0, 3, 1, 2).contiguous()
    groups = g

    def conv(xn: torch.Tensor) -> torch.Tensor:  # NCHW in, NCHW out
        if transposed:
            full = F.conv_transpose2d(xn, wt, None, stride, 0, 0, groups, dil)
            h = (xn.shape[2] - 1) * stride[0] + dil[0] * (kh - 1) + 1 + adj[0] - pt - pb
            wd = (xn.shape[3] - 1) * stride[1] + dil[1] * (kw - 1) + 1 + adj[1] - pl - pr
            if h < 0 or wd < 0:
                raise ExecuTorchError(f"{kind}: padding exceeds the output")
            extra = (0, max(0, pl + wd - full.shape[3]), 0, max(0, pt + h - full.shape[2]))
            full = F.pad(full, extra) if any(extra) else full
            out = full[:, :, pt:pt + h, pl:pl + wd]
            return out if b is None else out + b.reshape(1, -1, 1, 1)
        if pt == pb and pl == pr:
            return F.conv2d(xn, wt, b, stride, (pt, pl), dil, groups)
        return F.conv2d(F.pad(xn, (pl, pr, pt, pb)), wt, b, stride, 0, dil, groups)

    sx = x.slot
    if mode == "float":
        read, write = c.reader(x, kind), c.writer(y, kind, mm)

        def step(env):
            write(env, conv(read(env).to(dt).permute(0, 3, 1, 2)).permute(0, 2, 3, 1))
        return step, [y]
    if mode == "qd8":
        write = c.writer(y, kind, mm)

        def step(env):
            q, s, z = env[sx]
            if not pointwise and s.dim() == 4 and s.shape[1:] != (1, 1, 1):
                raise ExecuTorchError(f"XnnpackBackend: {kind} reads a qdint8 value quantized per pixel for a "
                                      "1x1 convolution; a wider kernel needs it per image")
            acc = conv((q.to(dt) - z.to(dt)).permute(0, 3, 1, 2)).permute(0, 2, 3, 1).to(torch.float32)
            r = acc * s * wscale
            write(env, r if fbias is None else r + fbias)
        return step, [y]
    lo, hi = _minmax(mm)
    qlo, qhi = _quant.bound(lo, y, False), _quant.bound(hi, y, True)
    zx, sy = x.zero_point, y.slot

    def step(env):
        acc = conv((env[sx].to(dt) - zx).permute(0, 3, 1, 2)).permute(0, 2, 3, 1).to(F64)
        env[sy] = _quant.requantize(acc if qbias is None else acc + qbias, scale, y, qlo, qhi)
    return step, [y]


def _check_pool(c: Compiler, kind: str, n, x: Value, y: Value) -> None:
    c.check_rank(x, 4, kind, "input")
    c.check_rank(y, 4, kind, "output")
    if x.dims[3] != y.dims[3]:
        raise bad(f"{kind} maps {x.describe()} to {y.describe()}; channels must match")
    if n.flags & ~xs.XNN_FLAG_KEEP_DIMS:
        raise c.unsupported(kind, f"with flags {n.flags:#x}")


def _build_max_pool(c: Compiler, kind: str, n: xs.XNNMaxPooling2d, mm):
    x, y = c.val(n.input_id, kind, "input"), c.val(n.output_id, kind, "output")
    _check_pool(c, kind, n, x, y)
    if min(n.pooling_height, n.pooling_width, n.stride_height, n.stride_width, n.dilation_height,
           n.dilation_width) < 1:
        raise bad(f"{kind} has a zero pooling size, stride or dilation")
    if x.dtype != y.dtype or (x.dtype not in FLOATS and x.dtype not in QS8):
        raise c.unsupported(kind, f"from {x.dtype.name} to {y.dtype.name}")
    move = c.same_or_requant(x, y, kind)
    pt, pr, pb, pl = _pads(n)
    k, s, d = (n.pooling_height, n.pooling_width), (n.stride_height, n.stride_width), (n.dilation_height,
                                                                                          n.dilation_width)
    lo, hi = _minmax(mm)
    if y.dtype in QS8:
        lo, hi = _quant.bound(lo, y, False), _quant.bound(hi, y, True)
    sx, sy = x.slot, y.slot

    def step(env):
        xv = env[sx].permute(0, 3, 1, 2)
        fill = -math.inf if xv.is_floating_point() else torch.iinfo(xv.dtype).min
        xp = F.pad(xv.to(torch.float32) if not xv.is_floating_point() else xv, (pl, pr, pt, pb), value=fill)
        r = F.max_pool2d(xp, k, s, 0, d).permute(0, 2, 3, 1)
        r = torch.clamp(r, lo, hi) if (lo, hi) != (-math.inf, math.inf) else r
        env[sy] = move(r.to(xv.dtype))
    return step, [y]


def _build_avg_pool(c: Compiler, kind: str, n: xs.XNNAvgPooling2d, mm):
    x, y = c.val(n.input_id, kind, "input"), c.val(n.output_id, kind, "output")
    _check_pool(c, kind, n, x, y)
    if min(n.pooling_height, n.pooling_width, n.stride_height, n.stride_width) < 1:
        raise bad(f"{kind} has a zero pooling size or stride")
    pt, pr, pb, pl = _pads(n)
    k, s = (n.pooling_height, n.pooling_width), (n.stride_height, n.stride_width)
    read, write = c.reader(x, kind), c.writer(y, kind, mm)

    def step(env):  # padding is left out of each window's count, as XNNPACK averages (none in the image: 0)
        xv = read(env).to(torch.float32).permute(0, 3, 1, 2)
        ones = torch.ones_like(xv[:1, :1])
        total = F.avg_pool2d(F.pad(xv, (pl, pr, pt, pb)), k, s, 0, divisor_override=1)
        count = F.avg_pool2d(F.pad(ones, (pl, pr, pt, pb)), k, s, 0, divisor_override=1)
        write(env, (total / count.clamp(min=1)).permute(0, 2, 3, 1))
    return step, [y]


def _build_global_avg_pool(c: Compiler, kind: str, n, mm):
    x, y = c.val(n.input_id, kind, "input"), c.val(n.output_id, kind, "output")
    c.check_rank(x, 4, kind, "input")
    if n.flags & ~xs.XNN_FLAG_KEEP_DIMS:
        raise c.unsupported(kind, f"with flags {n.flags:#x}")
    keep = bool(n.flags & xs.XNN_FLAG_KEEP_DIMS)
    want = (x.dims[0], 1, 1, x.dims[3]) if keep else (x.dims[0], x.dims[3])
    if y.dims != want:
        raise bad(f"{kind} of {x.describe()} writes {y.describe()}, expected dims {list(want)}")
    if x.dtype in QS8 and y.dtype == x.dtype:
        # XNNPACK's quantized mean: the integers summed exactly, then in float32 acc * scale plus the
        # output zero point, rounded half to even (a tie goes to the even output integer), where
        # scale = (input / output scale) / pixels
        ratio = _quant.f32(float(x.scale)) / _quant.f32(float(y.scale))
        lo, hi = _minmax(mm)
        qlo, qhi = _quant.bound(lo, y, False), _quant.bound(hi, y, True)
        sx, sy, zx, zy = x.slot, y.slot, x.zero_point, _quant.f32(float(y.zero_point))

        def step(env):
            q = env[sx]
            acc = (q.to(F64) - zx).sum(dim=(1, 2), keepdim=keep).to(torch.float32)
            scale = ratio / _quant.f32(float(q.shape[1] * q.shape[2]))
            env[sy] = torch.clamp(acc * scale + zy, qlo, qhi).round().to(q.dtype)
        return step, [y]
    read, write = c.reader(x, kind), c.writer(y, kind, mm)
    return (lambda env: write(env, read(env).to(torch.float32).mean(dim=(1, 2), keepdim=keep))), [y]


def _build_argmax_pool(c: Compiler, kind: str, n: xs.XNNArgMaxPooling2d, mm):
    x = c.val(n.input_id, kind, "input")
    y, idx = c.val(n.output_value_id, kind, "output"), c.val(n.output_index_id, kind, "index output")
    c.check_rank(x, 4, kind, "input")
    if x.dtype not in FLOATS or y.dtype != x.dtype or idx.dtype is not D.xnn_datatype_int32:
        raise c.unsupported(kind, f"from {x.dtype.name} to {y.dtype.name} values and {idx.dtype.name} indices")
    if min(n.pooling_height, n.pooling_width) < 1:
        raise bad(f"{kind} has a zero pooling size")
    pt, pr, pb, pl = _pads(n)
    kh, kw = n.pooling_height, n.pooling_width
    sx, sy, si = x.slot, y.slot, idx.slot

    def step(env):  # the index is the maximum's position inside its window (row-major)
        xv = F.pad(env[sx].permute(0, 3, 1, 2), (pl, pr, pt, pb), value=-math.inf)
        nb, ch, h, w = xv.shape
        win = xv[:, :, :h // kh * kh, :w // kw * kw].reshape(nb, ch, h // kh, kh, w // kw, kw)
        win = win.permute(0, 1, 2, 4, 3, 5).reshape(nb, ch, h // kh, w // kw, kh * kw)
        val, ind = win.max(dim=-1)
        env[sy] = val.permute(0, 2, 3, 1)
        env[si] = ind.to(torch.int32).permute(0, 2, 3, 1)
    return step, [y, idx]


def _build_resize(c: Compiler, kind: str, n: xs.XNNStaticResizeBilinear2D, mm):
    x, y = c.val(n.input_id, kind, "input"), c.val(n.output_id, kind, "output")
    c.check_rank(x, 4, kind, "input")
    if n.flags & ~xs.XNN_FLAG_ALIGN_CORNERS:
        raise c.unsupported(kind, f"with flags {n.flags:#x} (only XNN_FLAG_ALIGN_CORNERS is run)")
    if y.dims != (x.dims[0], n.new_height, n.new_width, x.dims[3]) or min(n.new_height, n.new_width) < 1:
        raise bad(f"{kind} to {n.new_height}x{n.new_width} of {x.describe()} writes {y.describe()}")
    align = bool(n.flags & xs.XNN_FLAG_ALIGN_CORNERS)
    size = (n.new_height, n.new_width)
    read, write = c.reader(x, kind), c.writer(y, kind, mm)

    def step(env):
        xv = read(env).to(torch.float32).permute(0, 3, 1, 2)
        write(env, F.interpolate(xv, size=size, mode="bilinear", align_corners=align).permute(0, 2, 3, 1))
    return step, [y]


# ---- data movement --------------------------------------------------------------------------------


def _build_transpose(c: Compiler, kind: str, n: xs.XNNStaticTranspose, mm):
    x, y = c.val(n.input_id, kind, "input"), c.val(n.output_id, kind, "output")
    perm = list(n.perm)
    if n.num_dims != len(perm) or sorted(perm) != list(range(len(x.dims))):
        raise bad(f"{kind}'s perm {perm} is not a permutation of {x.describe()}'s dims")
    if y.dims != tuple(x.dims[p] for p in perm):
        raise bad(f"{kind} {perm} of {x.describe()} writes {y.describe()}")
    move, sx, sy = c.same_or_requant(x, y, kind), x.slot, y.slot

    def step(env):
        env[sy] = move(env[sx].permute(perm))
    return step, [y]


def _build_reshape(c: Compiler, kind: str, n: xs.XNNStaticReshape, mm):
    x, y = c.val(n.input_id, kind, "input"), c.val(n.output_id, kind, "output")
    shape = list(n.new_shape)
    if n.num_dims != len(shape) or len(shape) != len(y.dims) or shape.count(0) > 1:
        raise bad(f"{kind}'s new shape {shape} ({n.num_dims} dims, at most one 0) does not fit {y.describe()}")
    if 0 not in shape and math.prod(shape) != math.prod(x.dims):
        raise bad(f"{kind} cannot reshape {x.describe()} to {shape}")
    target = [-1 if d == 0 else d for d in shape]  # XNNPACK infers a 0 dim from the element count
    move, sx, sy = c.same_or_requant(x, y, kind), x.slot, y.slot

    def step(env):
        env[sy] = move(env[sx].reshape(target))
    return step, [y]


def _build_slice(c: Compiler, kind: str, n: xs.XNNStaticSlice, mm):
    x, y = c.val(n.input_id, kind, "input"), c.val(n.output_id, kind, "output")
    offsets, sizes = list(n.offsets), list(n.sizes)
    if not (n.num_dims == len(offsets) == len(sizes) == len(x.dims) == len(y.dims)):
        raise bad(f"{kind}: offsets {offsets} and sizes {sizes} do not fit {x.describe()}")
    for d, (o, s, full) in enumerate(zip(offsets, sizes, x.dims)):
        if o + s > full or o > full:
            raise bad(f"{kind} takes [{o}, {o + s}) of dim {d} of {x.describe()}")
    move, sx, sy = c.same_or_requant(x, y, kind), x.slot, y.slot

    def step(env):
        xv = env[sx]
        idx = tuple(slice(o, o + s if s else xv.shape[d]) for d, (o, s) in enumerate(zip(offsets, sizes)))
        for d, sl in enumerate(idx):
            if sl.stop > xv.shape[d]:
                raise ExecuTorchError(f"{kind} takes [{sl.start}, {sl.stop}) of dim {d}, which has {xv.shape[d]}")
        env[sy] = move(xv[idx])
    return step, [y]


def _build_pad(c: Compiler, kind: str, n: xs.XNNStaticConstantPad, mm):
    x, y = c.val(n.input_id, kind, "input"), c.val(n.output_id, kind, "output")
    pre, post = list(n.pre_paddings), list(n.post_paddings)
    if len(pre) < len(x.dims) or len(post) < len(x.dims):
        raise bad(f"{kind} has {len(pre)}/{len(post)} paddings for {x.describe()}")
    pre, post = pre[:len(x.dims)], post[:len(x.dims)]
    if y.dims != tuple(d + a + b for d, a, b in zip(x.dims, pre, post)):
        raise bad(f"{kind} pads {x.describe()} by {pre}/{post} into {y.describe()}")
    move, sx, sy = c.same_or_requant(x, y, kind), x.slot, y.slot
    pads = [p for a, b in zip(reversed(pre), reversed(post)) for p in (a, b)]
    value = float(n.padding_value)
    if y.dtype in QS8:  # the padding value is quantized with the output's parameters
        value = float(_quant.quantize(torch.tensor(value), y))

    def step(env):
        env[sy] = F.pad(move(env[sx]), pads, value=value)
    return step, [y]


def _build_concat(count: int):
    def build(c: Compiler, kind: str, n: xs.XNNCat, mm):
        ids = [n.input1_id, n.input2_id, n.input3_id, n.input4_id, n.input5_id][:count]
        xs_ = [c.val(i, kind, f"input{k + 1}") for k, i in enumerate(ids)]
        y = c.val(n.output_id, kind, "output")
        rank = len(y.dims)
        if not 0 <= n.axis < rank:
            raise bad(f"{kind}'s axis {n.axis} is outside {y.describe()}")
        for x in xs_:
            if len(x.dims) != rank or any(a != b for d, (a, b) in enumerate(zip(x.dims, y.dims)) if d != n.axis):
                raise bad(f"{kind} of {x.describe()} into {y.describe()} along {n.axis}")
        if sum(x.dims[n.axis] for x in xs_) != y.dims[n.axis]:
            raise bad(f"{kind}'s inputs along axis {n.axis} do not add up to {y.describe()}")
        moves = [(c.same_or_requant(x, y, kind), x.slot) for x in xs_]
        axis, sy = n.axis, y.slot

        def step(env):
            env[sy] = torch.cat([m(env[s]) for m, s in moves], dim=axis)
        return step, [y]
    return build


def _build_copy(c: Compiler, kind: str, n, mm):
    x, y = c.val(n.input_id, kind, "input"), c.val(n.output_id, kind, "output")
    if x.dims != y.dims:
        raise bad(f"{kind} maps {x.describe()} to {y.describe()}; the dims must match")
    move, sx, sy = c.same_or_requant(x, y, kind), x.slot, y.slot

    def step(env):
        env[sy] = move(env[sx])
    return step, [y]


def _build_clamp(c: Compiler, kind: str, n, mm):
    x, y = c.val(n.input_id, kind, "input"), c.val(n.output_id, kind, "output")
    if (x.dtype == y.dtype and x.dtype in QS8 and x.dims == y.dims and float(x.scale) == float(y.scale)
            and x.zero_point == y.zero_point):
        lo, hi = _minmax(mm)  # one quantization on both sides: clamp the integers
        qlo, qhi = _quant.bound(lo, y, False), _quant.bound(hi, y, True)
        sx, sy = x.slot, y.slot

        def step(env):
            env[sy] = torch.clamp(env[sx], qlo, qhi)
        return step, [y]
    return _unary(lambda t: t)(c, kind, n, mm)


def _build_prelu(c: Compiler, kind: str, n, mm):
    return _binary(_prelu)(c, kind, n, mm)


_SAME_QUANTIZATION = (xs.XNNCopy, xs.XNNStaticConstantPad)

_BUILDERS = {
    xs.XNNAdd: _binary(torch.add, 1), xs.XNNSubtract: _binary(torch.sub, -1), xs.XNNMultiply: _binary(torch.mul),
    xs.XNNDiv: _binary(torch.div), xs.XNNMinimum: _binary(torch.minimum), xs.XNNMaximum: _binary(torch.maximum),
    xs.XNNPReLU: _build_prelu,
    xs.XNNSoftmax: _unary(lambda x: torch.softmax(x, dim=-1)), xs.XNNSigmoid: _unary(torch.sigmoid),
    xs.XNNClamp: _build_clamp, xs.XNNFloor: _unary(torch.floor), xs.XNNCeiling: _unary(torch.ceil),
    xs.XNNSquareRoot: _unary(torch.sqrt), xs.XNNReciprocalSquareRoot: _unary(torch.rsqrt),
    xs.XNNHardswish: _unary(_hardswish), xs.XNNNegate: _unary(torch.neg), xs.XNNSquare: _unary(torch.square),
    xs.XNNAbs: _unary(torch.abs), xs.XNNLog: _unary(torch.log), xs.XNNGelu: _unary(F.gelu),
    xs.XNNTanh: _unary(torch.tanh), xs.XNNExp: _unary(torch.exp), xs.XNNSin: _unary(torch.sin),
    xs.XNNCos: _unary(torch.cos), xs.XNNLeakyReLU: _build_leaky, xs.XNNELU: _build_elu,
    xs.XNNConvert: _build_convert, xs.XNNCopy: _build_copy,
    xs.XNNFullyConnected: _build_fc, xs.XNNBatchMatrixMultiply: _build_bmm,
    xs.XNNScaledDotProductAttention: _build_sdpa,
    xs.XNNConv2d: _build_conv, xs.XNNDepthwiseConv2d: _build_conv, xs.XNNConvTranspose2d: _build_conv,
    xs.XNNMaxPooling2d: _build_max_pool, xs.XNNAvgPooling2d: _build_avg_pool,
    xs.XNNGlobalAvgPooling2d: _build_global_avg_pool, xs.XNNArgMaxPooling2d: _build_argmax_pool,
    xs.XNNStaticResizeBilinear2D: _build_resize,
    xs.XNNStaticTranspose: _build_transpose, xs.XNNStaticReshape: _build_reshape, xs.XNNStaticSlice: _build_slice,
    xs.XNNStaticConstantPad: _build_pad,
    xs.XNNConcatenate2: _build_concat(2), xs.XNNConcatenate3: _build_concat(3),
    xs.XNNConcatenate4: _build_concat(4), xs.XNNConcatenate5: _build_concat(5),
}
