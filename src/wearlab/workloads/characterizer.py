"""The `characterizer` workload: seed 004's characterizer (model/sensitivity.py holds the policy).
Each run fetches the workload's labelled flows in order, each an object of its own size on its own
TCP connection (seed 004 Fig. 3: one TCP session per stack), and sends each over tcpcrypt or in the
clear as the client's battery at the flow's start decides.

One mechanism, item 2's (issue 22): the flows the battery's band encrypts go to the server's
tcpcrypt port, which the client's tcpcryptd intercepts (`--out-dport`) - with `encrypted_as:
require` its `Tcpcrypt` need carries `require` (`--require-encryption PORT`: a fallback is reset,
never sent in clear), and a node's `tcpcrypt: require` does the same for all; the flows it leaves
in the clear (`off`) go to the server's plain HTTP port, which no daemon intercepts - no daemon
change, no per-connection rule. Each flow is one http-get fetch (the same agent, capture reading,
`encrypted()` rule and energy model), read completely before the next flow starts, so its energy
is charged to the battery before the next decision.

The battery: the client's device profile gives its capacity (`power.battery.mah`, seed 000 Table
I) and its cell's voltage (the device's radios' `volts`, else a Li-ion cell's nominal 3.8 V,
assumed); `battery` is the level at the run's start, and each flow's energy (`energy_j`, the
energy model on its measured phase times) is taken off it before the next flow. A client without
a battery in its profile (or without a device) keeps the starting level.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from wearlab.errors import Problem
from wearlab.measure import energy_model
from wearlab.model import params as P
from wearlab.model import sensitivity as S
from wearlab.model.choices import PowerState
from wearlab.model.columns import Metric, Series
from wearlab.model.declarations import PlanView, WorkloadFields
from wearlab.model.devices import Device
from wearlab.model.needs import Files, Need, Relay, Tcpcrypt
from wearlab.model.params import Param, ParamSet
from wearlab.model.yamlsrc import dotted
from wearlab.workloads.http_get import HttpGet, _service
from wearlab.workloads.paths import PATH, check_nodes
from wearlab.workloads.run_energy import ENERGY_SERIES
from wearlab.workloads.workload import Outcome

# A cell's value is the canonical text ('50:0 20:2 0:4'); the YAML may write the mapping.
DEFAULT_THRESHOLDS = "50:0 20:2 0:4"
NOMINAL_VOLTS = 3.8
NOMINAL_VOLTS_WHY = "no voltage in the device profile: a Li-ion cell's nominal 3.8 V (assumed)"

FLOWS_SERIES = Series(
    "flows", ("flow", "name", "sensitivity", "size", "battery_pct", "min_level", "decision", "port",
              "encrypted", "reason", "session_id", "wire_port", "connect_s", "handshake_s", "data_s", "kx_estimate_s",
              "energy_j", "energy_encrypted_j", "energy_saved_j", "saved_basis"),
    doc="each labelled flow of the run, in order: its sensitivity, the battery level at its start and "
        "the band's lowest encrypted level (min_level; empty: none), the decision (require / "
        "opportunistic / off), the destination port, whether it was encrypted (both daemons' records: "
        "a clean close and one session ID) or why not, the client's port on the wire, the phase times "
        "the energy model used, its energy (the client's device), the energy it would have cost "
        "encrypted and the difference (saved_basis: measured for an encrypted flow, estimate for a flow "
        "sent in the clear, whose key exchange it takes as kx_estimate_s)")


class CharacterizerFields(WorkloadFields):
    client: str
    server: str
    flows: list[S.FlowSpec] = Field(min_length=1)


def _encrypted_as(value: Any) -> str:
    return P.choice("encrypted_as", ("require", "opportunistic"), lower=True)(value)


class Characterizer(HttpGet):
    name = "characterizer"
    rides_transport = False   # it reads every connection's flow off the client's interfaces
    doc = ("seed 004's characterizer: labelled flows (sensitivity 0-4) fetched in order, each over tcpcrypt or "
           "in the clear as the client's battery (drained by the energy model) and the thresholds decide")
    Fields = CharacterizerFields
    params = ParamSet((
        Param("battery", S.battery_percent, 100.0, "the client's battery level at the run's start, in %",
              shown=lambda v: f"{v:g}%"),
        Param("thresholds", S.thresholds, DEFAULT_THRESHOLDS,
              "battery bands {from %: lowest sensitivity encrypted}, e.g. {50: 0, 20: 2, 0: 4}; below the "
              "lowest band nothing is encrypted; a lower battery never encrypts more levels"),
        Param("encrypted_as", _encrypted_as, "require",
              "how the flows the band encrypts go: require (a fallback is reset, tcpcryptd "
              "--require-encryption) or opportunistic (a fallback is relayed plain and reported)"),
        PATH,
    ))
    metrics = (
        Metric("flows_encrypted", "count", better="none", label="encrypted", summarised=True,
               doc="flows of the run encrypted end to end (both daemons: clean close, one session ID)"),
        Metric("flows_clear", "count", better="none", label="in clear", summarised=True,
               doc="flows of the run the characterizer sent in the clear (decision off)"),
        Metric("energy_j", "J", label="energy", summarised=True,
               doc="the client's device: the energy model over all the run's flows (above idle)"),
        Metric("energy_saved_j", "J", label="saved", summarised=True,
               doc="the client's device: energy the flows sent in the clear saved against encrypting them "
                   "(an estimate from the device profile: series flows, saved_basis)"),
        Metric("battery_end_ratio", "ratio", better="none", label="battery end",
               doc="the client's battery level after the run's flows (start less the energy charged)"),
        Metric("bytes_total", "B", label="bytes", doc="frame bytes of all the run's flows, both ways (capture)"),
        Metric("tcpcrypt_cpu_s", "s", label="tcpcrypt CPU",
               doc="CPU time of the client's and the server's tcpcryptd over the run's encrypted flows"),
    )
    series = (FLOWS_SERIES, ENERGY_SERIES, HttpGet.series[1])
    headline = ("energy_j",)
    ratios = ()

    # -- model time --------------------------------------------------------------------------
    @classmethod
    def check(cls, fields, fixed, matrix, where, topo, src) -> list[Problem]:
        problems = check_nodes(fields, topo, fixed, matrix, where, src)
        if problems:
            return problems
        names = [f.name for f in fields.flows]
        for i, n in enumerate(names):
            if names.index(n) != i:
                path = ("workload", "flows", i, "name")
                problems.append(Problem(src.file, src.line(path), dotted(path), f"flow name '{n}' is used twice"))
        return problems

    @classmethod
    def needs(cls, fields, cells: list[Mapping[str, Any]], plan: PlanView) -> list[Need]:
        f = fields
        out: list[Need] = [Files(f.server, tuple(sorted({fl.size for fl in f.flows})))]
        for c in cells:
            kind = plan.kind_of(f.server, c)
            for proto in ("http", "tcpcrypt"):
                need = Relay(c["path"], f.server, plan.address_of(f.server), _service(kind, {"protocol": proto}).port)
                if need not in out:
                    out.append(need)
        ports = {_service(plan.kind_of(f.server, c), {"protocol": "tcpcrypt"}).port for c in cells}
        require = any(c["encrypted_as"] == "require" for c in cells)
        for port in sorted(ports):
            out += [Tcpcrypt(f.client, port, "outbound", require=require), Tcpcrypt(f.server, port, "inbound")]
        return out

    # -- run time ----------------------------------------------------------------------------
    def _fetch_cells(self, cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The http-get cells the flows use: each flow size in the clear and over tcpcrypt."""
        return [{"protocol": proto, "size": s, "path": p}
                for p in sorted({c["path"] for c in cells}) for s in sorted({fl.size for fl in self.fields.flows})
                for proto in ("http", "tcpcrypt")]

    def start(self, cells: list[dict[str, Any]]) -> dict[str, Any]:
        facts = super().start(self._fetch_cells(cells))
        device = self.ctx.plan.device_of(self.fields.client)
        self.capacity_j, battery = _battery(device)
        self.client_power = {p: self.energy.powers(p)[0] for p in {c["path"] for c in cells}}
        facts["characterizer"] = {
            "policy": "seed 004 section 2.4: per flow at its start, levels >= the battery band's lowest are "
                      "encrypted (decision = encrypted_as), the others sent in the clear (decision off, plain port)",
            "battery": battery,
            "cells": [{"battery_start_pct": c["battery"], "thresholds": c["thresholds"],
                       "encrypted_as": c["encrypted_as"], "path": c["path"]} for c in cells],
            "flows": [fl.model_dump() for fl in self.fields.flows],
            "drain": "level = start % - 100 x (energy_j charged by the run's earlier flows) / capacity_j",
            "energy_saved": "a flow in the clear: the energy model on its own measured phase times with the "
                            "data state encrypted and a tcpcrypt key exchange added (one round trip = its TCP "
                            "connect time, plus the device's X25519 keygen + derive): an estimate",
        }
        return facts

    def warm_up(self, cells: list[dict[str, Any]]) -> dict[str, Any]:
        return super().warm_up(self._fetch_cells(cells))

    def _level(self, cell: dict[str, Any], charged_j: float) -> float:
        if self.capacity_j is None:
            return cell["battery"]
        return S.level_after(cell["battery"], charged_j, self.capacity_j)

    def run(self, cell: dict[str, Any], repetition: int) -> Outcome:
        bands = S.parse_thresholds(cell["thresholds"])
        daemon = self.ctx.nodes[self.fields.client].tcpcrypt
        # What the client's daemon enforces for the tcpcrypt port: item 2's require (the need's, or
        # the node's `tcpcrypt: require`), else opportunistic.
        mode = "require" if daemon is not None and daemon.require else "opportunistic"
        power = self.client_power.get(cell["path"])
        charged = 0.0
        flows, energy_rows, crypt_rows = [], [], []
        totals = {"bytes_total": 0, "tcpcrypt_cpu_s": 0.0, "energy_saved_j": 0.0}
        for i, fl in enumerate(self.fields.flows):
            pct = self._level(cell, charged)
            decision = S.decide(fl.sensitivity, pct, bands, mode)
            sub = {"protocol": "http" if decision == "off" else "tcpcrypt", "size": fl.size, "path": cell["path"]}
            out = HttpGet.run(self, sub, repetition)
            done = out.finish()
            row = {**out.row, **done.row}
            energy_rows += done.series.get("energy", [])
            records = out.series.get("tcpcrypt", [])
            crypt_rows += records
            j = row.get("energy_j")
            charged += j or 0.0
            enc = bool(row.get("tcpcrypt_encrypted"))
            phases = _phases(done.series.get("energy", []), self.fields.client)
            if decision == "off" or not enc:
                would, kx, basis = _encrypted_estimate(power, phases, self.ctx.plan.device_of(self.fields.client))
            else:
                would, kx, basis = j, None, "measured"
            saved = (would - j) if would is not None and j is not None else None
            if decision == "off" and saved is not None:
                totals["energy_saved_j"] += saved
            totals["bytes_total"] += row.get("bytes_total") or 0
            totals["tcpcrypt_cpu_s"] += row.get("tcpcrypt_cpu_s") or 0.0
            mine = next((r for r in records if r["node"] == self.fields.client), {})
            flows.append({"flow": i, "name": fl.name, "sensitivity": fl.sensitivity, "size": fl.size,
                          "battery_pct": round(pct, 9), "min_level": bands.min_level(pct), "decision": decision,
                          "port": self.target(sub)[2], "encrypted": int(enc),
                          "reason": None if enc or decision == "off" else (mine.get("reason") or "not encrypted"),
                          "session_id": mine.get("session_id") if enc else None,
                          "wire_port": self.wire_client[1],
                          **{k: phases[k] for k in ("connect_s", "handshake_s", "data_s")}, "kx_estimate_s": kx,
                          "energy_j": j, "energy_encrypted_j": would,
                          "energy_saved_j": saved if decision == "off" else 0.0 if enc else None,
                          "saved_basis": basis if decision == "off" else ("measured" if enc else None)})
        row = {"flows_encrypted": sum(f["encrypted"] for f in flows),
               "flows_clear": sum(f["decision"] == "off" for f in flows),
               "energy_j": charged if power is not None else None,
               "energy_saved_j": totals["energy_saved_j"] if power is not None else None,
               "battery_end_ratio": round(self._level(cell, charged) / 100, 11),
               "bytes_total": totals["bytes_total"], "tcpcrypt_cpu_s": round(totals["tcpcrypt_cpu_s"], 6)}
        series = {"flows": flows, "energy": energy_rows}
        if crypt_rows:
            series["tcpcrypt"] = crypt_rows
        return Outcome(row=row, series=series)


def _battery(device: Device | None) -> tuple[float | None, dict[str, Any]]:
    """(capacity in J, its facts for metadata.json) from the client's device profile; without a
    battery there (or without a device) the level stays at the cell's start: nothing drains it."""
    battery = device.power.battery if device is not None and device.power is not None else None
    if battery is None:
        return None, {"device": device.name if device else None, "capacity_j": None,
                      "why": "the client's device has no power.battery (mah)" if device else
                             "the client names no device: its battery stays at the starting level (no drain)"}
    volts = next((r.active.volts for r in device.power.radios.values() if r.active.volts is not None), None)
    v = volts.value if volts is not None else NOMINAL_VOLTS
    capacity = S.capacity_joules(battery.mah, v)
    return capacity, {"device": device.name, "mah": battery.mah, "mah_source": f"{battery.basis}: {battery.source}",
                      "volts": v, "volts_source": (f"{volts.basis}: {volts.source}" if volts is not None
                                                   else NOMINAL_VOLTS_WHY),
                      "capacity_j": capacity, "capacity_rule": "mAh x 3.6 C/mAh x V"}


def _phases(energy_rows: list[dict[str, Any]], client: str) -> dict[str, float | None]:
    """The client's seconds per state as the energy model charged them for one flow (its connect,
    handshake and data states: data runs to the application's last read on a device that pays
    per byte received)."""
    secs = {r["state"]: r["seconds"] for r in energy_rows if r["node"] == client}
    data = secs.get(PowerState.DATA.value, secs.get(PowerState.DATA_ENCRYPTED.value))
    return {"connect_s": secs.get(PowerState.CONNECT.value), "handshake_s": secs.get(PowerState.HANDSHAKE.value),
            "data_s": data}


def _encrypted_estimate(power, phases: dict[str, float | None],
                        device: Device | None) -> tuple[float | None, float | None, str]:
    """The energy a flow sent in the clear would have cost over tcpcrypt, from the device profile:
    its own connect and data times, the data state encrypted, and a key exchange added - one round
    trip (RFC 8548 3.3: Init1, Init2), taken as its TCP connect time, plus the device's X25519
    keygen and derive (tcpcryptd's TEP 0x23). An estimate: the frames' bytes (20 per 16 KiB) and
    AEAD time are left out."""
    if power is None or phases["connect_s"] is None or phases["data_s"] is None:
        return None, None, "no energy model for the client"
    kx = phases["connect_s"]
    parts = ["key exchange = connect time (one round trip)"]
    for op in ("keygen:x25519", "derive:x25519"):
        cost = device.cost(op) if device is not None else None
        if cost is not None:
            kx += cost.seconds()
            parts.append(op)
    steps = [(PowerState.CONNECT, phases["connect_s"]), (PowerState.HANDSHAKE, kx),
             (PowerState.DATA_ENCRYPTED, phases["data_s"]), (PowerState.TAIL, power.tail_s)]
    joules = sum(energy_model.energy(power, steps).values())
    return joules, kx, "estimate: " + " + ".join(parts) + ", data state encrypted, same data time"

