"""Which value of a matrix key a value written elsewhere in the file means: a claim's `cells:`
(model.claims) and `matrix: exclude:` (model.exclude) name cells by matrix keys and values, in any
spelling the key takes (`5000kbit` is `5Mbit`, `500KB` is 500000), and get the matrix's own value.

The spellings are the keys' own normalisers: a workload parameter's, a link setting's as a
topology writes it (model.link_settings.canonical), a node option's as any node kind declares it
(the kind of a node may itself be swept). A key without one (a node's `kind`, `timeline`) compares
as text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from wearlab.model.link_settings import canonical, is_link_key


def same(a: Any, b: Any) -> bool:
    """One value, whether held as written or as text (a cell's 1.3 and a claim's "1.3")."""
    return a == b or str(a) == str(b)


def normalizers(key: str, wclass: Any, catalog: Any) -> list[Callable[[Any], Any]]:
    """The ways a value of `key` may be spelt, each raising ValueError (or TypeError) on a value
    that is none of its."""
    if key in wclass.params:
        return [wclass.params[key].normalize]
    if is_link_key(key):
        field = key.rsplit(".", 1)[1]
        return [lambda raw: canonical(field, raw)]
    if "." in key:
        opt = key.split(".", 1)[1]
        return [k.options[opt].normalize for k in catalog.node_kinds.values() if opt in k.options]
    return []


def value_among(key: str, raw: Any, among: Sequence[Any], wclass: Any, catalog: Any) -> Any | None:
    """The value of `among` that `raw` means ('500KB' -> 500000), else None."""
    for v in among:
        if same(v, raw):
            return v
    for f in normalizers(key, wclass, catalog):
        try:
            value = f(raw)
        except (ValueError, TypeError):
            continue
        for v in among:
            if same(v, value):
                return v
    # A value as tables show it (page: exp3-bing for the file the plan resolved it to).
    param = wclass.params[key] if key in wclass.params else None
    if param is not None and param.shown is not str:
        hits = [v for v in among if param.shown(v) == str(raw)]
        if len(hits) == 1:
            return hits[0]
    return None


def loose(key: str, raw: Any, wclass: Any, catalog: Any) -> Any:
    """`raw` normalised without a list to match (a key `--set` overrode), else as written."""
    for f in normalizers(key, wclass, catalog):
        try:
            return f(raw)
        except (ValueError, TypeError):
            continue
    return raw
