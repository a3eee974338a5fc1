"""`wearlab devices`: the devices a node may name - wearlab's own and those a topology, experiment or
devices file defines - with their numbers and where each comes from."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from wearlab.errors import InputError, Problem
from wearlab.model.declarations import Catalog
from wearlab.model.devices import Cost, Device, builtin_devices, load_device_file
from wearlab.model.yamlsrc import did_you_mean, load_yaml

WHERE = "<command line>"


def known_devices(source: Path | None, catalog: Catalog) -> dict[str, Device]:
    """The built-in devices, plus those `source` defines: an experiment (its topology's), a
    topology (its `devices:`) or a devices file (a mapping of name -> device)."""
    out = dict(builtin_devices())
    if source is None:
        return out
    data = load_yaml(source).data
    if isinstance(data, dict) and "workload" in data:
        from wearlab.model.experiment_file import load_experiment
        out.update(load_experiment(source, catalog).topology.devices)
    elif isinstance(data, dict) and "nodes" in data:
        from wearlab.model.topology import load_topology
        out.update(load_topology(source, catalog).devices)
    else:
        out.update(load_device_file(source, out))
    return out


def devices(names: list[str], source: Path | None, catalog: Catalog, console: Console) -> int:
    known = known_devices(source, catalog)
    unknown = [Problem(WHERE, None, "devices", f"unknown device '{n}'{did_you_mean(n, known)} "
                                               f"(devices: {', '.join(known)})") for n in names if n not in known]
    if unknown:
        raise InputError(unknown)
    if not names:
        console.print(overview(known))
        console.print("`wearlab devices NAME` shows a device's every number and its source; a topology names one "
                      "with `device: NAME` on a node and may define its own under `devices:` (same schema as "
                      "src/wearlab/model/devices/builtin.yaml)")
        return 0
    for n in names:
        console.print(detail(known[n]))
    return 0


def overview(known: dict[str, Device]) -> Table:
    t = Table(title="devices (`device:` on a node): times per operation", show_lines=True)
    for col in ("device", "hardware", "RSA-2048 sign/verify", "P-256 derive", "AES-128-GCM", "TLS handshake",
                "CPU factor"):
        t.add_column(col)
    for d in known.values():
        hw = d.hardware
        where = "" if d.defined_in == "built-in" else f"\n({d.defined_in})"
        t.add_row(d.name + where, "; ".join(x for x in (hw.cpu, hw.os) if x) if hw else "-",
                  f"{_ms(d.cost('sign:rsa2048'))} / {_ms(d.cost('verify:rsa2048'))}", _ms(d.cost("derive:p256")),
                  _val(d.cost("cipher:aes-128-gcm")), f"{_ms(d.handshake)} ({d.handshake.basis})",
                  f"{d.cpu_factor.value:.3g}")
    return t


def _ms(c: Cost | None) -> str:
    return f"{c.seconds() * 1e3:.3g} ms" if c is not None else "-"


def detail(d: Device) -> Table:
    t = Table(title=f"{d.name}: {d.description} ({d.defined_in})", show_lines=True)
    for col in ("what", "value", "basis", "source"):
        t.add_column(col)
    if d.hardware:
        t.add_row("hardware", "; ".join(x for x in (d.hardware.cpu, d.hardware.memory, d.hardware.os) if x),
                  d.hardware.basis, d.hardware.source)
    t.add_row("TLS handshake (platform)", d.handshake.shown(), d.handshake.basis, d.handshake.source)
    t.add_row("resumed TLS handshake (platform)", d.resumed.shown(), d.resumed.basis, d.resumed.source)
    t.add_row("CPU factor (other work)", f"{d.cpu_factor.value:.3g}", d.cpu_factor.basis, d.cpu_factor.source)
    t.add_row("cores", f"{d.cores.value:g}", d.cores.basis, d.cores.source)
    for kind in sorted(d.per_byte):
        c = d.per_byte[kind]
        t.add_row(f"data received, {kind} (platform, per byte)", f"{c.seconds(1) * 1e9:,.1f} ns/B "
                  f"({8 / c.seconds(1) / 1e6:.3g} Mbit/s of data, alone)", c.basis, c.source)
    for key in sorted(d.costs):
        c = d.costs[key]
        t.add_row(key, _table(c), c.basis, c.source)
    p = d.power
    if p is not None:
        if p.battery:
            t.add_row("battery", f"{p.battery.mah:g} mAh", p.battery.basis, p.battery.source)
        on = f" (on {'+'.join(m.value for m in p.measured_media)})" if p.measured_media else ""
        for state, f in p.levels.items():
            t.add_row(f"power: {state.value}{on}", f.describe(), f.basis, f.source)
        for medium, radio in p.radios.items():
            a = radio.active
            t.add_row(f"power: {medium.value} radio active", a.describe(), a.basis, a.source)
            if a.volts is not None:
                t.add_row(f"power: {medium.value} radio's voltage", f"{a.volts.value:g} V", a.volts.basis, a.volts.source)
            if radio.on is not None:
                t.add_row(f"power: {medium.value} radio on, idle (base)", radio.on.describe(), radio.on.basis,
                          radio.on.source)
    return t


def _val(c: Cost | None) -> str:
    if c is None:
        return "-"
    if c.per_byte:
        s, t = c.points[-1]
        return f"{s / t / 1e6:.3g} MB/s"
    return c.shown()


def _table(c: Cost) -> str:
    if not c.per_byte:
        return c.shown()
    return "\n".join(f"{s} B: {s / t / 1e3:,.2f} kB/s" for s, t in c.points)
