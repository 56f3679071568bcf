"""Native max_pool2d matches torch bit for bit, indices included, for any thread count."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("executorch.extension.pybindings._portable_lib",
                    reason="native runtime not built (bash tools/run_tests.sh builds it; needs a C++ compiler)")

from executorch.extension.pybindings import portable_lib  # noqa: E402

from native_fn import native_method  # noqa: E402


def _method(x: torch.Tensor, **kw):
    return native_method(lambda t: F.max_pool2d(t, return_indices=True, **kw), (x,))


def _input(shape, seed: int, specials: bool = True) -> torch.Tensor:
    """Small integers (many ties inside a window), with NaN, -inf and +inf sprinkled in."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-4, 5, shape, generator=g).float()
    if specials:
        flat = x.view(-1)
        picks = torch.randint(0, flat.numel(), (max(3, flat.numel() // 40),), generator=g)
        flat[picks] = torch.tensor([math.nan, -math.inf, math.inf]).repeat(picks.numel())[:picks.numel()]
        x[..., :3, :] = -math.inf  # windows of -inf only, at the top edge
    return x


def _assert_same(got, want) -> None:
    assert torch.equal(got[0].view(torch.int32), want[0].view(torch.int32)), "values differ"
    assert torch.equal(got[1], want[1]), f"indices differ at {(got[1] != want[1]).nonzero()[:5].tolist()}"


CASES = [
    # ResNet's stem pool, on its shape: every column an interior or an edge one.
    ((1, 64, 112, 112), dict(kernel_size=3, stride=2, padding=1)),
    ((2, 3, 17, 23), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((1, 5, 9, 150), dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 0), dilation=(2, 1))),
    ((1, 4, 8, 8), dict(kernel_size=2, stride=2)),
    ((1, 2, 11, 13), dict(kernel_size=(3, 5), stride=(2, 3), padding=(1, 2), dilation=(1, 2), ceil_mode=True)),
    ((1, 3, 6, 200), dict(kernel_size=(1, 4), stride=(1, 1))),  # long rows: several column blocks
]


@pytest.mark.parametrize("shape,kw", CASES)
def test_max_pool2d_values_and_indices_match_torch(shape, kw):
    x = _input(shape, seed=len(shape) + shape[-1])
    want = F.max_pool2d(x, return_indices=True, **kw)
    _assert_same(_method(x, **kw).execute([x]), want)


def test_the_check_catches_a_moved_index():
    x = _input((1, 2, 8, 8), seed=1, specials=False)
    want = F.max_pool2d(x, 2, return_indices=True)
    moved = want[1].clone()
    moved.view(-1)[3] += 1
    with pytest.raises(AssertionError):
        _assert_same((want[0], moved), want)


def test_max_pool2d_same_bits_for_1_2_and_3_threads(restore_pool_size):
    x = _input((1, 64, 112, 112), seed=9)
    method = _method(x, kernel_size=3, stride=2, padding=1)
    results = []
    for n in (1, 2, 3):
        portable_lib._unsafe_reset_threadpool(n)
        results.append(method.execute([x]))
    for r in results[1:]:
        _assert_same(r, results[0])
