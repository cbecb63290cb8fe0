"""The tuning database: verified tuning results, looked up by problem and hardware."""
from .failure import FailureRecord
from .record import (
    DTYPES,
    TIMING_KINDS,
    RecordError,
    TuningRecord,
    attrs_key,
    bucket,
    shape_key,
)
from .store import EXPORT_FORMAT, SCHEMA_VERSION, TuningDB, generation, read_export

__all__ = [
    "DTYPES",
    "EXPORT_FORMAT",
    "FailureRecord",
    "SCHEMA_VERSION",
    "TIMING_KINDS",
    "RecordError",
    "TuningDB",
    "TuningRecord",
    "attrs_key",
    "bucket",
    "generation",
    "read_export",
    "shape_key",
]
