"""Asking a running experiment to change, from another terminal: `wearlab link show|set|down|up|
reset`, `wearlab radio sleep|wake|show`, `wearlab handover now`. Requests go through the run's
control directory (run.control), which every runtime shares with the host."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from wearlab.errors import InputError, Problem
from wearlab.model.choices import LinkAction
from wearlab.run import control

WHERE = "<command line>"


def link(results: Path, action: str, link_name: str | None, settings: list[str], direction: str | None,
         console: Console) -> int:
    action = LinkAction(action)
    if action not in (LinkAction.SHOW, LinkAction.RESET) and not link_name:
        raise InputError([Problem(WHERE, None, "link", f"`link {action.value}` needs a link, e.g. watch-phone")])
    if action != LinkAction.SET and settings:
        raise InputError([Problem(WHERE, None, settings[0], f"`link {action.value}` takes no settings")])
    req = {"action": action.value, "link": link_name, "direction": direction}
    if action == LinkAction.SET:
        if not settings:
            raise InputError([Problem(WHERE, None, "settings", "give KEY=VALUE pairs, e.g. delay=60ms")])
        req["set"] = control.parse_settings(settings)
    answer = control.request(results, req)
    if not answer.get("ok"):
        raise InputError([Problem(WHERE, None, None, answer.get("error", "refused"))])
    for line in answer.get("applied", []):
        took = f" ({answer['latency_ms']:.1f} ms after the request)" if answer.get("latency_ms") is not None else ""
        console.print(f"applied: {line}{took}")
    t = Table(title=f"links of {answer['run']}")
    for col in ("direction", "rate", "delay", "jitter", "loss", "queue", "down"):
        t.add_column(col)
    for d, s in answer.get("shapes", {}).items():
        t.add_row(d, str(s.get("rate", "-")), str(s.get("delay", "")), str(s.get("jitter", "")), str(s.get("loss", "-")),
                  str(s.get("queue_packets", s.get("queue_bytes", "-"))), "down" if s.get("down") else "")
    console.print(t)
    return 0


def node_action(results: Path, action: str, arg: str, node: str | None, console: Console) -> int:
    answer = control.request(results, {"action": action, "arg": arg, "node": node})
    if not answer.get("ok"):
        raise InputError([Problem(WHERE, None, None, answer.get("error", "refused"))])
    console.print(answer.get("said", "done"))
    return 0
