"""`python -m executorch.devtools timeline FILE.etdp [--etrecord R] -o trace.json`."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Optional, Sequence


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m executorch.devtools", description="Developer tools over ETDumps.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{timeline}")
    timeline = sub.add_parser("timeline", help="write an ETDump as a Chrome/Perfetto trace (Trace Event Format JSON)")
    timeline.add_argument("etdump", metavar="FILE.etdp", type=Path, help="the ETDump a runtime wrote")
    timeline.add_argument("--etrecord", type=Path, help="the program's ETRecord: adds op types and debug handles")
    timeline.add_argument("-o", "--output", type=Path, required=True, help="the trace to write (JSON)")
    timeline.add_argument("--time-scale", default="ns", choices=("ns", "us", "ms", "s"),
                          help="the unit of the ETDump's ticks (default: ns, what both runtimes record on Linux)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    if importlib.util.find_spec("executorch.devtools.timeline") is None:
        print("error: the timeline command needs executorch.devtools.timeline, which ships with the full executorch "
              "wheel, not the minimal one; install the full wheel (built without EXECUTORCH_BUILD_MINIMAL=1)",
              file=sys.stderr)
        return 1
    from executorch.devtools.etdump.serialize import ETDumpError
    from executorch.exir._etrecord import ETRecordError
    from executorch.devtools.timeline import write_trace

    for path, what in ((args.etdump, "ETDump"), (args.etrecord, "ETRecord")):
        if path is not None and not path.is_file():
            print(f"error: the {what} {path} does not exist; pass the file the "
                  f"{'runtime' if what == 'ETDump' else 'export'} wrote", file=sys.stderr)
            return 1
    try:
        trace = write_trace(args.etdump, args.output, etrecord=args.etrecord, source_time_scale=args.time_scale)
    except (ETDumpError, ETRecordError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: cannot write {args.output}: {e.strerror or e}", file=sys.stderr)
        return 1
    timed = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    tracks = len({e["tid"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"})
    print(f"wrote {args.output}: {len(timed)} events on {tracks} tracks (open it in https://ui.perfetto.dev "
          "or chrome://tracing)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
