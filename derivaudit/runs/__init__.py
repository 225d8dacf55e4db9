"""The run folder and ./runs/: every file name of a run, checksums, locks, stage resume; where a
log's run goes by default and which run a command takes.

The names below are importable from here; each loads its module on first use."""

from ..registry import face

__getattr__, __dir__ = face(__name__, {
    "RunError": "folder",
    "Stage": "folder",
    "fingerprint": "folder",
    "load_meta": "folder",
    "save_meta": "folder",
    "read_jsonl": "folder",
    "read_rows": "folder",
    "read_json": "folder",
    "write_rows": "folder",
    "write_json": "folder",
    "lock": "folder",
    "verify": "folder",
    "latest": "workspace",
    "run_name": "workspace",
    "scan_folder": "workspace",
})
__all__ = __dir__()
