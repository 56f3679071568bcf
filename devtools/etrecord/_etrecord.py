"""ETRecord at its published path; the lowering writes it, so it lives in `executorch.exir._etrecord`."""

from executorch.exir._etrecord import (ETRecord, ETRecordBuilder, ETRecordError, ETRecordReservedFileNames,
                                       generate_etrecord, parse_etrecord)

__all__ = ["ETRecord", "ETRecordBuilder", "ETRecordError", "ETRecordReservedFileNames", "generate_etrecord",
           "parse_etrecord"]
