"""Where derivaudit keeps its files: a neutral module, so the cache, `report` and the OpenAI backend
can find them without importing torch or transformers."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """$DERIVAUDIT_HOME, else ~/.cache/derivaudit."""
    return Path(os.environ.get("DERIVAUDIT_HOME") or Path.home() / ".cache" / "derivaudit")


def cache_path() -> Path:
    """$DERIVAUDIT_CACHE, else $DERIVAUDIT_HOME/cache.sqlite."""
    return Path(os.environ["DERIVAUDIT_CACHE"]) if os.environ.get("DERIVAUDIT_CACHE") else home() / "cache.sqlite"
