"""`matrix: exclude:` - combinations of the matrix that are not run, as GitHub Actions'
`strategy.matrix.exclude` drops them: an entry names matrix keys and one value each, and takes
out every combination that has all of them (an entry naming some of the keys takes out every
combination containing those values).

    matrix:
      watch.interface_policy: [bt, wifi, adaptive]
      link.watch-ap.profile: [wifi-2g4-good, wifi-2g4-fair]
      exclude:
        - {watch.interface_policy: bt, link.watch-ap.profile: wifi-2g4-fair}   # BT: the WiFi is off

`exclude` is a reserved key of `matrix:` (as `timeline` is): no workload parameter has that name,
and a node setting or a link's holds a '.'. Values are compared as a claim's `cells:` compares
them (model.matrix_values: any spelling of the key's value). A key a `--set` fixed is compared
with its fixed value: an entry that then names another value excludes nothing (GitHub's rule for
an entry that matches no combination), one that names the same value excludes by its other keys.

What an exclusion never changes: the remaining cells' values, so their runs' identities and seeds
(plan.seeds: a hash of the cell's values, not of its place in the matrix) are those of the same
file without `exclude:`. The combinations are taken in the matrix's order and the remaining cells
numbered in it (Experiment.cells); the plan lists what was excluded (plan.json `excluded`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wearlab.errors import Problem
from wearlab.model import matrix_values
from wearlab.model.link_settings import is_link_key, parse_key
from wearlab.model.yamlsrc import YamlPath, YamlSource, did_you_mean, dotted

EXCLUDE_KEY = "exclude"
EXAMPLE = "{watch.interface_policy: bt, link.watch-ap.profile: wifi-2g4-fair}"


@dataclass(frozen=True)
class Exclusion:
    """One entry of `exclude:`, its values the matrix's own (normalised) values. `at`: its index
    as written (entries a `--set` made match nothing are dropped, so the rest keep theirs)."""

    at: int
    values: Mapping[str, Any]

    def matches(self, combination: Mapping[str, Any]) -> bool:
        return all(k in combination and matrix_values.same(combination[k], v) for k, v in self.values.items())


def excluded_by(combination: Mapping[str, Any], exclusions: Sequence[Exclusion]) -> Exclusion | None:
    """The first entry that takes `combination` (the matrix keys' values of one cell) out."""
    return next((e for e in exclusions if e.matches(combination)), None)


def load_exclusions(src: YamlSource, raw: Any, matrix: Mapping[str, list[Any]], fixed_value: Callable[[str], Any],
                    overridden: set[str], wclass: Any, catalog: Any, topology: Any
                    ) -> tuple[tuple[Exclusion, ...], list[Problem]]:
    """`exclude:` as written (`raw`) checked against the matrix: every key a matrix key, every
    value one of its values, each entry a mapping naming at least one; and not every combination
    excluded. `fixed_value(key)`: the value a key `--set` fixed has in every cell."""
    at: YamlPath = ("matrix", EXCLUDE_KEY)
    problems: list[Problem] = []

    def problem(path: YamlPath, message: str) -> None:
        problems.append(Problem(src.file, src.line(path), dotted(path), message))

    if raw is None:
        return (), []
    if not isinstance(raw, list):
        problem(at, f"exclude is a list of combinations to leave out, each a mapping of matrix keys to one "
                    f"value, e.g. - {EXAMPLE}")
        return (), problems
    out: list[Exclusion] = []
    keys = list(matrix)
    for i, entry in enumerate(raw):
        here = at + (i,)
        if not isinstance(entry, dict):
            problem(here, f"an exclude entry is a mapping of matrix keys to one value each, e.g. {EXAMPLE}; "
                          f"got {type(entry).__name__} {entry!r}")
            continue
        if not entry:
            problem(here, "an empty exclude entry would leave out every cell; name the matrix keys and values "
                          "of the cells to leave out")
            continue
        values: dict[str, Any] = {}
        matches_nothing = False
        for key, value in entry.items():
            path = here + (key,)
            mine = _matrix_key(key, keys, topology)
            if key in overridden or mine in overridden:
                # `--set` fixed it: compared with that value (GitHub: an entry that matches no
                # combination is no error).
                name = mine or key
                if matrix_values.same(matrix_values.loose(name, value, wclass, catalog), fixed_value(name)):
                    continue
                matches_nothing = True
                continue
            if mine is None:
                fixed = fixed_value(key) if isinstance(key, str) else None
                problem(path, f"'{key}' is not varied in matrix:"
                              + (f" it is {fixed!r} in every cell" if fixed is not None else
                                 did_you_mean(str(key), keys))
                              + f" (matrix keys: {', '.join(keys) or 'none'}); exclude names matrix keys")
                continue
            if isinstance(value, (list, dict)):
                problem(path, f"one value per key, got {value!r}; write one exclude entry per combination")
                continue
            v = matrix_values.value_among(mine, value, matrix[mine], wclass, catalog)
            if v is None:
                problem(path, f"{value!r} is not one of the values of {mine}: {', '.join(map(str, matrix[mine]))}")
                continue
            values[mine] = v
        if not matches_nothing:
            out.append(Exclusion(i, values))
    if problems:
        return (), problems
    if any(not e.values for e in out):
        # Every key it names was fixed by --set to the value it names: it takes out every cell.
        e = next(e for e in out if not e.values)
        problem(at + (e.at,), "with the --set values given, this entry names every cell: nothing would be left to run")
    elif out and all(excluded_by(c, out) for c in combinations(matrix)):
        problem(at, f"exclude leaves out every one of the matrix's {sum(1 for _ in combinations(matrix))} "
                    "combinations: nothing would be left to run")
    return tuple(out), problems


def combinations(matrix: Mapping[str, list[Any]]):
    """Every combination of the matrix keys' values, the first key varying slowest."""
    keys = list(matrix)
    return (dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(matrix[k] for k in keys)))


def _matrix_key(key: Any, keys: list[str], topology: Any) -> str | None:
    """The matrix key `key` names: itself, or a link setting under its other spelling (`ap-watch`
    for `watch-ap`: one setting, as the matrix itself holds it)."""
    if key in keys:
        return key
    if isinstance(key, str) and is_link_key(key) and topology is not None:
        try:
            wanted = parse_key(key, topology)
        except ValueError:
            return None
        for k in keys:
            if is_link_key(k) and parse_key(k, topology) == wanted:
                return k
    return None
