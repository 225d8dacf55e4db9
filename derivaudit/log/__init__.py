"""The memory log: its records, reading JSONL logs safely, the schema, the rules across records,
logs larger than memory, and output files written atomically.

The names below are importable from here; each loads its module on first use."""

from ..registry import face

__getattr__, __dir__ = face(__name__, {
    "Conversation": "records",
    "MemoryLog": "records",
    "Operation": "records",
    "Problem": "records",
    "Read": "records",
    "Source": "records",
    "Turn": "records",
    "Write": "records",
    "LogError": "records",
    "lineage_families": "records",
    "header": "records",
    "turn_to_dict": "records",
    "write_to_dict": "records",
    "read_to_dict": "records",
    "operation_to_dict": "records",
    "check_log": "io",
    "check_rows": "io",
    "load_log": "io",
    "read_passages": "io",
    "read_records": "io",
    "OutputError": "outputs",
    "atomic_dir": "outputs",
    "atomic_writer": "outputs",
    "check_output": "outputs",
    "write_jsonl": "outputs",
    "SpilledLog": "spill",
    "validate": "validation",
})
__all__ = __dir__()
