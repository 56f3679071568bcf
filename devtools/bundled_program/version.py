"""The schema version written into every `.bpte` (the published format's current one)."""

BUNDLED_PROGRAM_SCHEMA_VERSION = 2
