"""A shard: a deterministic slice of a plan's runs (`wearlab run EXP --shard I/N`).

An experiment's runs are independent - each is (cell, repetition), numbered by its place in the
schedule (run.resume.schedule), its seeds fixed by its identity alone (plan.seeds) - so N machines
(or the N tasks of a Slurm job array) can each run a slice and `wearlab merge` makes one results
directory of the slices. Which runs a shard takes depends only on (I, N) and the number of runs,
never on the machine, the clock or what ran before:

    shard I of N takes runs floor((I-1)·T/N)+1 … floor(I·T/N) of the T runs

A contiguous slice, not every N-th run: consecutive runs share their cell's group (the schedule
runs a group's cells together), so a slice switches node settings and warms up as rarely as an
unsharded run does; the slices differ in length by at most one run. Every shard writes the whole
plan (plan.json) and only its runs' rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FORM = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    index: int   # 1-based, as Slurm's SLURM_ARRAY_TASK_ID counts from --array=1-N
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        m = _FORM.match(text or "")
        if not m:
            raise ValueError(f"'{text}' is not a shard: write I/N, e.g. 2/4 (the second of four)")
        index, count = int(m.group(1)), int(m.group(2))
        if count < 1:
            raise ValueError(f"'{text}': the number of shards must be at least 1")
        if not 1 <= index <= count:
            raise ValueError(f"'{text}': the shard must be between 1 and {count} (shards count from 1)")
        return cls(index, count)

    def runs(self, total: int) -> range:
        """The run numbers (1-based, as runs.csv's `run`) this shard takes of `total` runs."""
        return range((self.index - 1) * total // self.count + 1, self.index * total // self.count + 1)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def to_document(self, total: int) -> dict[str, object]:
        r = self.runs(total)
        return {"index": self.index, "count": self.count, "runs": [r.start, r.stop - 1] if len(r) else [],
                "of_runs": total}
