"""Build small live networks for physics tests."""

from __future__ import annotations

import contextlib
import secrets
import statistics
import tempfile
from pathlib import Path

from wearlab.catalog import CATALOG
from wearlab.model.topology import load_topology
from wearlab.plan.network import plan_network
from wearlab.realize import netns


@contextlib.contextmanager
def live_network(tmp_path: Path | None, topology_yaml: str, *, shaper: str = "netem", seed: int | None = None):
    """A network built from topology YAML text; torn down on exit. The file goes to tmp_path, or
    a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="wearlab-pair-") as d:
        f = Path(tmp_path or d) / "topology.yaml"
        f.write_text(topology_yaml)
        net = netns.build(plan_network(load_topology(f, CATALOG), shaper), run_id=f"pair-{secrets.token_hex(3)}",
                            seed=seed)
        try:
            yield net
        finally:
            net.teardown()


@contextlib.contextmanager
def two_nodes(tmp_path: Path | None, link: str, *, shaper: str = "netem", seed: int | None = None):
    """client (wearable) -- server, one link given as a YAML flow mapping body (also used by
    bench/bench_link.py)."""
    with live_network(tmp_path, "nodes:\n  client: {role: wearable}\n  server: {role: server}\n"
                      f"links:\n  - {{between: [client, server], {link}}}\n", shaper=shaper, seed=seed) as net:
        yield net


def ping_rtts(net, src: str, dst_ip: str, count: int, interval: float = 0.05) -> list[float]:
    out = net.run(src, ["ping", "-n", "-c", str(count), "-i", str(interval), dst_ip], timeout=count * interval + 30).stdout
    return [float(l.split("time=")[1].split()[0]) for l in out.splitlines() if "time=" in l]


def median(xs):
    return statistics.median(xs)
