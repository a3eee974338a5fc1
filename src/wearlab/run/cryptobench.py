"""`wearlab crypto-bench --device NAME`: the device's operations run through the mechanism that
gives a node its device's time (nodes.devicecpu: OpenSSL's own `openssl speed -elapsed`, with
wearlab's devicecpu library preloaded), where experiments compute (the UML guest when the host
kernel lacks netem), printed beside the papers' tables (seed 002's `openssl speed`, seed 001's RSA)
with the ratios: ours / the device's profile says how true the mechanism is, ours / the paper
how the device relates to the papers' hardware.

A front-end for a look at a device: it writes no results. The same operations as an experiment's
runs, whose results `wearlab check` scores, are the `crypto-ops` workload
(workloads.crypto_ops, experiments/seeds/001-crypto.yaml); both run measure.openssl_speed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from wearlab.errors import InputError, Problem
from wearlab.measure.openssl_speed import GROUP_NAMES, GROUPS, Group, Result, parse_speed, run_groups, target
from wearlab.model.declarations import Catalog
from wearlab.model.choices import Runtime
from wearlab.model.devices import Device, builtin_devices
from wearlab.nodes.devicecpu import PAD_ENV, PADS, DeviceProcess
from wearlab.report.device_table import known_devices
from wearlab.runtime import placement, signals, uml

# parse_speed and target are kept importable from here (tests/test_devicecpu.py), where they were.
__all__ = ["GROUPS", "GROUP_NAMES", "REFERENCES", "crypto_bench", "parse_speed", "reference", "speed", "table",
           "target"]

# Where the papers' own figures are: the built-in devices whose numbers were measured there.
REFERENCES = (("seed 002", "vehicle-embedded-computer"), ("seed 001 watch", "sony-smartwatch-3"),
              ("seed 001 phone", "galaxy-s4"))


def speed(device: Device, groups: list[Group], seconds: int, pad: str, workdir: Path) -> list[Result]:
    """Run each group's `openssl speed` here with the device's profile; raise on a failure."""
    proc = DeviceProcess(device, workdir, "crypto-bench")
    env = proc.env()
    env[PAD_ENV] = pad
    return run_groups(lambda argv: subprocess.run(argv, env=env, capture_output=True, text=True, check=False),
                      groups, seconds)


def reference(r: Result, name: str) -> float | None:
    """A paper's figure (a built-in device's measured number) at exactly this block size."""
    c = builtin_devices()[name].cost(r.key)
    if c is None or c.basis != "measured":
        return None
    if not c.per_byte:
        return 1 / c.points[0][1]
    t = dict(c.points).get(r.size)
    return r.size / t if t else None


def table(device: Device, results: list[Result], pad: str) -> Table:
    t = Table(title=f"{device.name} through the mechanism (openssl speed -elapsed, devicecpu library, pad {pad}); "
                    "public-key operations per second, digests and ciphers in 1000s of bytes per second",
              show_lines=False)
    for col in ("operation", "block", "ours", "profile", "ours/profile", *[r for r, _ in REFERENCES], "ours/paper"):
        t.add_column(col, justify="right")
    for r in results:
        unit = 1000 if r.size else 1
        tgt = target(device, r)
        refs = [reference(r, d) for _, d in REFERENCES]
        paper = next((x for x in refs if x is not None), None)
        t.add_row(r.key, str(r.size or "-"), _num(r.per_s / unit), _num(tgt / unit if tgt else None),
                  _ratio(r.per_s, tgt), *[_num(x / unit if x else None) for x in refs], _ratio(r.per_s, paper))
    return t


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}" if x < 1e5 else f"{x:,.0f}"


def _ratio(a: float, b: float | None) -> str:
    return "-" if not b else f"{a / b:.3f}"


def crypto_bench(device_name: str, source: Path | None, only: list[str], seconds: int, pad: str, runtime: str,
                 catalog: Catalog, console: Console) -> int:
    known = known_devices(source, catalog)
    problems = []
    if device_name not in known:
        from wearlab.model.yamlsrc import did_you_mean
        problems.append(Problem("<command line>", None, "--device", f"unknown device '{device_name}'"
                                f"{did_you_mean(device_name, known)} (devices: {', '.join(known)})"))
    problems += [Problem("<command line>", None, "--only", f"unknown group '{g}' (groups: {', '.join(GROUP_NAMES)})")
                 for g in only if g not in GROUP_NAMES]
    if pad not in PADS:
        problems.append(Problem("<command line>", None, "--pad", f"'{pad}' is not one of: {', '.join(PADS)}"))
    if seconds < 1:
        problems.append(Problem("<command line>", None, "--seconds", "must be at least 1"))
    if problems:
        raise InputError(problems)
    where, reason = placement.choose(runtime)
    if where == Runtime.UML:   # (inside a guest, placement.choose answers host)
        console.print(f"runtime: uml ({reason}): running where experiments compute")
        argv = [sys.executable, "-m", "wearlab", "crypto-bench", "--device", device_name, "--seconds", str(seconds),
                "--pad", pad, *(["--in", str(source.resolve())] if source else []),
                *(["--only", ",".join(only)] if only else [])]
        with signals.interruptible():
            return uml.run_in_guest(argv, mounts=placement.project_paths(), cwd=Path.cwd(),
                                    env={"WEARLAB_ARGV": os.environ.get("WEARLAB_ARGV", "")})
    groups = [g for g in GROUPS if not only or g.name in only]
    with tempfile.TemporaryDirectory(prefix="wearlab-crypto-bench-") as d:
        results = speed(known[device_name], groups, seconds, pad, Path(d))
    console.print(table(known[device_name], results, pad))
    return 0
