"""Progress while an experiment runs: a rich bar on a terminal, one line per run otherwise."""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console

from wearlab.model.units import format_size
from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, \
    TimeElapsedColumn, TimeRemainingColumn


def _describe(row: dict[str, Any]) -> str:
    bits = [format_size(int(row["size"])) if k == "size" else str(row[k])
            for k in ("protocol", "size", "path", "tls_version", "cipher", "cert")
            if row.get(k) not in (None, "", "default")]
    res = f"{row['status']}" + (f" {float(row['time_total']):.3f} s" if row.get("time_total") else "")
    if row.get("error"):
        res += f" ({row['error']})"
    return f"rep {row['repetition']} {' '.join(bits)}: {res}"


class Progress:
    def __init__(self, console: Console, total: int, title: str):
        self.console, self.total, self.title = console, total, title
        self.plain = os.environ.get("WEARLAB_PLAIN") == "1" or not console.is_terminal
        self.done = 0
        self._bar = None

    def __enter__(self):
        if not self.plain:
            self._bar = RichProgress(TextColumn("[bold]{task.description}"), BarColumn(),
                                     MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                                     TextColumn("{task.fields[last]}"), console=self.console)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.title, total=self.total, last="")
        return self

    def advance(self, row: dict[str, Any]) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1, last=_describe(row))
            if row["status"] != "ok":
                self._bar.console.print(f"[red]run {row['run']} failed:[/red] {row.get('error')}")
        else:
            self.console.print(f"[{self.done}/{self.total}] {_describe(row)}", highlight=False)

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.__exit__(*exc)
