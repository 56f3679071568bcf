"""The argument parser and the process boundary: one-line errors, exit codes, quiet warnings, closed pipes."""

from __future__ import annotations

import argparse
import math
import os
import sys
import warnings
from pathlib import Path
from typing import NoReturn, Optional, Sequence

from executorch.cli.errors import CliError, require_full_wheel

_EPILOG = """\
MODEL is a model-zoo name (e.g. mobilenet_v2; the zoo, executorch.examples.models, is in
the source tree but in no wheel) or FILE.py:FACTORY, where FACTORY() returns
(module, example_inputs_tuple). With --dynamic, the shapes come from the zoo, or for
FILE.py:FACTORY from a FACTORY_dynamic_shapes() function in the same file.
"""


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m executorch.exir") -> int:
    """Run the command line; returns the process exit code."""
    args = _parser(prog).parse_args(argv)
    try:
        return args.run(args)
    except CliError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.code


def run(prog: str) -> NoReturn:
    """main() as a process: torch's import-time noise silenced, and a reader that stops early (`| head`)
    ends the output quietly instead of with a BrokenPipeError traceback."""
    _quiet_warnings()
    try:
        code = main(prog=prog)
        sys.stdout.flush()
    except BrokenPipeError:
        # Point stdout at /dev/null so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 128 + 13  # what a process killed by SIGPIPE reports
    raise SystemExit(code)


def _quiet_warnings() -> None:
    # torch warns at import when NumPy is absent (exporting needs none) and about its own deprecated
    # pytree classes used inside torch.export; neither is something a CLI user can act on.
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    warnings.filterwarnings("ignore", message=r".*LeafSpec.* is deprecated", category=FutureWarning)


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Export a model to a .pte (and check it runs), or summarize a .pte.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{export,inspect,bundled,profile}")

    export = sub.add_parser(
        "export", help="export a model to a .pte and check it against eager",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument("model", metavar="MODEL", help="a zoo name or FILE.py:FACTORY")
    export.add_argument("-o", "--output", required=True, type=Path, help="the .pte file to write")
    export.add_argument("--method-name", default="forward", help="name of the method in the program (default: forward)")
    export.add_argument("--seed", type=int, default=0,
                        help="torch seed set before calling the factory (default: 0); factories that seed "
                        "themselves, as the zoo's do, override it")
    export.add_argument("--dynamic", action="store_true", help="export with the model's declared dynamic shapes")
    export.add_argument("--backend", choices=("portable", "xnnpack"), default="portable",
                        help="portable: every op a kernel call (default); xnnpack: what XNNPACK takes is delegated "
                             "to it (XnnpackPartitioner), the rest stays on portable kernels")
    export.add_argument("--no-verify", dest="verify", action="store_false",
                        help="skip running the .pte on executorch.runtime and comparing with eager")
    export.add_argument("--bundled", metavar="FILE.bpte", type=Path,
                        help="also write a bundled program: the .pte with the example inputs and eager's outputs "
                        "as its test case (run it with the bundled command or executor_runner --bundled)")
    export.set_defaults(run=_run_export)

    inspect = sub.add_parser("inspect", help="print a summary of a .pte file")
    inspect.add_argument("pte", metavar="FILE.pte", type=Path)
    inspect.set_defaults(run=_run_inspect)

    bundled = sub.add_parser("bundled", help="run every test case of a .bpte bundled program and report each")
    bundled.add_argument("bpte", metavar="FILE.bpte", type=Path)
    bundled.add_argument("--data-path", type=Path, help="the .ptd holding tensors the program keeps outside it")
    bundled.add_argument("--rtol", type=float, help="relative tolerance (default: per dtype, 1e-5 for float32)")
    bundled.add_argument("--atol", type=float, help="tolerance relative to the largest expected value")
    bundled.set_defaults(run=_run_bundled)

    profile = sub.add_parser("profile", help="run a .pte N times with the event tracer on; print the time per "
                             "instruction and the top operators by share of time")
    profile.add_argument("pte", metavar="FILE.pte", type=Path)
    profile.add_argument("-n", "--iterations", type=int, default=10, help="profiled runs (default: 10)")
    profile.add_argument("--warmup", type=int, default=1, help="runs before those, not counted (default: 1)")
    profile.add_argument("--method", default="forward", help="the method to run (default: forward)")
    profile.add_argument("--inputs", type=Path, help="a torch.save'd list of inputs (default: random tensors of the "
                         "method's input shapes and dtypes, seeded by --seed)")
    profile.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: 0)")
    profile.add_argument("--data-path", type=Path, help="the .ptd holding tensors the program keeps outside it")
    profile.add_argument("--top", type=int, default=10, help="how many operators to list and plot (default: 10)")
    profile.add_argument("--plot", metavar="FILE.png", type=Path,
                         help="also save the top operators as a bar chart (needs matplotlib: pip install "
                         "executorch[devtools])")
    profile.set_defaults(run=_run_profile)
    return parser


def _run_profile(args: argparse.Namespace) -> int:
    require_full_wheel("executorch.cli.profile", "the profile command")
    from executorch.cli.profile import run_profile

    return run_profile(args)


def _run_export(args: argparse.Namespace) -> int:
    from executorch.cli.export import run_export

    return run_export(args)


def _run_bundled(args: argparse.Namespace) -> int:
    from executorch.devtools.bundled_program.run import run_bundled_program
    from executorch.exir.error import SerializeError
    from executorch.runtime import ExecuTorchError

    try:
        results = run_bundled_program(args.bpte, rtol=args.rtol, atol=args.atol, data_path=args.data_path)
    except OSError as e:
        raise CliError(f"cannot read {args.bpte}: {e.strerror or e}", 1) from None
    except (SerializeError, ExecuTorchError) as e:
        raise CliError(f"{args.bpte}: {e}", 1) from None
    for r in results:
        print(r)
    failed = sum(not r.ok for r in results)
    worst = max((r.comparison.max_rel_err for r in results if r.comparison), default=0.0)
    # Infinite where a case's outputs could not be compared (count, dtype, shape): its line says why.
    print(f"{'FAIL' if failed else 'OK'}: {len(results) - failed}/{len(results)} test cases passed"
          + (f" (max rel err {worst:.3g})" if math.isfinite(worst) else ""))
    return 1 if failed else 0


def _run_inspect(args: argparse.Namespace) -> int:
    from executorch.cli.summary import summarize
    from executorch.exir.error import SerializeError

    try:
        data = args.pte.read_bytes()
    except OSError as e:
        raise CliError(f"cannot read {args.pte}: {e.strerror or e}", 1) from None
    try:
        print(summarize(data, str(args.pte)))
    except SerializeError as e:
        raise CliError(f"{args.pte}: {e}", 1) from None
    return 0
