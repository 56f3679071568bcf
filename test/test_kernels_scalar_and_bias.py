"""The native fast paths for a tensor with a scalar (or one-element tensor) and for addmm/linear's bias fill
match eager torch bit for bit."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("executorch.extension.pybindings._portable_lib",
                    reason="native runtime not built (bash tools/run_tests.sh builds it; needs a C++ compiler)")

from executorch.extension.pybindings import portable_lib  # noqa: E402

from native_fn import native_method  # noqa: E402




def _assert_exact(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    bits = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}[got.dtype]
    # Same bits: NaN where torch has NaN, -0.0 where it has -0.0.
    assert torch.equal(got.view(bits), want.view(bits)), (got - want).abs().max()


def _check(fn, *inputs) -> None:
    with torch.no_grad():
        want = fn(*inputs)
    _assert_exact(native_method(fn, inputs).execute(list(inputs))[0], want)


def _specials(*shape: int, dtype=torch.float32, seed: int = 0) -> torch.Tensor:
    """Random floats with -inf, inf, NaN and +-0 sprinkled in."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g) * 3
    flat = x.view(-1)
    picks = torch.randint(0, flat.numel(), (max(4, flat.numel() // 9),), generator=g)
    flat[picks] = torch.tensor([-math.inf, math.inf, math.nan, -0.0]).repeat(picks.numel() // 4 + 1)[:picks.numel()]
    return x.to(dtype)


def test_exact_check_catches_one_wrong_bit():
    x = _specials(3, 5, 7)
    y = x.clone()
    y.view(torch.int32).view(-1)[11] ^= 1
    with pytest.raises(AssertionError):
        _assert_exact(y, x)


# (1, 6, 197, 64) is ViT-S's q/k, past one parallel chunk; the others are odd and small.
_SHAPES = [(1, 6, 197, 64), (3, 5, 7), (11,)]


@pytest.mark.parametrize("shape", _SHAPES)
@pytest.mark.parametrize("op", ["mul", "div", "add", "sub", "rsub"])
def test_float32_tensor_with_scalar(shape, op):
    for scalar in (0.3535533905932738, -2.5, 0.0, math.inf, 3):
        _check(lambda x, op=op, s=scalar: getattr(torch, op)(x, s), _specials(*shape))


@pytest.mark.parametrize("shape", _SHAPES)
def test_float32_tensor_with_one_element_tensor_on_either_side(shape):
    x = _specials(*shape)
    one = torch.tensor([0.125])
    _check(lambda a, b: a / b, x, one)
    _check(lambda a, b: a * b, one, x)
    _check(lambda a, b: a - b, one.view(*([1] * len(shape))), x)
    _check(lambda a, b: a + b, torch.tensor([1.5]), torch.tensor([-0.25]))


def test_scaled_head_permute_as_in_attention():
    # torch's attention decomposition scales q and k after permuting the heads.
    qkv = _specials(1, 197, 3, 6, 64)
    _check(lambda t: t.permute(2, 0, 3, 1, 4)[1] * 0.3535533905932738, qkv)
    _check(lambda t: t.permute(2, 0, 3, 4, 1)[0].mul(0.125), qkv)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_tensor_with_scalar(dtype):
    # The number reaches a 16-bit kernel already rounded to the tensor's dtype, where torch
    # multiplies by the float32 number: results may differ by one unit in the last place.
    x = _specials(1, 6, 37, 64, dtype=dtype)
    for fn in (lambda t: t * 0.3535533905932738, lambda t: t.transpose(-1, -2) / 3.0):
        want = fn(x)
        got = native_method(fn, (x,)).execute([x])[0]
        assert got.dtype == dtype and got.shape == want.shape
        assert torch.equal(got.isnan(), want.isnan())
        finite = want.isfinite()
        assert torch.equal(got[~finite & ~want.isnan()], want[~finite & ~want.isnan()])
        ulp = torch.finfo(dtype).eps * want[finite].float().abs()
        assert ((got[finite].float() - want[finite].float()).abs() <= ulp).all()


def test_scalar_path_bit_identical_for_1_2_and_3_threads(restore_pool_size):
    x = _specials(2, 6, 197, 64)
    method = native_method(lambda t: t * 0.3535533905932738 + 1.0, (x,))
    outputs = {}
    for threads in (1, 2, 3):
        portable_lib._unsafe_reset_threadpool(threads)
        outputs[threads] = method.execute([x])[0]
    _assert_exact(outputs[1], x * 0.3535533905932738 + 1.0)
    _assert_exact(outputs[2], outputs[1])
    _assert_exact(outputs[3], outputs[1])


def _ints(*shape: int, dtype, seed: int, scale: float = 1.0) -> torch.Tensor:
    """Small integers (times a power of two), so every product and sum is exact in any order
    and the native product can be compared with torch bit for bit."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(-4, 5, shape, generator=g).to(torch.float32) * scale).to(dtype)


# self shapes: a bias row, a [1, n] row, a single element, a full [m, n] matrix, and a
# transposed one (strided columns).
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("self_shape", ["n", "1n", "1", "mn", "nm_t"])
def test_addmm_bias_fill(dtype, self_shape):
    m, k, n = 197, 24, 203
    a, b = _ints(m, k, dtype=dtype, seed=1), _ints(k, n, dtype=dtype, seed=2)
    self_ = {"n": lambda: _ints(n, dtype=dtype, seed=3, scale=0.25),
             "1n": lambda: _ints(1, n, dtype=dtype, seed=3, scale=0.25),
             "1": lambda: _ints(1, dtype=dtype, seed=3, scale=0.25),
             "mn": lambda: _ints(m, n, dtype=dtype, seed=3, scale=0.25),
             "nm_t": lambda: _ints(n, m, dtype=dtype, seed=3, scale=0.25)}[self_shape]()
    if self_shape == "nm_t":
        _check(lambda s, x, y: torch.addmm(s.t(), x, y), self_, a, b)
    else:
        _check(lambda s, x, y: torch.addmm(s, x, y), self_, a, b)
        _check(lambda s, x, y: torch.addmm(s, x, y, beta=0.5, alpha=2.0), self_, a, b)


def test_addmm_bias_fill_across_16_bit_row_chunks():
    # A 16-bit product is computed in float32 chunks of about 2^20 floats: this one takes two,
    # so the second chunk's rows must come from the right rows of self.
    m, k, n = 1100, 8, 1000
    a, b = _ints(m, k, dtype=torch.float16, seed=4), _ints(k, n, dtype=torch.float16, seed=5)
    self_ = _ints(m, n, dtype=torch.float16, seed=6, scale=0.5)
    _check(lambda s, x, y: torch.addmm(s, x, y, beta=2.0), self_, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_linear_bias_fill(dtype):
    x, w, bias = _ints(3, 65, 24, dtype=dtype, seed=7), _ints(129, 24, dtype=dtype, seed=8), \
        _ints(129, dtype=dtype, seed=9, scale=0.25)
    _check(lambda t, ww, bb: torch.nn.functional.linear(t, ww, bb), x, w, bias)


def test_bias_fill_bit_identical_for_1_2_and_3_threads(restore_pool_size):
    m, k, n = 400, 16, 384
    g = torch.Generator().manual_seed(10)
    a, b, bias = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g), torch.randn(n, generator=g)
    method = native_method(lambda s, x, y: torch.addmm(s, x, y), (bias, a, b))
    outputs = {}
    for threads in (1, 2, 3):
        portable_lib._unsafe_reset_threadpool(threads)
        outputs[threads] = method.execute([bias, a, b])[0]
    want = torch.addmm(bias.double(), a.double(), b.double())
    # Random data: float32 sums in another order, so compare within a tolerance scaled to the terms.
    scale = (a.double().abs() @ b.double().abs() + bias.double().abs()).max()
    assert (outputs[1].double() - want).abs().max() <= 1e-6 * scale
    _assert_exact(outputs[2], outputs[1])
    _assert_exact(outputs[3], outputs[1])
