"""The node side of measure.agents.LineAgent: announce readiness (with libcurl's version), then
answer one JSON line per request line. A request that raises gets `on_error(reason)` as its answer,
and the agent lives on for the next."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import pycurl


def serve(handle: Callable[..., dict[str, Any]], on_error: Callable[[str], dict[str, Any]]) -> int:
    print(json.dumps({"ready": True, "libcurl": pycurl.version}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            out = handle(**json.loads(line))
        except Exception as e:  # noqa: BLE001 - the runner gets the reason, the agent lives on
            out = on_error(f"{type(e).__name__}: {e}")
        print(json.dumps(out), flush=True)
    return 0
