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
CI_PROGRAMS = int(os.environ.get("ET_DIFFERENTIAL_PROGRAMS", "300"))


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
