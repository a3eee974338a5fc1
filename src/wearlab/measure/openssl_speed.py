"""OpenSSL's own benchmark, `openssl speed -mr -elapsed`, as wearlab runs it on a device: the
operations it times (groups: one invocation each), its machine-readable output parsed, and each
result beside the device profile's own figure. Shared by `wearlab crypto-bench` (run.cryptobench,
which prints a table) and the `crypto-ops` workload (workloads.crypto_ops, which writes results
that `wearlab check` reads); the process it runs in gets the device's time from the devicecpu
library (nodes.devicecpu), whoever starts it.

`openssl speed` times digests and ciphers per block size (16 B ... 16 KB), public-key operations
per operation, with wall-clock time (`-elapsed`; without it, it divides by CPU time, which the
guest counts in 10 ms ticks and which padding by sleeping does not use at all).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from wearlab.errors import EnvironmentProblem
from wearlab.model.devices import Device


@dataclass(frozen=True)
class Group:
    """One `openssl speed` invocation and the profile keys it times."""

    name: str
    argv: tuple[str, ...]
    keys: tuple[str, ...]       # per-operation: (sign, verify) or (derive,); per-byte: (digest:x,)

    @property
    def per_operation(self) -> bool:
        """A public-key group (timed per operation), not a digest or cipher (per byte)."""
        return not self.keys[0].startswith(("digest:", "cipher:"))


GROUPS = (
    *(Group(f"rsa{b}", (f"rsa{b}",), (f"sign:rsa{b}", f"verify:rsa{b}")) for b in (1024, 2048, 4096)),
    *(Group(f"ecdsa{c}", (f"ecdsa{c}",), (f"sign:{c}", f"verify:{c}")) for c in ("p256", "p384", "p521")),
    *(Group(f"ecdh{c}", (f"ecdh{c}",), (f"derive:{c}",)) for c in ("p256", "p384", "p521", "x25519")),
    *(Group(d, ("-evp", d), (f"digest:{d}",)) for d in ("md5", "sha1", "sha256", "sha512")),
    *(Group(c, ("-evp", c), (f"cipher:{c}",)) for c in ("aes-128-cbc", "aes-256-cbc", "aes-128-gcm", "aes-256-gcm",
                                                         "chacha20-poly1305")),
)
GROUP_NAMES = [g.name for g in GROUPS]
BY_NAME = {g.name: g for g in GROUPS}


@dataclass(frozen=True)
class Result:
    key: str
    size: int               # bytes per call; 0 for a public-key operation
    per_s: float            # operations per second, or bytes per second


def speed_argv(group: Group, seconds: int) -> list[str]:
    return ["openssl", "speed", "-mr", "-elapsed", "-seconds", str(seconds), *group.argv]


def parse_speed(text: str, group: Group) -> list[Result]:
    """`openssl speed -mr` output -> results (its +H block sizes, +F digest/cipher bytes/s, +F2
    RSA and +F4 ECDSA sign/s and verify/s, +F5 ECDH ops/s)."""
    sizes: list[int] = []
    out: list[Result] = []
    for line in text.splitlines():
        parts = line.strip().split(":")
        tag = parts[0]
        if tag == "+H":
            sizes = [int(x) for x in parts[1:]]
        elif tag == "+F" and len(parts) > 3:
            out += [Result(group.keys[0], s, float(v)) for s, v in zip(sizes, parts[3:])]
        elif tag in ("+F2", "+F4") and len(parts) >= 5:
            out += [Result(group.keys[0], 0, float(parts[3])), Result(group.keys[1], 0, float(parts[4]))]
        elif tag == "+F5" and len(parts) >= 4:
            out.append(Result(group.keys[0], 0, float(parts[3])))
    return out


def run_groups(run: Callable[[list[str]], subprocess.CompletedProcess], groups: Sequence[Group],
               seconds: int) -> list[Result]:
    """Each group's `openssl speed`, through `run` (argv -> the finished process: here, or in a
    node, with the device's environment); raise on a failure."""
    out: list[Result] = []
    for g in groups:
        argv = speed_argv(g, seconds)
        res = run(argv)
        got = parse_speed(res.stdout, g)
        if res.returncode != 0 or not got:
            raise EnvironmentProblem(f"`{' '.join(argv)}` failed: {(res.stderr or res.stdout).strip()[-300:]}")
        out += got
    return out


def target(device: Device, r: Result) -> float | None:
    """The device profile's own figure for a result: operations/s, or bytes/s at its block size."""
    c = device.cost(r.key)
    if c is None:
        return None
    t = c.seconds(r.size)
    return (r.size / t if r.size else 1 / t) if t > 0 else None
