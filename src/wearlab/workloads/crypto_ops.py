"""The `crypto-ops` workload: the client node times public-key operations (RSA sign and verify,
ECDSA, ECDH) with OpenSSL's own benchmark, `openssl speed -mr -elapsed` (measure.openssl_speed,
what `wearlab crypto-bench` runs), in the node's device time: the process starts with the
devicecpu library and the node's `device:` profile (nodes.devicecpu), on the node's cores, as the
node's other OpenSSL processes do. One run gives one column per operation (seconds per
operation: 1 / openssl's operations per second), so an experiment's `expect:` can hold a paper's
per-operation times (seed 001 §IV.A, seed 002 Table 5.3) and `wearlab check` scores them.

`client` is a parameter, not a fixed field: a node's device is fixed by the topology, so a matrix
over devices is a matrix over nodes (`client: [phone, watch]`, each node with its device). Every
client must have a device. There is no server and no traffic: the nodes' links only carry the
topology. Digests and ciphers (per byte, per block size) stay `wearlab crypto-bench`'s table.
"""

from __future__ import annotations

from typing import Any

from wearlab.errors import Problem
from wearlab.measure.openssl_speed import BY_NAME, GROUPS, Group, run_groups, target
from wearlab.model.columns import Metric, Series
from wearlab.model.declarations import WorkloadFields
from wearlab.model.params import Param, ParamSet
from wearlab.model.yamlsrc import did_you_mean, dotted
from wearlab.nodes.devicecpu import DeviceProcess, node_cpu
from wearlab.workloads.workload import Outcome, Workload

OPS_GROUPS = tuple(g for g in GROUPS if g.per_operation)
OPS_NAMES = tuple(g.name for g in OPS_GROUPS)


def column(key: str) -> str:
    """A profile key's column: sign:rsa2048 -> sign_rsa2048_s."""
    verb, _, alg = key.partition(":")
    return f"{verb}_{alg}_s"


def _client(value: Any) -> str:
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise ValueError(f"client is the name of a node with a device, got {value!r}")


def _ops(value: Any) -> str:
    """`rsa2048`, `rsa1024,rsa2048` or a list of group names -> the canonical comma-joined text."""
    names = value if isinstance(value, list) else str(value).split(",") if isinstance(value, str) else None
    if not names:
        raise ValueError(f"ops is a list of operation groups ({', '.join(OPS_NAMES)}), got {value!r}")
    out = []
    for n in names:
        n = str(n).strip().lower()
        if n not in OPS_NAMES:
            raise ValueError(f"unknown operation group '{n}'{did_you_mean(n, OPS_NAMES)} "
                             f"(groups: {', '.join(OPS_NAMES)})")
        if n not in out:
            out.append(n)
    return ",".join(out)


def _seconds(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 30:
        return value
    raise ValueError(f"seconds is a whole number of seconds per operation from 1 to 30, got {value!r}")


def groups_of(cell: dict[str, Any]) -> list[Group]:
    return [BY_NAME[n] for n in cell["ops"].split(",")]


class CryptoOpsFields(WorkloadFields):
    pass


class CryptoOps(Workload):
    name = "crypto-ops"
    doc = "the client node times public-key operations (openssl speed) in its device's time, one column per operation"
    Fields = CryptoOpsFields
    params = ParamSet((
        Param("client", _client, None, "the node whose device computes (it must have a device:); a matrix over "
              "devices is a matrix over nodes", required=True),
        Param("ops", _ops, "rsa2048", f"operation groups timed per run, comma-separated ({', '.join(OPS_NAMES)})"),
        Param("seconds", _seconds, 1, "openssl speed -seconds: how long each operation is repeated per run"),
    ))
    metrics = tuple(Metric(column(k), "s", label=k, summarised=g.name in ("rsa2048",),
                           doc=f"one {k.replace(':', ' ')} on the client's device: 1 / the operations per second "
                               f"`openssl speed -elapsed {' '.join(g.argv)}` counted (wall clock, devicecpu library); "
                               "empty unless ops names its group")
                    for g in OPS_GROUPS for k in g.keys)
    series = (Series("crypto_ops", ("node", "device", "op", "per_s", "ours_s", "profile_s"),
                     doc="each operation of the run: openssl's operations per second, ours (s per operation) and "
                         "the device profile's own time for it"),)
    headline = ("sign_rsa2048_s", "verify_rsa2048_s")

    # -- model time ---------------------------------------------------------------------------
    @classmethod
    def check(cls, fields, fixed, matrix, where, topo, src) -> list[Problem]:
        problems = []
        nodes = ", ".join(topo.nodes)
        for value in [*matrix.get("client", []), *([fixed["client"]] if "client" in fixed else [])]:
            at = where.get(("client", value), ("workload", "client"))
            node = topo.nodes.get(value)
            if node is None:
                problems.append(Problem(src.file, src.line(at), dotted(at), f"unknown node '{value}'"
                                        f"{did_you_mean(value, topo.nodes)} (nodes: {nodes})"))
            elif getattr(node, "device", None) is None:
                problems.append(Problem(src.file, src.line(at), dotted(at), f"node '{value}' has no device: crypto-ops "
                                        "times a device's operations; give the node a device: (`wearlab devices`)"))
        return problems

    @classmethod
    def run_length(cls, cell) -> float | None:
        return float(cell["seconds"] * sum(len(g.keys) for g in groups_of(dict(cell))))

    # -- run time -------------------------------------------------------------------------------
    def start(self, cells: list[dict[str, Any]]) -> dict[str, Any]:
        self.procs: dict[str, DeviceProcess] = {}
        for node in dict.fromkeys(c["client"] for c in cells):
            device = self.ctx.plan.device_of(node)
            if device is None:
                raise RuntimeError(f"node {node} has no device")
            self.procs[node] = DeviceProcess(device, self.ctx.workdir("devicecpu"), f"{node}-openssl-speed",
                                             node=node_cpu(self.ctx.net.workdir, node, device), node_name=node)
        return {"client": {"kind": "openssl speed -mr -elapsed, one process per operation group and run",
                           "devices": {n: p.facts() for n, p in self.procs.items()}}}

    def _run(self, node: str, argv: list[str]):
        import subprocess
        p = self.ctx.net.popen(node, argv, env=self.procs[node].env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        try:
            out, err = p.communicate(timeout=self.ctx.timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            raise RuntimeError(f"{node}: `{' '.join(argv)}` took longer than {self.ctx.timeout_s:g} s") from None
        return subprocess.CompletedProcess(argv, p.returncode, out, err)

    def run(self, cell: dict[str, Any], repetition: int) -> Outcome:
        node = cell["client"]
        proc = self.procs[node]
        results = run_groups(lambda argv: self._run(node, argv), groups_of(cell), cell["seconds"])
        row: dict[str, Any] = {}
        rows = []
        for r in results:
            if r.per_s <= 0:
                raise RuntimeError(f"openssl speed counted no {r.key} in {cell['seconds']} s")
            row[column(r.key)] = 1 / r.per_s
            profile = target(proc.device, r)
            rows.append({"node": node, "device": proc.device.name, "op": r.key, "per_s": r.per_s,
                         "ours_s": 1 / r.per_s, "profile_s": 1 / profile if profile else None})
        return Outcome(row=row, series={"crypto_ops": rows})
