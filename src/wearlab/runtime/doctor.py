"""What this machine can do for wearlab: `wearlab doctor`'s table, and the kernel features of the
place a run would use (the host's, or the UML guest kernel's: probed in a booted guest once per
kernel build and kept beside it), which `wearlab validate` and `wearlab run` check a plan against."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from wearlab.errors import EnvironmentProblem
from wearlab.model.choices import Runtime
from wearlab.model.features import KernelFeature
from wearlab.runtime import placement, probe, uml


def guest_report(cached: bool = True) -> dict | None:
    """The guest kernel's probe report (runtime.probe.report), booting a guest (~2 s) unless this
    kernel build's report is cached beside it."""
    kernel = uml.uml_kernel()
    if kernel is None:
        return None
    cache = Path(f"{kernel}.features.json")
    if cached and cache.is_file():
        try:
            return json.loads(cache.read_text())
        except ValueError:
            pass
    buf = io.BytesIO()
    rc = uml.run_in_guest([sys.executable, "-m", "wearlab.runtime.probe"], mounts=placement.project_paths(),
                          cwd=placement.project_paths()[0], out=buf)
    lines = [l for l in buf.getvalue().decode(errors="replace").splitlines() if l.startswith("{")]
    if rc != 0 or not lines:
        return None
    report = json.loads(lines[-1])
    try:
        tmp = cache.with_suffix(".tmp")
        tmp.write_text(json.dumps(report))
        tmp.replace(cache)
    except OSError:
        pass
    return report


def missing_features(needed: frozenset[KernelFeature], runtime: Runtime) -> list[str]:
    """Features a plan needs that the kernel of `runtime` lacks (each with the probe's words)."""
    if not needed:
        return []
    if runtime == Runtime.UML:   # (inside a guest, placement.choose never answers uml)
        report = guest_report()
        if report is None:
            return [f"{f.value}: the guest kernel could not be probed" for f in sorted(needed)]
        have = report["features"]
        return [f"{f.value} ({have.get(f.value, {}).get('detail', 'not probed')})" for f in sorted(needed)
                if not have.get(f.value, {}).get("works")]
    if os.geteuid() != 0:
        raise EnvironmentProblem("checking the kernel's features needs root (they are tried in a throwaway namespace)")
    found = probe.features([f.value for f in needed])
    return [f"{f.value} ({found[f.value].detail})" for f in sorted(needed) if not found[f.value].works]


def doctor(console: Console) -> int:
    # "Where am I" is this command's question: on the host it also boots a guest to probe its kernel.
    in_guest = probe.in_uml_guest()
    t = Table(title="wearlab doctor", show_header=True)
    t.add_column("check")
    t.add_column("result")
    t.add_column("why wearlab needs it")
    t.add_row("kernel", probe.kernel_release() + (" (UML guest)" if in_guest else ""), "")
    t.add_row("root", "yes" if os.geteuid() == 0 else "[red]no: namespaces and tc need root[/red]", "")
    _feature_rows(t, probe.report()["features"], "")
    for tool, path in probe.tool_paths().items():
        t.add_row(f"tool {tool}", path or "[red]missing[/red]", "")
    try:
        import mininet.net

        t.add_row("mininet", f"{mininet.net.VERSION} ({Path(mininet.__file__).parent})", "")
    except ImportError:
        t.add_row("mininet", "[red]not importable by this python[/red]", "")
    guest = None
    try:
        uml.check_ready()
        t.add_row("uml runtime", f"ready: kernel {uml.kernel_version()} ({uml.uml_kernel()}), "
                                 f"root fs {uml.rootfs_path()}", "")
        guest = guest_report(cached=False) if not in_guest else None
    except EnvironmentProblem as e:
        t.add_row("uml runtime", f"[red]not ready[/red]: {e}", "")
    if guest is not None:
        t.add_row("guest kernel", f"{guest['kernel']} (booted to probe), {guest['tc']}", "")
        _feature_rows(t, guest["features"], "guest ")
    try:
        rt, why = placement.choose(Runtime.AUTO)
        t.add_row("auto picks", f"[bold]{rt.value}[/bold]: {why}", "")
    except EnvironmentProblem as e:
        t.add_row("auto picks", f"[red]nothing[/red]: {e}", "")
    console.print(t)
    return 0


def _feature_rows(t: Table, features: dict, prefix: str) -> None:
    for name, f in features.items():
        t.add_row(prefix + name, "[green]works[/green]" if f["works"] else f"[red]missing[/red]: {f['detail']}",
                  f["why"])
