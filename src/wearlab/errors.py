"""Errors that reach the user as one clear line each, never as a traceback.

`InputError` is bad input (a YAML file, a CLI value): exit status 2. `EnvironmentProblem` is a
machine that cannot do what was asked (no netem, no root): also exit status 2, with advice.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input, located as precisely as we can."""

    file: str
    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        what = f" {self.field}:" if self.field else ""
        return f"{where}:{what} {self.message}"


@dataclass
class InputError(Exception):
    """One or more problems with user input. Exit status 2."""

    problems: list[Problem] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)


class EnvironmentProblem(Exception):
    """The machine cannot do what was asked (missing qdisc, not root, ...). Exit status 2."""


class Interrupted(KeyboardInterrupt):
    """The user (or the system) asked a run to stop: Ctrl-C, SIGTERM, a closed terminal (SIGHUP),
    SIGQUIT. A KeyboardInterrupt, so every path that handles Ctrl-C handles them all alike: the
    run keeps what it measured, removes what it made, and exits with status 130."""

    def __init__(self, signal_name: str = "SIGINT"):
        super().__init__(signal_name)
        self.signal_name = signal_name
