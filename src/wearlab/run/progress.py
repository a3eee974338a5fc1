"""Progress while an experiment runs: a rich bar on a terminal, one line per run otherwise.
What a run's line says comes from the workload (its cell description and a headline metric)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.progress import Progress as RichProgress


class Progress:
    def __init__(self, console: Console, total: int, title: str, describe: Callable[[dict[str, Any]], str],
                 headline: tuple[str, ...], done: int = 0):
        """`done`: runs already finished (a resumed results directory's)."""
        self.console, self.total, self.title = console, total, title
        self.describe_cell, self.headline = describe, headline
        self.plain = os.environ.get("WEARLAB_PLAIN") == "1" or not console.is_terminal
        self.done = done
        self._bar = None

    def _describe(self, row: dict[str, Any]) -> str:
        res = row["status"]
        shown = next((m for m in self.headline if row.get(m) not in (None, "")), None)
        if shown:
            res += f" {shown.removesuffix('_s')} {float(row[shown]):.3f} s"
        if row.get("error"):
            res += f" ({row['error']})"
        return f"rep {row['repetition']} {self.describe_cell(row)}: {res}"

    def __enter__(self):
        if not self.plain:
            self._bar = RichProgress(TextColumn("[bold]{task.description}"), BarColumn(),
                                     MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                                     TextColumn("{task.fields[last]}"), console=self.console)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.title, total=self.total, completed=self.done, last="")
        return self

    def advance(self, row: dict[str, Any]) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1, last=self._describe(row))
            if row["status"] != "ok":
                self._bar.console.print(f"[red]run {row['run']} failed:[/red] {row.get('error')}")
        else:
            self.console.print(f"[{self.done}/{self.total}] {self._describe(row)}", highlight=False)

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.__exit__(*exc)
