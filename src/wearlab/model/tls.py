"""TLS facts wearlab's parameters and parsers share (one list of each)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TLS_VERSIONS = ("1.0", "1.1", "1.2", "1.3")
TLS13_SUITES = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256")


def tls_version(allowed: tuple[str, ...] = TLS_VERSIONS) -> Callable[[Any], str]:
    """A parameter's normaliser for a TLS version among `allowed` (of TLS_VERSIONS)."""

    def normalize(value: Any) -> str:
        # YAML reads `1.2` as a float and `1.0` as 1.0; both mean the obvious version.
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            text = f"{float(value):.1f}"
            if text in allowed and float(text) == float(value):
                return text
        elif isinstance(value, str):
            text = value.strip()
            if text in allowed:
                return text
            bare = text.lower().removeprefix("tlsv").removeprefix("tls").strip(" v_-")
            if bare in allowed:
                raise ValueError(f"write tls_version: '{bare}' (just the number)")
        raise ValueError(f"tls_version {value!r} is not one of: {', '.join(allowed)}")
    return normalize
