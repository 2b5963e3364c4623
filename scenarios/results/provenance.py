"""Where a result came from: podsim version, source commit, date and the scenario's hash.

Recorded in every run's ``summary.json`` (``provenance``) and shown in its report, so a figure
in a design review can be traced to the code and the exact scenario that produced it. The
scenario hash is the SHA-256 of the resolved scenario (defaults filled in, keys sorted, JSON),
so two runs of the same scenario share it whatever file or ``--set`` produced them. The commit
is read from git when podsim runs from a checkout (``dirty`` when tracked files differ from it);
an installed wheel has none. The date is the only field that differs between two identical
runs; determinism checks leave ``provenance`` out.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["provenance", "scenario_hash", "source_commit"]

#: the repository root (the ``podsim`` package's folder in a checkout)
ROOT = Path(__file__).resolve().parents[2]


def scenario_hash(resolved: dict[str, Any]) -> str:
    """SHA-256 (hex) of a resolved scenario, independent of key order."""
    text = json.dumps(resolved, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@lru_cache(maxsize=1)
def source_commit() -> dict[str, Any] | None:
    """``{"commit": sha, "dirty": bool}`` of the checkout podsim runs from, or None (an
    installed package, or git absent)."""
    if not (ROOT / ".git").exists():
        return None
    try:
        sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()  # fmt: skip
        status = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": sha, "dirty": bool(status.strip())} if sha else None


def provenance(resolved: dict[str, Any] | None) -> dict[str, Any]:
    """The provenance record of a run of the resolved scenario ``resolved``."""
    from podsim import __version__

    src = source_commit()
    return {
        "podsim_version": __version__,
        "commit": src["commit"] if src else None,
        "dirty": src["dirty"] if src else None,
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "scenario_sha256": scenario_hash(resolved) if resolved is not None else None,
        "python": platform.python_version(),
    }
