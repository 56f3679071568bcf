"""Selective build: which operators (and dtypes) programs use, for building a smaller runtime."""

from executorch.tools.selective_build.oplist import (
    SelectedOperators,
    gen_oplist,
    load_selected,
    merge,
    write_selected,
)

__all__ = ["SelectedOperators", "gen_oplist", "load_selected", "merge", "write_selected"]
