"""Command line: `gen-oplist` from .pte files, `merge` of selected_operators.yaml files."""

from __future__ import annotations

import argparse
import sys

from executorch.exir.error import SerializeError
from executorch.tools.selective_build.oplist import gen_oplist, load_selected, merge, write_selected
from executorch.tools.selective_build.yaml_subset import YamlError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m executorch.tools.selective_build")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("gen-oplist", help="operators and dtypes the given .pte files call")
    gen.add_argument("models", nargs="+", help=".pte files")
    gen.add_argument("-o", "--output", default="selected_operators.yaml")
    mrg = sub.add_parser("merge", help="union of several selected_operators.yaml files")
    mrg.add_argument("inputs", nargs="+", help="selected_operators.yaml files")
    mrg.add_argument("-o", "--output", default="selected_operators.yaml")
    args = parser.parse_args(argv)
    try:
        if args.command == "gen-oplist":
            selected = gen_oplist(args.models)
        else:
            selected = merge(load_selected(path) for path in args.inputs)
        write_selected(selected, args.output)
    except (OSError, SerializeError, YamlError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{args.output}: {len(selected.operators)} operators")
    return 0


if __name__ == "__main__":
    sys.exit(main())
