"""The differential tester (random_programs.py), seeded and bounded: a few hundred random programs over
everything XnnpackPartitioner claims, each in its precision, on eager, both engines and (with
ET_REFERENCE_PYTHON) the published runtime, with no disagreement and no crash. A longer run by hand
is in BENCHMARKS.md; `python test/random_programs.py --programs N --seed S` reproduces either."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest
import torch

import random_programs as rp

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torchao") is None,
                                reason="torchao is not installed (pip install torchao==0.18.0)")

CI_SEED = 7
CI_PROGRAMS = int(os.environ.get("ET_DIFFERENTIAL_PROGRAMS", "200"))  # 340 s for 300 here: CI keeps under budget


def test_random_programs_agree_on_every_runtime(tmp_path):
    torch.set_num_threads(1)
    published = os.environ.get("ET_REFERENCE_PYTHON")
    lines = []
    stats = rp.run(CI_PROGRAMS, CI_SEED, published, keep=tmp_path, log=lines.append)
    assert not stats["findings"], "\n".join(lines)
    assert set(stats["by_variant"]) == set(rp.VARIANTS), stats["by_variant"]
    # torch.export may refuse a random dynamic graph now and then; most programs must run.
    assert stats["programs"] >= 0.95 * CI_PROGRAMS, stats


def test_a_wrong_result_is_a_finding():
    program = rp.make_program(3, "fp32")
    engines = rp.project_engines()
    assert rp.check(program, engines) == []

    class Off:
        """A runtime whose results are one part in 10^4 off."""

        def load_program(self, pte):
            return self

        def load_method(self, name):
            return self

        def execute(self, inputs):
            return [t * (1 + 1e-4) for t in program.module(*inputs)]

    findings = rp.check(program, {"off": Off()})
    assert len(findings) == 1 and "off:" in findings[0] and "beyond tolerance" in findings[0], findings


def test_a_published_runtime_crash_is_a_finding(tmp_path):
    """A runner that dies on one file (as the published runtime did on our XNNPACK files) names it,
    and the files after it still run."""
    crashing = tmp_path / "runner.py"
    crashing.write_text(
        "import os, signal, sys\n"
        "for name in sys.argv[2:]:\n"
        "    print(name, flush=True)\n"
        "    if name == 'b':\n"
        "        os.kill(os.getpid(), signal.SIGSEGV)\n"
        "    open(os.path.join(sys.argv[1], name + '.out.pt'), 'w').close()\n")
    failures = rp.run_published(sys.executable, tmp_path, ["a", "b", "c"], runner=crashing)
    assert list(failures) == ["b"] and "process died" in failures["b"], failures
    assert (tmp_path / "c.out.pt").exists()


def test_programs_are_reproducible_from_their_seed():
    a, b = rp.make_program(11, "int8"), rp.make_program(11, "int8")
    assert a.describe() == b.describe()
    assert all(torch.equal(x, y) for x, y in zip(a.inputs, b.inputs))


class _Fixed:
    """A runtime that returns what `fn(inputs)` gives, whatever the file."""

    def __init__(self, fn) -> None:
        self.fn = fn

    def load_program(self, pte):
        return self

    def load_method(self, name):
        return self

    def execute(self, inputs):
        return self.fn(inputs)


def test_an_all_zero_reference_is_compared_at_the_generators_scale():
    # A zero made by cancellation (layer norm of a constant row) is rounding noise in another runtime;
    # compare_outputs alone would admit only exact zeros. Noise passes, a real value does not.
    program = rp.make_program(3, "fp32")
    with torch.no_grad():
        reference = [torch.zeros_like(t) for t in program.module(*program.run_inputs)]
    pte = b""
    noise = _Fixed(lambda inputs: [torch.full_like(t, -8.7e-7) for t in reference])
    assert rp.check(program, {"noise": noise}, pte=pte, reference=reference, budget=1e-5) == []
    wrong = _Fixed(lambda inputs: [torch.full_like(t, 1e-2) for t in reference])
    findings = rp.check(program, {"wrong": wrong}, pte=pte, reference=reference, budget=1e-5)
    assert len(findings) == 1 and "wrong:" in findings[0], findings
    # The same when eager's cancellation leaves an ulp (p340000211_fp16: eager 1.19e-7, every runtime 0);
    # a reference of a few hundredths is a value, compared at its own scale.
    ulps = [torch.full_like(t, 1.19e-7) for t in reference]
    zeros = _Fixed(lambda inputs: [torch.zeros_like(t) for t in reference])
    assert rp.check(program, {"zeros": zeros}, pte=pte, reference=ulps, budget=1e-5) == []
    small = [torch.full_like(t, 3e-2) for t in reference]
    assert len(rp.check(program, {"zeros": zeros}, pte=pte, reference=small, budget=1e-5)) == 1


def test_a_quantization_boundary_flip_is_told_from_a_wrong_result(tmp_path):
    # A runtime off only on the exact inputs (a tie that belongs to those values) agrees on a second
    # sample of inputs; a runtime off everywhere is still a finding there.
    program = rp.make_program(5, "int8")
    pte, reference, budget = rp.lower(program)
    exact = [t.clone() for t in program.run_inputs]

    def converted(inputs):
        with torch.no_grad():
            return [t.clone() for t in program.converted(*inputs)]

    def flips_on_exact_inputs(inputs):
        out = converted(inputs)
        if all(torch.equal(a, b) for a, b in zip(inputs, exact)):
            out = [t + 0.5 * (t.abs().max() + 1) for t in out]
        return out

    flaky = {"flaky": _Fixed(flips_on_exact_inputs)}
    assert rp.check(program, flaky, pte=pte, reference=reference, budget=budget)
    assert rp.recheck(program, flaky, None, tmp_path, pte, budget) == []
    always = {"always": _Fixed(lambda inputs: [t * 1.5 + 1 for t in converted(inputs)])}
    assert rp.recheck(program, always, None, tmp_path, pte, budget)


# The programs behind the long runs' findings (BENCHMARKS.md, "Differential testing"), each failing
# before its fix: a requantizing copy the published runtime refused (p300000998_int8), quantized means
# whose ties rounded the other way (p301000914_int8, p301001145_int8), a Convert to qdint8 rounding on
# a boundary (p900000052_qd8), run-time quantization left to the portable kernels (p301000274_qd8), a
# zero made by cancellation (p301000305_int8), a quantization boundary flip (p300000473_int8) and a
# layer norm of a constant row, whose rounded mean XNNPACK's decomposition amplifies, in a float and in an
# 8da4w program (p300001518_fp32_dyn, p303000178_8da4w), and later a ten-node lookup-table chain, a
# mean of cancelling terms, a clamp after a convolution and a min of a one-element constant and known
# zeros, and an int8 subtraction of a Python number (p310000689_int8, p331002095_fp32, p331002582_int8,
# p331004272_fp32_dyn, p331004480_int8).
PINNED = ["p300000998_int8", "p301000914_int8", "p301001145_int8", "p900000052_qd8", "p301000274_qd8",
          "p301000305_int8", "p300000473_int8", "p300001518_fp32_dyn", "p303000178_8da4w",
          "p305000001_int8", "p310000689_int8", "p331002095_fp32",
          "p331002582_int8", "p331004272_fp32_dyn", "p331004480_int8"]


def test_the_long_runs_findings_stay_fixed(tmp_path):
    torch.set_num_threads(1)
    lines = []
    stats = rp.run(0, 0, os.environ.get("ET_REFERENCE_PYTHON"), keep=tmp_path, log=lines.append,
                   programs=[rp._program_name(name) for name in PINNED])
    assert stats["programs"] == len(PINNED) and not stats["findings"], "\n".join(lines)


def test_a_quantization_that_overflows_is_degenerate_and_not_compared():
    # rsqrt(v * v + 0.25) of an int8 value whose scale rounds the sum to zero: the converted module's
    # reference is inf where the float model is finite, so which elements overflow is a rounding
    # boundary each runtime may land either side of (p311000770_int8, the long run's finding).
    degenerate = rp.make_program(*rp._program_name("p311000770_int8"))
    rp.lower(degenerate)
    assert degenerate.degenerate
    assert any("degenerate quantization" in f for f in rp.check(degenerate, {}))
    ordinary = rp.make_program(*rp._program_name("p305000001_int8"))
    rp.lower(ordinary)
    assert not ordinary.degenerate
