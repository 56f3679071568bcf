"""ETRecord: what export knows that the runtime does not (programs, debug and delegate maps), in one zip."""

from executorch.exir._etrecord import ETRecord, ETRecordReservedFileNames, generate_etrecord, parse_etrecord

__all__ = ["ETRecord", "ETRecordReservedFileNames", "generate_etrecord", "parse_etrecord"]
