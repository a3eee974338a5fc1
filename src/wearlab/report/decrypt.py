"""`wearlab decrypt RESULTS`: the application bytes of a results directory's tcpcrypt connections,
from its packet captures and the key logs its daemons kept (issue 22 item 5; the role
SSLKEYLOGFILE plays for TLS in Wireshark).

A node keeps a key log only when the topology says `tcpcrypt_key_log: true` (never by default):
its tcpcryptd appends every session's secrets to <results>/keys/<node>.keylog (nodes.tcpcrypt).
This module does no cryptography of its own: for each capture (the workload's, captures/*.pcap,
or a `wearlab capture -w FILE` of the run given with --pcap) it runs the built daemon's
`tcpcryptd decrypt` (tcpcrypt/README.md, "Key log"), which opens the frames with the session
code itself, with the key logs of all nodes joined into one (both ends of a session log the same
secrets); a merged directory's shards' (`wearlab merge` keeps them under shards/<I-of-N>/) too.
`--run N` keeps the connections whose session IDs the run's series/tcpcrypt.csv rows
name (the daemons' own close records), so a run is found in a capture that spans the experiment.

Output per connection: tcpcryptd's line (mode, TEP, AEAD, session ID, per direction bytes,
frames, FINp) and the bytes escaped; with --out DIR raw, DIR/<capture>/conn<N>-a2b.bin and
-b2a.bin (A: the active opener). Exit 0: every shown tcpcrypt connection decrypted; 1: one did
not (no key, a wrong key); 2: no key log, no capture, a run without tcpcrypt, an unreadable
capture - one line naming the file.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from wearlab.errors import InputError, Problem
from wearlab.nodes.tcpcrypt import KEY_LOG_DIR, binary

WHERE = "<command line>"
CONNECTION = re.compile(r"^connection (\d+): ")
SESSION = re.compile(r"\bsession ([0-9a-f]+)")
NOT_DECRYPTED = "tcpcrypt, not decrypted"


@dataclass
class Connection:
    """One connection as `tcpcryptd decrypt` reports it: its header line and the lines under it."""

    number: int
    lines: list[str] = field(default_factory=list)

    @property
    def session(self) -> str | None:
        m = SESSION.search(self.lines[0])
        return m.group(1) if m else None

    @property
    def failed(self) -> bool:
        return NOT_DECRYPTED in self.lines[0]


def parse(stdout: str) -> list[Connection]:
    """tcpcryptd decrypt's report, one Connection per `connection N:` line (the lines under a
    connection are indented; its escaped bytes are one line each, newlines escaped)."""
    out: list[Connection] = []
    for line in stdout.splitlines():
        m = CONNECTION.match(line)
        if m:
            out.append(Connection(int(m.group(1)), [line]))
        elif out and line.startswith("  "):
            out[-1].lines.append(line)
    return out


def tcpcrypt_nodes(results: Path) -> list[str]:
    """Nodes that ran tcpcryptd in these results (metadata.json's node facts)."""
    try:
        meta = json.loads((results / "metadata.json").read_text())
    except (OSError, ValueError):
        return []
    nodes = meta.get("nodes") or {}
    return sorted(n for n, facts in nodes.items() if any(isinstance(f, dict) and f.get("tcpcrypt") for f in facts))


def key_logs(results: Path) -> list[Path]:
    """The results' key logs; an InputError naming the directory when there are none."""
    logs = sorted((results / KEY_LOG_DIR).glob("*.keylog")) + sorted(results.glob(f"shards/*/{KEY_LOG_DIR}/*.keylog"))
    if logs and not any(p.stat().st_size for p in logs):
        raise InputError([Problem(str(results / KEY_LOG_DIR), None, None, "the key logs are empty: no tcpcrypt session "
                                                                          "was established while they were kept")])
    if logs:
        return logs
    ran = tcpcrypt_nodes(results)
    if ran:
        hint = (f"run with `tcpcrypt_key_log: true` on node {' or '.join(ran)} (the topology's node, "
                "docs/capture.md) to keep one")
    else:
        hint = "no node ran tcpcryptd in these results: there is no tcpcrypt connection to decrypt"
    raise InputError([Problem(str(results / KEY_LOG_DIR), None, None, f"no tcpcrypt key log in these results; {hint}")])


def run_sessions(results: Path, run: int) -> set[str]:
    """Session IDs of run `run`'s tcpcrypt connections (series/tcpcrypt.csv, both daemons' rows)."""
    series = results / "series" / "tcpcrypt.csv"
    if not series.is_file():
        raise InputError([Problem(str(series), None, "--run", "no tcpcrypt series in these results (no run used tcpcrypt)")])
    with series.open() as f:
        rows = list(csv.DictReader(f))
    mine = [r for r in rows if r.get("run") == str(run)]
    ids = {r["session_id"].lower() for r in mine if r.get("session_id")}
    if not ids:
        runs = sorted({int(r["run"]) for r in rows if (r.get("run") or "").isdigit() and r.get("session_id")})
        what = "no row" if not mine else "no encrypted connection (plain TCP or reset: nothing to decrypt)"
        raise InputError([Problem(str(series), None, "--run",
                                  f"run {run} has {what}; runs with tcpcrypt sessions: "
                                  f"{', '.join(map(str, runs)) or 'none'}")])
    return ids


def captures(results: Path, given: list[Path]) -> list[Path]:
    if given:
        missing = [Problem(str(p), None, "--pcap", "no such file") for p in given if not p.is_file()]
        if missing:
            raise InputError(missing)
        return given
    found = sorted((results / "captures").glob("*.pcap")) + sorted(results.glob("shards/*/captures/*.pcap"))
    if not found:
        raise InputError([Problem(str(results / "captures"), None, None,
                                  "no packet capture in these results (the workload takes none): capture the run "
                                  "with `wearlab capture -w FILE` and give it with --pcap FILE")])
    return found


def decrypt(results: Path, *, run: int | None = None, pcaps: list[Path] | None = None, out: Path | None = None,
            port: int | None = None, write=print) -> int:
    """Decrypt a results directory's captures (see the module's doc). Returns the exit status."""
    logs = key_logs(results)
    wanted = run_sessions(results, run) if run is not None else None
    files = captures(results, list(pcaps or []))
    daemon = binary()
    status = 0
    names: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="wearlab-decrypt-") as tmp:
        joined = Path(tmp) / "keys.log"
        fd = os.open(joined, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)   # secrets: owner only
        with os.fdopen(fd, "w") as f:
            for log in logs:
                text = log.read_text()
                f.write(text if not text or text.endswith("\n") else text + "\n")
        write(f"key logs: {', '.join(str(p) for p in logs)}" + (f"; run {run}" if run is not None else ""))
        for i, pcap in enumerate(files):
            raw = Path(tmp) / f"out{i}"
            argv = [str(daemon), "decrypt", "--key-log", str(joined), "--pcap", str(pcap), "--out", str(raw)]
            if port is not None:
                argv += ["--port", str(port)]
            res = subprocess.run(argv, capture_output=True, text=True, check=False)
            if res.returncode not in (0, 1):
                why = (res.stderr.strip().splitlines() or [f"exit status {res.returncode}"])[-1]
                raise InputError([Problem(str(pcap), None, None, f"cannot decrypt: {why}")])
            conns = [c for c in parse(res.stdout) if wanted is None or c.session in wanted]
            # --out's directory per capture: its name, numbered when two captures share one (shards)
            name = pcap.stem if pcap.stem not in names else f"{pcap.stem}-{i + 1}"
            names.add(name)
            write(f"{pcap}: {len(conns)} connection{'s' if len(conns) != 1 else ''}")
            for c in conns:
                status = max(status, 1 if c.failed else 0)
                for line in c.lines:
                    write(line)
                for direction in ("a2b", "b2a"):
                    f = raw / f"conn{c.number}-{direction}.bin"
                    if not f.is_file():
                        continue
                    if out is None:
                        write(f"  {direction}: {escape(f.read_bytes())}")
                    else:
                        dest = out / name / f.name
                        dest.parent.mkdir(parents=True, exist_ok=True)
                        shutil.move(f, dest)
                        write(f"  {direction}: {dest}")
    return status


def escape(data: bytes) -> str:
    """Bytes as one line of text, printable ASCII as it is, the rest escaped (as Rust's
    escape_ascii and tcpcryptd decrypt print them)."""
    out = []
    for b in data:
        if b == 0x5C:
            out.append("\\\\")
        elif b == 0x0A:
            out.append("\\n")
        elif b == 0x0D:
            out.append("\\r")
        elif b == 0x09:
            out.append("\\t")
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append(f"\\x{b:02x}")
    return "".join(out)
