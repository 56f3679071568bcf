"""The native kernels' fast paths for masks, where, any/all and row copies match eager torch bit for bit."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("executorch.extension.pybindings._portable_lib",
                    reason="native runtime not built (bash tools/run_tests.sh builds it; needs a C++ compiler)")

from executorch.extension.pybindings import portable_lib  # noqa: E402

from native_fn import native_method  # noqa: E402

NEG_INF, INF, NAN = -math.inf, math.inf, math.nan


def _native_outputs(fn, inputs: tuple) -> list:
    return native_method(fn, inputs).execute(list(inputs))


def _assert_exact(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if got.dtype.is_floating_point:
        # Same bits: NaN where torch has NaN, -0.0 where it has -0.0.
        assert torch.equal(got.view(torch.int32), want.view(torch.int32)), (got, want)
    else:
        assert torch.equal(got, want), (got, want)


def _check(fn, *inputs) -> None:
    with torch.no_grad():
        want = fn(*inputs)
    got = _native_outputs(fn, inputs)
    _assert_exact(got[0], want)


def _specials(*shape: int, seed: int = 0) -> torch.Tensor:
    """Random floats with -inf, inf, NaN, +-0 sprinkled in, and the row [..., 1, :] all -inf."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    flat = x.view(-1)
    picks = torch.randint(0, flat.numel(), (max(5, flat.numel() // 7),), generator=g)
    flat[picks] = torch.tensor([NEG_INF, INF, NAN, -0.0, 0.0]).repeat(picks.numel() // 5 + 1)[:picks.numel()]
    if x.dim() >= 2 and x.shape[-2] > 1:
        x[..., 1, :] = NEG_INF
    return x


def test_exact_check_catches_one_wrong_element():
    x = _specials(2, 3, 4, 5)
    y = x.clone()
    y.view(-1)[7] = 123.0
    with pytest.raises(AssertionError):
        _assert_exact(y, x)
    with pytest.raises(AssertionError):
        _assert_exact(x.isnan(), y.isnan().logical_not())


# Shapes that take the fast paths (same shape, scalar, numel past one parallel chunk) and shapes
# that just miss them (broadcast on another dim, a one-element tensor).
@pytest.mark.parametrize("shape", [(2, 6, 9, 9), (1, 6, 197, 197), (5,)])
@pytest.mark.parametrize("op", ["eq", "ne", "lt", "ge"])
def test_compare_with_scalar(shape, op):
    for scalar in (NEG_INF, 0.0, 0.5, NAN, 0.1):
        _check(lambda x, op=op, s=scalar: getattr(torch, op)(x, s), _specials(*shape))


def test_compare_rounds_the_number_to_float_as_torch_does():
    x = torch.tensor([0.1, 0.2, INF, -INF, 3.4028234663852886e38, NAN] * 3)
    halfway = 2.0**128 - 2.0**103  # from here on, float(s) is inf
    for s in (0.1, 0.2, 1e300, -1e300, 3.4028235e38, halfway, math.nextafter(halfway, 0.0), -halfway):
        for op in (torch.eq, torch.lt, torch.ge):
            _check(lambda t, op=op, s=s: op(t, s), x)
            _check(lambda t, op=op, s=s: op(t[::2], s), x)  # a strided view: the generic path


def _numbers_near(values: torch.Tensor, seed: int) -> list:
    """Numbers at, between and around `values` (16-bit floats widened): exact values, halfway points
    (ties), and doubles a hair either side of them, which rounding to 16 bits sends different ways."""
    g = torch.Generator().manual_seed(seed)
    v = values.double()
    out = [0.1, 1 / 3, 65504.0, 65520.0, 1e6, -1e-8, 2.0**-25, 3.0**40]
    for i in torch.randint(0, v.numel() - 1, (12,), generator=g).tolist():
        a, b = sorted((v[i].item(), v[i + 1].item()))
        mid = (a + b) / 2
        out += [a, mid, math.nextafter(mid, math.inf), math.nextafter(mid, -math.inf), a + (b - a) / 3]
    return [x for x in out if math.isfinite(x)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_compare_rounds_the_number_to_the_16_bit_dtype(dtype):
    # torch compares a Half/BFloat16 tensor with a number in that dtype: x == 0.1 holds where x is
    # 0.1 rounded to 16 bits, which a comparison in double never finds equal.
    x = torch.sort(torch.randn(4000, generator=torch.Generator().manual_seed(5)) * 3).values.to(dtype)
    x[:6] = torch.tensor([0.1, 1 / 3, 65504.0, INF, NAN, -0.0]).to(dtype)
    numbers = _numbers_near(x[6:].unique(), seed=6)
    with torch.no_grad():
        assert any(torch.eq(x, s).any() and not (x.double() == s).any() for s in numbers), "no case tells them apart"
    for s in numbers:
        for op in (torch.eq, torch.lt, torch.ge):
            _check(lambda t, op=op, s=s: op(t, s), x)
            _check(lambda t, op=op, s=s: op(t[::3], s), x)  # a strided view: the generic path


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int16, torch.bool])
def test_integers_against_a_float_number_compare_in_float32(dtype):
    # An integer tensor against a floating number promotes to float32 (the default dtype) in
    # torch, both sides rounded: 16777217 == 16777216.5 holds there, not in double.
    big = [16777217, 16777216, 16777215, 2**31 - 1, -(2**31), 2**30 + 64, 3, -3, 0]
    if dtype == torch.bool:
        x = torch.tensor([True, False, True])
    elif dtype == torch.int16:
        x = torch.tensor([32767, -32768, 3, 0], dtype=dtype)
    else:
        x = torch.tensor(big + ([2**40 + 1, 2**62] if dtype == torch.int64 else []), dtype=dtype)
    for s in (16777216.5, 16777216.0, 2.0**31, 2147483520.0, 0.5, -3.0000001, 1e40, 3.0):
        for op in (torch.eq, torch.gt, torch.le):
            _check(lambda t, op=op, s=s: op(t, s), x)
    # An integer number keeps the comparison exact in int64, as torch does.
    if dtype == torch.int64:
        _check(lambda t: torch.eq(t, 2**40 + 1), x)


@pytest.mark.parametrize("shapes", [((3, 4, 5), (3, 4, 5)), ((3, 4, 5), (3, 1, 5)), ((3, 4, 5), (1,)),
                                    ((2, 3, 50000), (2, 3, 50000))])
def test_compare_two_tensors(shapes):
    a, b = _specials(*shapes[0], seed=1), _specials(*shapes[1], seed=2)
    if shapes[0] == shapes[1]:
        b.view(-1)[::3] = a.view(-1)[::3]  # many equal pairs, NaNs included
    _check(torch.eq, a, b)
    _check(torch.le, a, b)


def test_compare_bool_tensors_and_other_dtypes():
    g = torch.Generator().manual_seed(3)
    a, b = torch.rand(4, 70000, generator=g) > 0.5, torch.rand(4, 70000, generator=g) > 0.3
    _check(torch.eq, a, b)
    _check(torch.logical_xor, a, b)
    _check(lambda x: torch.eq(x, True), a)
    _check(lambda x: torch.eq(x, 1.5), a)  # a Bool tensor against a float scalar: the double path
    i = torch.randint(-3, 3, (4, 9), generator=g)
    _check(lambda x: torch.eq(x, 2), i)
    h = _specials(4, 9).to(torch.float64)
    _check(lambda x: torch.eq(x, NEG_INF), h)


@pytest.mark.parametrize("shape", [(1, 6, 197, 197), (3, 7), (70000,)])
def test_logical_not(shape):
    g = torch.Generator().manual_seed(4)
    _check(torch.logical_not, torch.rand(*shape, generator=g) > 0.5)
    _check(torch.logical_not, _specials(*shape))


@pytest.mark.parametrize("dim", [-1, 1, 0])
@pytest.mark.parametrize("keepdim", [True, False])
@pytest.mark.parametrize("fn", [torch.any, torch.all])
def test_any_all_over_one_dim(fn, dim, keepdim):
    g = torch.Generator().manual_seed(5)
    m = torch.rand(2, 6, 197, 197, generator=g) > 0.002  # some rows all true, most not
    m[0, 0, 3] = True
    m[0, 0, 4] = False
    m[1, 2, 5, 7] = False
    _check(lambda x: fn(x, dim=dim, keepdim=keepdim), m)
    _check(lambda x: fn(x, dim=dim, keepdim=keepdim), m.logical_not())
    _check(lambda x: fn(x == NEG_INF, dim=dim, keepdim=keepdim), _specials(2, 3, 4, 5))
    # A float input reduces on the generic path.
    _check(lambda x: fn(x, dim=dim, keepdim=keepdim), _specials(2, 3, 4, 5))


def test_any_all_empty_rows():
    x = torch.zeros(3, 0, dtype=torch.bool)
    _check(lambda t: torch.any(t, dim=-1), x)
    _check(lambda t: torch.all(t, dim=-1), x)


@pytest.mark.parametrize("cond_shape", [(2, 6, 197, 1), (2, 6, 197, 197), (2, 6, 1, 1), (2, 1, 1, 1), (197, 1),
                                        # just off the fast path: broadcast on a leading or the last dim
                                        (1, 6, 197, 1), (2, 6, 1, 197)])
def test_where_row_mask(cond_shape):
    g = torch.Generator().manual_seed(6)
    cond = torch.rand(*cond_shape, generator=g) > 0.5
    cond.view(-1)[:16] = True  # the first rows or elements pick a, whatever the draw
    a, b = _specials(2, 6, 197, 197, seed=7), _specials(2, 6, 197, 197, seed=8)
    _check(torch.where, cond, a, b)
    _check(lambda c, x: torch.where(c, x, 0.0), cond, a)
    _check(lambda c, x: torch.where(c, -2.5, x), cond, a)
    _check(lambda c, x: x.masked_fill(c, NEG_INF), cond, a)


def test_where_other_dtypes_and_broadcast_values():
    g = torch.Generator().manual_seed(9)
    cond = torch.rand(4, 5, 1, generator=g) > 0.5
    a64, b64 = torch.randn(4, 5, 6, dtype=torch.float64), torch.randn(4, 5, 6, dtype=torch.float64)
    _check(torch.where, cond, a64, b64)
    a, b = _specials(4, 5, 6), _specials(1, 5, 6, seed=3)
    _check(torch.where, cond, a, b)  # b broadcast: generic path
    _check(torch.where, cond.to(torch.uint8) > 0, a, a + 1)


def test_safe_softmax_all_masked_rows_are_zero():
    x = _specials(2, 6, 17, 17)
    x[0, 2, 5] = NEG_INF
    fn = lambda t: torch.ops.aten._safe_softmax(t, -1)  # noqa: E731
    got = _native_outputs(fn, (x,))[0]
    want = fn(x)
    rows = (x == NEG_INF).all(-1)
    assert rows.sum() >= 12
    _assert_exact(got[rows], want[rows])  # exactly zero, as torch gives
    assert torch.count_nonzero(got[rows]) == 0
    finite = ~rows & ~x.isnan().any(-1) & ~(x == INF).any(-1)
    torch.testing.assert_close(got[finite], want[finite], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("perm_and_shape", [((0, 2, 1, 3), (1, 197, 6, 64)), ((2, 0, 3, 1, 4), (1, 197, 3, 6, 64)),
                                            ((1, 0, 2), (40, 3, 1)), ((0, 2, 1), (2, 5, 7))])
def test_permute_copies(perm_and_shape):
    perm, shape = perm_and_shape
    x = _specials(*shape)
    _check(lambda t: t.permute(*perm).contiguous() + 0.0, x)
    _check(lambda t: t.permute(*perm).contiguous().to(torch.int32), x.nan_to_num(0.0, 1e6, -1e6) * 100)


def test_expand_and_slice_copies():
    x = _specials(3, 1, 70)
    _check(lambda t: t.expand(3, 5, 70).contiguous() * 1.0, x)
    _check(lambda t: t[:, :, 3:61].contiguous() * 1.0, _specials(3, 4, 70))
    _check(lambda t: t[:, :, 3:61].contiguous() * 1, torch.arange(840, dtype=torch.int16).view(3, 4, 70))


def test_mask_chain_bit_identical_for_1_2_and_3_threads(restore_pool_size):
    x = _specials(2, 6, 197, 197)
    fn = lambda t: torch.ops.aten._safe_softmax(t, -1)  # noqa: E731
    method = native_method(fn, (x,))
    outputs = {}
    for threads in (1, 2, 3):
        portable_lib._unsafe_reset_threadpool(threads)
        outputs[threads] = method.execute([x])[0]
    _assert_exact(outputs[2], outputs[1])
    _assert_exact(outputs[3], outputs[1])


@pytest.mark.parametrize("fn", [
    lambda t: t.permute(0, 2, 1, 3).contiguous() + 0.0,   # rows of 64 kept: row copies in chunks
    lambda t: t[:, :, 1:, :].contiguous() * 1.0,          # a slice: row copies from an offset
    lambda t: torch.cat([t, t], dim=1),                   # whole dense blocks
    lambda t: t.clone() + 0.0,                            # one dense copy split over the pool
], ids=["permute", "slice", "cat", "clone"])
def test_large_copies_match_torch_for_1_2_and_3_threads(fn, restore_pool_size):
    # Big enough (over 1 MiB) that every copy path splits into several parallel chunks.
    x = _specials(2, 197, 6, 64, seed=4)
    method = native_method(fn, (x,))
    with torch.no_grad():
        want = fn(x)
    for threads in (1, 2, 3):
        portable_lib._unsafe_reset_threadpool(threads)
        _assert_exact(method.execute([x])[0], want)
