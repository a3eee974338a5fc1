"""A run's identity fixes everything random in it.

A run is (experiment, cell, repetition) under the experiment's `seed:`. Its seed is a hash of that
identity alone - never of the runs before it, the order they ran in, the process or the clock - so
a suite run in one go, interrupted and resumed, or one day sharded over machines draws the same
losses and jitter in every run:

    run seed = sha256("wearlab-run:" + canonical JSON of {experiment, cell's values, repetition, seed})[:8]

and every seed the run uses is derived from it by purpose (`RunSeeds.derive`):

- netem on every direction of every link: the runner re-seeds each qdisc in place at the run's
  start (`tc qdisc change ... seed N`, realize.linkctl.LinkControl.reseed), after the links have
  gone quiet, so no packet of the run before draws from this run's sequence;
- the n-th change of a direction during the run (a timeline's, a handover's): `seed N` of its
  own, counted from the run's start (netem re-seeds itself on every change);
- a node kind's per-run draws (a BT radio's recovery times, a handover's shadowing): the kind's
  `run_seed`, derived with the node's name;
- a workload's own randomness: `WorkloadContext.seeds`.

The files a server serves are fixed by the experiment's seed and the file's size alone
(`file_seed`): every repetition of a cell fetches the same bytes, and adding a size to the
matrix changes no other file.

The build-time seeds (`netem_seed` in plan.shaping: the qdiscs as built, before the first run's
re-seed) only draw for the warm-up, which is not recorded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def _u64(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _plain(v: Any) -> Any:
    if isinstance(v, bool) or v is None or isinstance(v, (str, int)):
        return v
    if isinstance(v, float):
        return int(v) if v.is_integer() else v
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    return str(v)


def identity(experiment: str, values: Mapping[str, Any], repetition: int, seed: int) -> str:
    """The run's identity as canonical text (sorted keys: the order a cell's values were written
    in changes nothing; 100000 and 100000.0 are one value)."""
    doc = {"experiment": experiment, "cell": {str(k): _plain(v) for k, v in values.items()},
           "repetition": int(repetition), "seed": int(seed)}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class RunSeeds:
    """The seeds of one run, all derived from its identity."""

    identity: str
    run: int

    @classmethod
    def of(cls, experiment: str, values: Mapping[str, Any], repetition: int, seed: int) -> RunSeeds:
        text = identity(experiment, values, repetition, seed)
        return cls(text, _u64(f"wearlab-run:{text}"))

    def derive(self, purpose: str, *tags: Any) -> int:
        """A u64 for one purpose of this run (`netem`, `node`, `workload`, ...)."""
        return _u64(":".join(["wearlab-derive", str(self.run), purpose, *map(str, tags)]))

    def netem(self, src: str, dst: str, change: int = 0) -> int:
        """netem's seed for src -> dst at the run's start (change 0) and at its n-th change."""
        return self.derive("netem", f"{src}->{dst}", change)

    def node(self, node: str) -> int:
        """A node kind's per-run seed."""
        return self.derive("node", node)

    def workload(self) -> int:
        return self.derive("workload")


def file_seed(experiment_seed: int, size: int) -> int:
    """The seed of a served file's contents: the experiment's seed and the file's size alone."""
    return _u64(f"wearlab-file:{int(experiment_seed)}:{int(size)}")
