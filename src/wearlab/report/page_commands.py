"""The bodies of `wearlab page import FILE.har [-o OUT.yaml] [--name NAME]` and
`wearlab page check FILE...` (issue 23); the CLI only parses their arguments and calls them.

Both raise InputError for bad input (exit 2 through `wearlab.cli.main`): a HAR that is not JSON
(file:line), not a HAR, or whose page does not check; a page file with problems (file:line:field).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.markup import escape

from wearlab.errors import InputError, Problem
from wearlab.model.har import HarError, HarImport, har_page_document
from wearlab.model.page import (
    PageFile,
    critical_path,
    dump_page_yaml,
    http1_connections,
    load_page_file,
    page_file_from_mapping,
)
from wearlab.model.quantities import UNITS


def read_har(path: str | Path) -> dict:
    """The HAR's JSON; unreadable or not JSON: an InputError at the file (and line)."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError([Problem(file, None, None, "file not found")]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError([Problem(file, None, None, f"cannot read the HAR: {e}")]) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError([Problem(file, e.lineno, None, f"not JSON (a HAR is JSON): {e.msg}")]) from None


def import_har(path: str | Path, *, name: str | None = None) -> tuple[PageFile, str, HarImport]:
    """A HAR file as a checked page file and its YAML text (notes as comments at its top)."""
    har = read_har(path)
    name = name or _name_from(Path(path))
    try:
        made = har_page_document(har, name=name)
    except HarError as e:
        raise InputError([Problem(str(path), None, None, str(e))]) from None
    header = "\n".join([f"Imported by `wearlab page import` from {Path(path).name}: model/har.py says how each",
                        "field is read from the HAR (sizes as transferred, dependencies from _initiator).",
                        *(f"note: {n}" for n in made.notes)])
    text = dump_page_yaml(made.document, header)
    # Check what will be written as it will be read back: a problem is the importer's, shown
    # against the YAML it made.
    from wearlab.model.yamlsrc import parse_yaml
    src = parse_yaml(text, f"{path} (imported)")
    pages = page_file_from_mapping(src.data, src.file, src.lines, default_name=name)
    return pages, text, made


def page_import(har: str, out: str | None, console: Console, *, name: str | None = None,
                stdout: TextIO | None = None) -> int:
    """`wearlab page import FILE.har [-o OUT.yaml]`: the YAML to OUT (or stdout), a summary and
    the notes on the console."""
    pages, text, made = import_har(har, name=name)
    if out is None:
        (stdout or sys.stdout).write(text)
    else:
        Path(out).write_text(text, encoding="utf-8")
        console.print(f"wrote {escape(out)}")
        for line in summary(pages):
            console.print(escape(line))
    for n in made.notes:
        console.print(f"[yellow]note:[/yellow] {escape(n)}")
    return 0


def page_check(files: list[str], console: Console) -> int:
    """`wearlab page check FILE...`: every file checked; a summary of each good one; all the
    problems of the bad ones at once (InputError: exit 2)."""
    problems: list[Problem] = []
    for f in files:
        try:
            pages = load_page_file(f)
        except InputError as e:
            problems.extend(e.problems)
            continue
        console.print(f"[green]ok[/green] {escape(f)}")
        for line in summary(pages):
            console.print("  " + escape(line))
    if problems:
        raise InputError(problems)
    return 0


def summary(pages: PageFile) -> list[str]:
    """One line per page: objects, bytes, origins, critical path, HTTP/1.1 connections."""
    size = UNITS["B"].format
    out = []
    for page in pages.sequence():
        chain = critical_path(page)
        conns = http1_connections(page)
        out.append(f"{page.name}: {len(page.objects)} objects, {size(page.total_bytes)} from "
                   f"{len(page.origins_used())} origin(s); critical path {len(chain)} objects, "
                   f"{size(sum(o.size for o in chain))}; HTTP/1.1 about {sum(conns.values())} connections "
                   f"({', '.join(f'{o} {n}' for o, n in conns.items())})")
    if pages.session:
        out.append(f"session: {' -> '.join(pages.session.pages)} (pool {pages.session.pool})")
    return out


def _name_from(path: Path) -> str:
    import re
    stem = re.sub(r"[^A-Za-z0-9._-]", "-", path.stem).strip("-.") or "page"
    return stem[:64] if re.match(r"[A-Za-z0-9]", stem) else f"page-{stem}"[:64]
