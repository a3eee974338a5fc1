"""A ledger of what wearlab made on this machine, so `wearlab clean` removes it and only it.

Each live run or guest has one JSON file under /run/wearlab/made (tmpfs: gone at reboot, as are
the things it lists). Processes wearlab starts in namespaces carry WEARLAB_RUN in their
environment as a second, ledger-independent way to find them after a `kill -9`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

LEDGER = Path(os.environ.get("WEARLAB_LEDGER", "/run/wearlab/made"))
MARK_ENV = "WEARLAB_RUN"


def record(kind: str, ident: str, **facts) -> None:
    LEDGER.mkdir(parents=True, exist_ok=True)
    entry = {"kind": kind, "id": ident, "owner_pid": os.getpid(), **facts}
    tmp = LEDGER / f".{kind}-{ident}.tmp"
    tmp.write_text(json.dumps(entry))
    tmp.replace(LEDGER / f"{kind}-{ident}.json")


def forget(kind: str, ident: str) -> None:
    (LEDGER / f"{kind}-{ident}.json").unlink(missing_ok=True)


def entries() -> list[dict]:
    out = []
    if LEDGER.is_dir():
        for f in sorted(LEDGER.glob("*.json")):
            try:
                out.append(json.loads(f.read_text()) | {"_file": str(f)})
            except (OSError, ValueError):
                out.append({"kind": "corrupt", "_file": str(f)})
    return out
