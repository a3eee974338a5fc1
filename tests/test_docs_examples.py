"""Every example in the README and docs/ is a test (issue 19, "Every example is a test").

What a reader copies must work as written:
- each ```yaml block is a topology, an experiment or a `wearlab compare` thresholds file, and is
  validated and planned as one (`wearlab validate`, the kernel's features included where this
  machine can say - root and a runtime with netem ready -, and `wearlab plan`), with the paths it
  names (topology:, trace:) resolved as if the file sat in experiments/; a block that is not whole
  says so with `<!-- fragment -->` on a line before it, and fragments stay few (MAX_FRAGMENTS);
- each ```sh line: a `wearlab` command parses with the real CLI's parser (a synopsis line such as
  `wearlab link show|set|down|up|reset [LINK]`: its subcommand, flags and choices exist), the
  read-only ones run (plan, validate, kinds, profiles, devices; a `run` is planned with the same
  options, so its --set keys are checked), each `make TARGET` names a Makefile target (and a
  `make experiment`/`compare-proxy` line's variables plan), each file path exists;
- inline `wearlab ...`/`make ...` code in the prose: subcommand, flags and targets exist;
- every repository path the prose names in backticks, and every link to a page or heading, exists;
- each matrix key the docs name - a workload parameter or a `node.option`, in a `matrix:`, a
  `--set`, or in backticks in the prose - is swept with two values (SWEEPS) and both cells plan.

Host-side and fast (in-process: no network built, no guest booted; the guest kernel's features
are cached per build).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import glob
import io
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT, yaml_dump, yaml_load
from wearlab import cli
from wearlab.catalog import CATALOG
from wearlab.model.experiment import split_kind
from wearlab.model.experiment_file import load_experiment
from wearlab.model.roles import Role
from wearlab.plan.plan import plan
from wearlab.report.compare import load_thresholds


README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
MAX_FRAGMENTS = 2
README_MAX_LINES = 200
FRAGMENT_MARK = "<!-- fragment -->"
# Paths a command or the prose names that exist only after a build or a run.
GENERATED = ("results/", "tcpcrypt/target/", "build/", ".venv/")
# Outputs a command writes (their value need not exist).
OUTPUT_FLAGS = {"--out", "--markdown", "--junit", "--json"}
# Flags whose value has a slash and is no path.
NOT_PATH_FLAGS = {"--shard"}   # I/N
# Subcommands whose examples run here as written (read-only, fast, no kernel).
RUNS_HERE = {"plan", "validate", "kinds", "profiles", "devices"}


@functools.cache
def kernel_check() -> tuple[str, ...]:
    """`validate` checks the kernel's features where it can do so here (root, and a runtime with
    netem ready: the host's, or the built guest kernel, whose features are cached per build);
    elsewhere `--no-kernel`."""
    from wearlab.errors import EnvironmentProblem
    from wearlab.runtime import placement

    if os.geteuid() != 0:
        return ("--no-kernel",)
    try:
        placement.choose("auto")
    except EnvironmentProblem:
        return ("--no-kernel",)
    return ()


def rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


# --------------------------------------------------------------------------------------------
# Extraction


@dataclass(frozen=True)
class Block:
    page: Path
    line: int          # of the opening fence
    lang: str
    text: str
    fragment: bool

    @property
    def where(self) -> str:
        return f"{rel(self.page)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    out: list[Block] = []
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1)
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        before = [l for l in lines[max(0, start - 3):start] if l.strip()]
        out.append(Block(page, start + 1, lang, "\n".join(lines[start + 1:j]) + "\n",
                         bool(before) and before[-1].strip() == FRAGMENT_MARK))
        i = j + 1
    return out


def prose(page: Path) -> str:
    """The page without its fenced blocks."""
    return re.sub(r"^```.*?^```[^\n]*$", "", page.read_text(), flags=re.S | re.M)


def inline_code(page: Path) -> list[str]:
    return re.findall(r"`([^`\n]+)`", prose(page))


ALL_BLOCKS = [b for p in PAGES for b in blocks(p)]
YAML_BLOCKS = [b for b in ALL_BLOCKS if b.lang == "yaml"]
SH_BLOCKS = [b for b in ALL_BLOCKS if b.lang == "sh"]


def classify(b: Block) -> str:
    if b.fragment:
        return "fragment"
    data = yaml_load(b.text)
    if isinstance(data, dict) and "workload" in data:
        return "experiment"
    if isinstance(data, dict) and "nodes" in data:
        return "topology"
    if isinstance(data, dict) and data and set(data) <= {"alpha", "threshold", "metrics", "only"}:
        return "thresholds"
    return "unknown"


@dataclass(frozen=True)
class Command:
    where: str
    argv: tuple[str, ...]   # program first; env assignments removed
    inline: bool            # from the prose: a reference to a command, not one to copy


def split_commands(text: str) -> list[list[str]]:
    """One shell line -> its commands (split at ; and &&), comments dropped, quotes resolved."""
    lex = shlex.shlex(text, posix=True)
    lex.whitespace_split = True
    lex.commenters = "#"
    tokens = list(lex)
    out, cur = [], []
    for t in tokens:
        if t in (";", "&&"):
            out.append(cur)
            cur = []
        elif t.endswith(";"):
            cur.append(t[:-1])
            out.append(cur)
            cur = []
        else:
            cur.append(t)
    out.append(cur)
    return [c for c in out if c]


def env_assignment(token: str) -> bool:
    return re.match(r"^[A-Z_][A-Z0-9_]*=", token) is not None


def command_of(tokens: list[str]) -> list[str]:
    while tokens and env_assignment(tokens[0]):
        tokens = tokens[1:]
    return tokens


def commands() -> list[Command]:
    out = []
    for b in SH_BLOCKS:
        for n, line in enumerate(b.text.splitlines()):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            for c in split_commands(line):
                c = command_of(c)
                if c:
                    out.append(Command(f"{b.where}+{n + 1}", tuple(c), inline=False))
    for page in PAGES:
        for code in inline_code(page):
            if re.match(r"^(\S+=\S+ )*(\.venv/bin/)?wearlab \S|^(\S+=\S+ )*make \S", code):
                for c in split_commands(code):
                    c = command_of(c)
                    if c and c[0] in ("wearlab", ".venv/bin/wearlab", "make"):
                        out.append(Command(f"{rel(page)}: `{code}`", tuple(c), inline=True))
    return out


COMMANDS = commands()


# --------------------------------------------------------------------------------------------
# Running wearlab in-process


def run_cli(*args: str) -> tuple[int, str]:
    """`wearlab ARGS` in this process: (exit status, stdout + stderr)."""
    had = "WEARLAB_ARGV" in os.environ
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli.main([*args])
            except SystemExit as e:   # argparse
                rc = e.code if isinstance(e.code, int) else 2
    finally:
        if not had:
            os.environ.pop("WEARLAB_ARGV", None)
    return rc, out.getvalue() + err.getvalue()


@pytest.fixture
def workdir(tmp_path) -> Path:
    """A tree where an experiment written to experiments/ finds ../topologies and ../traces as a
    shipped one does (the repository's own, linked)."""
    (tmp_path / "experiments").mkdir()
    (tmp_path / "examples").mkdir()
    for d in ("topologies", "traces"):
        (tmp_path / d).symlink_to(ROOT / d)
    return tmp_path


# --------------------------------------------------------------------------------------------
# YAML examples


def test_there_are_examples():
    kinds = [classify(b) for b in YAML_BLOCKS]
    assert kinds.count("experiment") >= 8 and kinds.count("topology") >= 3, kinds
    assert len(COMMANDS) >= 60


def test_fragments_stay_few():
    fragments = [b.where for b in YAML_BLOCKS if b.fragment]
    print(f"{len(YAML_BLOCKS)} YAML examples, {len(fragments)} fragments: {fragments}")
    assert len(fragments) <= MAX_FRAGMENTS, (
        f"{len(fragments)} YAML fragments ({', '.join(fragments)}): make examples whole (a topology or "
        "an experiment a reader can save and run)")


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=lambda b: b.where)
def test_yaml_example(block: Block, workdir: Path):
    data = yaml_load(block.text)
    kind = classify(block)
    if kind == "fragment":
        return
    assert kind != "unknown", (f"{block.where}: a YAML example that is neither a topology, an experiment nor a "
                               f"thresholds file; make it whole or mark it `{FRAGMENT_MARK}`")
    if kind == "thresholds":
        f = workdir / "examples" / "thresholds.yaml"
        f.write_text(block.text)
        th = load_thresholds(f)
        declared = {m.name for k in [*CATALOG.workloads.values(), *CATALOG.node_kinds.values()] for m in k.metrics}
        unknown = sorted({*th.metrics, *th.only} - declared)
        assert not unknown, f"{block.where}: metrics no kind declares: {unknown}"
        return
    name = data.get("name") or f"example-{block.line}"
    if kind == "topology":
        f = workdir / "examples" / f"{name}.yaml"
        f.write_text(block.text)
        rc, out = run_cli("validate", *kernel_check(), str(f))
        assert rc == 0, f"{block.where}: wearlab validate says\n{out}"
        # Plan it too, under the simplest workload its nodes allow.
        roles = {n: spec["role"] for n, spec in data["nodes"].items()}
        client = next((n for n, r in roles.items() if r == "wearable"), None)
        server = next((n for n, r in roles.items() if r == "server"), None)
        if client and server:
            exp = workdir / "examples" / f"{name}-planned.yaml"
            exp.write_text(yaml_dump({"topology": str(f), "workload": {"kind": "http-get", "client": client,
                                                                           "server": server}}))
            rc, out = run_cli("plan", str(exp))
            assert rc == 0, f"{block.where}: planned with an http-get from {client} to {server}:\n{out}"
        return
    # An experiment: the paths it names exist in the repository, as seen from experiments/.
    named = [data["topology"]] if isinstance(data.get("topology"), str) else []
    for tl in [data.get("timeline"), *(data.get("timelines") or {}).values()]:
        named += [ev["trace"] for ev in (tl if isinstance(tl, list) else []) if isinstance(ev, dict) and "trace" in ev]
    for p in named:
        assert (ROOT / "experiments" / p).resolve().exists(), f"{block.where}: {p} (from experiments/) does not exist"
    f = workdir / "experiments" / f"{name}.yaml"
    f.write_text(block.text)
    rc, out = run_cli("validate", *kernel_check(), str(f))
    assert rc == 0, f"{block.where}: wearlab validate says\n{out}"
    rc, out = run_cli("plan", str(f))
    assert rc == 0, f"{block.where}: wearlab plan says\n{out}"


# --------------------------------------------------------------------------------------------
# Command examples

PLACEHOLDER = re.compile(r"^[A-Z][A-Z_]*(=[A-Z_]+)?$")


def makefile_targets() -> set[str]:
    out = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        m = re.match(r"^([^\s:#=$][^:=$]*?)\s*:(?!=)", line)
        if m:
            out.update(m.group(1).split())
    return out - {".PHONY"}


def subparsers() -> dict[str, argparse.ArgumentParser]:
    p = cli._parser()
    action = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def is_synopsis(args: list[str]) -> bool:
    return any(PLACEHOLDER.match(a) or "[" in a or "]" in a or "..." in a or ("|" in a and "->" not in a)
               for a in args)


def check_synopsis(argv: list[str], where: str) -> None:
    """A synopsis (or an inline mention): the subcommand, its flags and any a|b|c choices exist."""
    subs = subparsers()
    args = [a for a in argv[1:] if a not in ("[", "]", "|")]
    assert args, f"{where}: `wearlab` without a subcommand"
    sub = args[0].strip("[]")
    assert sub in subs, f"{where}: no subcommand `wearlab {sub}` (there are: {', '.join(sorted(subs))})"
    sp = subs[sub]
    flags = {s: a for a in sp._actions for s in a.option_strings}
    positionals = [a for a in sp._actions if not a.option_strings]
    previous = None
    for raw in args[1:]:
        tok = raw.strip("[]")
        if not tok or tok == "...":
            continue
        if tok.startswith("--") and tok != "--":
            name = tok.split("=", 1)[0]
            assert name in flags, f"{where}: `wearlab {sub}` has no {name} (it has: {', '.join(sorted(flags))})"
            previous = flags[name]
            continue
        if "|" in tok and "->" not in tok:
            alternatives = tok.split("|")
            action = previous if previous is not None and previous.choices else \
                next((a for a in positionals if a.choices), None)
            assert action is not None, f"{where}: {tok}: nothing of `wearlab {sub}` takes one of these"
            bad = [a for a in alternatives if a not in action.choices]
            assert not bad, f"{where}: {bad} not among {sorted(action.choices)}"
        previous = None


def paths_in(argv: list[str]) -> list[str]:
    out, skip_next = [], False
    for i, tok in enumerate(argv):
        if skip_next:
            skip_next = False
            continue
        if tok in OUTPUT_FLAGS | NOT_PATH_FLAGS:
            skip_next = True
            continue
        value = tok.split("=", 1)[1] if env_assignment(tok) else tok
        if "/" in value and not value.startswith(("-", "$", "http")) and not re.search(r"[{}<>\[\]|]", value) \
                and " " not in value and not PLACEHOLDER.match(value):
            out.append(value)
    return out


def check_path(p: str, where: str) -> None:
    if p.startswith(GENERATED) or p.startswith("/") or p.startswith("../"):
        return
    if any(c in p for c in "*?"):
        assert glob.glob(str(ROOT / p)), f"{where}: {p} matches nothing"
        return
    assert (ROOT / p).exists(), f"{where}: {p} does not exist"


def planned(argv: list[str], where: str) -> None:
    rc, out = run_cli(*argv)
    assert rc == 0, f"{where}: `wearlab {shlex.join(argv)}` says\n{out}"


def check_make(cmd: Command) -> None:
    targets = makefile_targets()
    argv = list(cmd.argv[1:])
    names = [a for a in argv if a not in ("|", "[", "]") and not env_assignment(a) and not a.startswith("-")]
    assert names, f"{cmd.where}: `make` without a target (say which)"
    for t in names:
        assert t in targets, f"{cmd.where}: no Makefile target `{t}`"
    variables = dict(a.split("=", 1) for a in argv if env_assignment(a))
    for p in paths_in(list(variables.values())):
        check_path(p, cmd.where)
    if cmd.inline:
        return
    extra = shlex.split(variables.get("WEARLAB_ARGS", ""))
    if "experiment" in names:
        planned(["plan", variables.get("EXPERIMENT", "experiments/quickstart.yaml"), *extra], cmd.where)
    if "compare-proxy" in names:
        for side in ("BASE", "CAND"):
            if side in variables:
                planned(["plan", "experiments/proxy-check.yaml", "--set", f"phone.kind={variables[side]}"], cmd.where)


def check_wearlab(cmd: Command) -> None:
    argv = list(cmd.argv)
    if cmd.inline or is_synopsis(argv[1:]):
        check_synopsis(argv, cmd.where)
        for p in paths_in(argv[1:]):
            check_path(p, cmd.where)
        return
    args: list[str] = []
    for a in argv[1:]:
        if any(c in a for c in "*?") and "/" in a:
            found = sorted(glob.glob(str(ROOT / a)))
            assert found, f"{cmd.where}: {a} matches nothing"
            args += found
        else:
            args.append(a)
    for p in paths_in(argv[1:]):
        check_path(p, cmd.where)
    subs = subparsers()
    assert args and args[0] in subs, f"{cmd.where}: no subcommand in `{shlex.join(argv)}`"
    # Parses as the real command line does.
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            cli._parser().parse_args(args)
        except SystemExit:
            pytest.fail(f"{cmd.where}: `{shlex.join(argv)}` does not parse: {err.getvalue().strip()}", pytrace=False)
    sub = args[0]
    if sub == "run":   # planned with the same options instead of run
        planned(["plan", *args[1:]], cmd.where)
    elif sub == "validate":
        planned(["validate", *kernel_check(), *[a for a in args[1:] if a != "--no-kernel"]], cmd.where)
    elif sub in RUNS_HERE:
        planned(args, cmd.where)


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: f"{c.where} {' '.join(c.argv)[:60]}")
def test_command_example(cmd: Command):
    program = cmd.argv[0]
    if program == "make":
        check_make(cmd)
    elif program in ("wearlab", ".venv/bin/wearlab"):
        if program == ".venv/bin/wearlab":
            check_path(program, cmd.where)
        check_wearlab(cmd)
    else:
        for p in [program, *paths_in(list(cmd.argv[1:]))]:
            if "/" in p:
                check_path(p, cmd.where)


# --------------------------------------------------------------------------------------------
# Paths and links in the prose

PATH_TOKEN = re.compile(r"^[\w.-]+(/[\w.*-]+)*/?$")


def repo_path(token: str) -> Path | None:
    """The repository path a backticked token names, if it names one (None: not a path of ours)."""
    if "/" not in token or not PATH_TOKEN.match(token) or token.startswith(GENERATED):
        return None
    first = token.split("/", 1)[0]
    if (ROOT / first).exists():
        return ROOT / token
    if (ROOT / "src" / "wearlab" / first).is_dir():
        return ROOT / "src" / "wearlab" / token      # e.g. `run/start.py`: a module of the package
    return None


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_paths_in_prose_exist(page: Path):
    missing = []
    for code in inline_code(page):
        p = repo_path(code)
        if p is None:
            continue
        if any(c in code for c in "*?"):
            if not glob.glob(str(p)):
                missing.append(code)
        elif not p.exists():
            missing.append(code)
    assert not missing, f"{rel(page)} names paths that do not exist: {missing}"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    s = re.sub(r"[`*_]", "", heading.strip().lower())
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(m) for m in re.findall(r"^#{1,6} (.+)$", prose(page), flags=re.M)}


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_links_resolve(page: Path):
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose(page)):
        if re.match(r"^[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target} (no heading #{anchor} in {rel(dest)})")
    assert not bad, f"{rel(page)}: {bad}"


def test_readme_is_short_and_links_every_page():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move to docs/"
    text = README.read_text()
    unlinked = [rel(p) for p in sorted((ROOT / "docs").glob("*.md")) if f"({rel(p)}" not in text]
    assert not unlinked, f"docs pages the README does not link: {unlinked} (each page gets a line there)"
    # The two set-up commands, unchanged.
    assert "make experiment   # installs what it needs, then runs experiments/quickstart.yaml\n" \
           "make test         # installs what it needs, then runs the tests\n" in text


# --------------------------------------------------------------------------------------------
# Matrix keys the docs name, each swept with two values

_WEARABLE_STREAM = {"kind": "stream", "client": "watch", "server": "server", "path": "phone", "direction": "down",
                    "pattern": "cbr", "rate": "150kbit", "message_size": "3KB", "duration": "25s"}
BASES = {
    "http": ("wearable-basic", {"kind": "http-get", "client": "watch", "server": "server"}, {}),
    "stream": ("cproxy", {"kind": "stream", "client": "watch", "server": "server", "path": "phone",
                          "direction": "down", "rate": "500kbit", "duration": "5s"}, {}),
    "stream-ap": ("wearable-basic", {"kind": "stream", "client": "watch", "server": "server", "path": "ap",
                                     "direction": "down", "rate": "500kbit", "duration": "5s"}, {}),
    "app": ("cproxy", {"kind": "stream", "client": "watch", "server": "server", "path": "phone"}, {}),
    "messages": ("cproxy", {"kind": "messages", "client": "watch", "server": "server", "path": "phone",
                            "interval": "1s", "duration": "5s"}, {}),
    "sniff": ("bt-sniff", {**_WEARABLE_STREAM, "rate": "500kbit"}, {}),
    "page": ("pages-wifi", {"kind": "page-load", "client": "watch", "page": "exp3-java"}, {}),
    "handover": ("handover", {**_WEARABLE_STREAM, "mptcp": True, "reconnect": "rtapp"},
                 {"watch": {"interface_policy": "reactive", "walk_start": "1s", "p1": "2s", "p2": "2s", "p3": "1s"}}),
    "multipath": ("handover", {**_WEARABLE_STREAM, "direction": "up"}, {"watch": {"multipath": "minrtt"}}),
    "interface": ("handover", _WEARABLE_STREAM, {"watch": {"interface_policy": "adaptive"}}),
    "characterizer": ("wearable-basic", {"kind": "characterizer", "client": "watch", "server": "server", "path": "ap",
                                         "flows": [{"name": "steps", "sensitivity": 1, "size": "1KB"}]}, {}),
}
# key -> (base, two values, further fixed settings: workload parameters or node.option)
SWEEPS: dict[str, tuple[str, list, dict]] = {
    # http-get
    "protocol": ("http", ["http", "https"], {}),
    "size": ("http", ["1KB", "100KB"], {}),
    "path": ("http", ["ap", "phone"], {}),
    "tls_version": ("http", ["1.2", "1.3"], {"protocol": "https"}),
    "cipher": ("http", ["default", "ECDHE-RSA-AES128-SHA"], {"protocol": "https", "tls_version": "1.2"}),
    "cert": ("http", ["rsa2048", "ecdsa-p256"], {"protocol": "https"}),
    # stream
    "pattern": ("stream", ["cbr", "bulk"], {}),
    "rate": ("stream", ["500kbit", "1.5Mbit"], {}),
    "message_size": ("stream", [1000, "3KB"], {}),
    "direction": ("stream", ["down", "up"], {}),
    "duration": ("stream", ["5s", "10s"], {}),
    "bytes": ("stream", ["300KB", "3MB"], {"pattern": "bulk"}),
    "reconnect": ("stream", ["none", "rtapp"], {}),
    "playout_buffer": ("stream", ["500ms", "2s"], {"pattern": "cbr"}),
    "mptcp": ("stream-ap", [False, True], {}),
    "tcpcrypt": ("stream-ap", [False, True], {}),
    "app": ("app", ["download", "camera"], {}),
    "app_scale": ("app", [1, "1/16"], {"app": "video"}),
    # messages
    "interval": ("messages", ["1s", "200ms"], {}),
    "background": ("messages", ["bulk", "cbr"], {}),
    "background_rate": ("messages", ["500kbit", "1Mbit"], {"background": "cbr"}),
    # characterizer
    "battery": ("characterizer", [80, "10%"], {}),
    "thresholds": ("characterizer", [{50: 0, 0: 4}, "0:0"], {}),
    "encrypted_as": ("characterizer", ["require", "opportunistic"], {}),
    # page-load
    "page": ("page", ["exp3-java", "exp3-bing"], {}),
    "http_version": ("page", ["1.1", "3"], {}),
    "connections_per_origin": ("page", [6, 2], {"http_version": "1.1"}),
    "resumption": ("page", ["off", "on"], {"protocol": "https"}),
    "view": ("page", ["first", "repeat"], {"protocol": "https", "resumption": "on"}),
    "early_data": ("page", ["off", "on"], {"protocol": "https", "resumption": "on", "http_version": "3"}),
    # timelines
    "timeline": ("stream", ["static", "slow"], {}),
    # the phone's kind and its options
    "phone.kind": ("stream", ["relay", "haproxy"], {}),
    "phone.rmem_max": ("stream", [2097152, 8291456], {}),
    "phone.rmem_default": ("stream", [131072, "max"], {}),
    "phone.window_share": ("stream", [0.5, 0.75], {}),
    "phone.wmem_max": ("stream", ["64KiB", "4MB"], {}),
    "phone.sndbuf": ("stream", ["64KiB", "256KiB"], {}),
    "phone.rcvbuf": ("stream", ["64KiB", "256KiB"], {}),
    "phone.app_buffer": ("stream", ["64KiB", "1MB"], {}),
    "phone.udp": ("stream", ["forward", "drop"], {}),
    "phone.intercept": ("stream", [[443], [80, 443]], {}),
    "phone.mitigation": ("stream", ["none", "virtual-queue"], {}),
    "phone.vq_T": ("stream", ["0.5s", "1s"], {"phone.mitigation": "virtual-queue"}),
    "phone.vq_epsilon": ("stream", [0.1, 0.2], {"phone.mitigation": "virtual-queue"}),
    "phone.bufsize": ("stream", ["16KB", "64KB"], {"phone.kind": "haproxy"}),
    # swept with the kind itself (`phone.kind: ["command: ./a ...", ...]`): the one way (docs/phone-proxy.md)
    "phone.command": ("stream", ["./a {listen} {upstream}", "./b {listen} {upstream}"], {}),
    # the watch (wearable kind): its radio and its handover
    "watch.radio": ("sniff", ["none", "bt"], {}),
    "watch.sniff_timer": ("sniff", ["5s", "2s"], {}),
    "watch.phone_timer": ("sniff", ["5s", "3s"], {}),
    "watch.recovery_min": ("sniff", ["0.5s", "0.8s"], {}),
    "watch.recovery_max": ("sniff", ["1.2s", "2s"], {}),
    "watch.watch_wake": ("sniff", ["100ms", "200ms"], {}),
    "watch.uplink_keepalive": ("sniff", [False, True], {}),
    "watch.proactive_dbm": ("handover", [-66, -70], {"watch.interface_policy": "proactive"}),
    "watch.walk_start": ("handover", ["5s", "manual"], {}),
    "watch.walk_speed": ("handover", [1, 3], {}),
    "watch.rssi_1m": ("handover", [-50, -45], {}),
    "watch.path_loss_exponent": ("handover", [2.5, 3], {}),
    "watch.shadowing_db": ("handover", [2, 4], {}),
    "watch.bt_unusable": ("handover", [-85, -80], {}),
    "watch.p1": ("handover", ["2s", "3s"], {}),
    "watch.p2": ("handover", ["2s", "3s"], {}),
    "watch.p3": ("handover", ["1s", "2s"], {}),
    # the watch's multipath transport (docs/multipath.md)
    "watch.multipath": ("multipath", ["minrtt", "redundant"], {}),
    "watch.multipath_paths": ("multipath", [["wifi", "bt"], ["bt", "wifi"]], {}),
    "watch.multipath_chunk": ("multipath", [1400, "4KB"], {}),
    "watch.multipath_window": ("multipath", ["64KB", "256KB"], {}),
    "watch.interface_policy": ("interface", ["bt", "adaptive"], {}),
    "watch.policy_transport": ("interface", ["route", "chunked"], {"watch.interface_policy": "bt"}),
    "watch.policy_backlog": ("interface", ["10KB", "20KB"], {}),
    "watch.policy_t1": ("interface", ["500ms", "1s"], {}),
    "watch.policy_t2": ("interface", ["5s", "1s"], {}),
    "watch.policy_wifi_low": ("interface", ["500kbit", "1Mbit"], {}),
}


def _node_for(option: str) -> list[str]:
    """`option` of a node kind -> the sweep keys it means (`phone.x` for a phone's kinds, ...)."""
    out = []
    for k in CATALOG.node_kinds.values():
        if option in k.options:
            if Role.PHONE in k.roles:
                out.append(f"phone.{option}")
            if Role.WEARABLE in k.roles and k.name == "wearable":
                out.append(f"watch.{option}")
    return out


def docs_matrix_keys() -> dict[str, list[str]]:
    """Every matrix key the docs name -> where."""
    params = {p.name for w in CATALOG.workloads.values() for p in w.params} | {"timeline"}
    options = {p.name for k in CATALOG.node_kinds.values() for p in k.options}
    found: dict[str, list[str]] = {}

    def add(key: str, where: str) -> None:
        node, dot, opt = key.partition(".")
        if dot:
            if opt == "kind" or opt in options:
                found.setdefault(key, []).append(where)
        elif key in params:
            found.setdefault(key, []).append(where)
        elif key in options:
            for k in _node_for(key):
                found.setdefault(k, []).append(where)

    def sets(tokens: list[str], where: str) -> None:
        for i, t in enumerate(tokens):
            if t == "--set" and i + 1 < len(tokens):
                add(tokens[i + 1].split("=", 1)[0], where)
            elif t.startswith("--set="):
                add(t[6:].split("=", 1)[0], where)
            elif t.startswith("WEARLAB_ARGS="):
                sets(shlex.split(t.split("=", 1)[1]), where)

    for b in YAML_BLOCKS:
        data = yaml_load(b.text)
        if isinstance(data, dict) and isinstance(data.get("matrix"), dict):
            for k in data["matrix"]:
                add(k, b.where)
    for c in COMMANDS:
        sets(list(c.argv), c.where)
    for page in PAGES:
        for code in inline_code(page):
            where = f"{rel(page)}: `{code}`"
            try:
                sets(shlex.split(code), where)
            except ValueError:
                pass
            m = re.match(r"^([A-Za-z_][\w.]*)(:|$)", code.strip())
            if m and not code.strip().startswith(("wearlab", "make")):
                add(m.group(1), where)
    return found


DOCS_KEYS = docs_matrix_keys()


def test_every_key_the_docs_name_has_a_sweep():
    missing = {k: w[:2] for k, w in DOCS_KEYS.items() if k not in SWEEPS}
    assert not missing, f"matrix keys the docs name without two values in SWEEPS: {missing}"
    assert {"phone.kind", "protocol", "timeline", "watch.interface_policy"} <= set(DOCS_KEYS)


def test_sweeps_name_real_keys():
    params = {p.name for w in CATALOG.workloads.values() for p in w.params} | {"timeline"}
    options = {f"{n}.{o}" for k in CATALOG.node_kinds.values() for o in ["kind", *k.options.names()]
               for n in ("phone", "watch")}
    assert not [k for k in SWEEPS if k not in params | options]


@pytest.mark.parametrize("key", sorted(SWEEPS), ids=str)
def test_matrix_key_sweeps(key: str, tmp_path: Path):
    """Each key of SWEEPS (every key the docs name, and a few more) planned with its two values."""
    base, values, fixed = SWEEPS[key]
    topology, workload, nodes = BASES[base]
    exp: dict = {"name": f"sweep-{key.replace('.', '-').lower()}"[:60], "topology": str(ROOT / "topologies" /
                 f"{topology}.yaml"), "repetitions": 1, "workload": dict(workload),
                 "nodes": {n: dict(o) for n, o in nodes.items()}, "matrix": {key: values}}
    if key == "phone.command":
        exp["matrix"] = {"phone.kind": [f"command: {v}" for v in values]}
    for k, v in fixed.items():
        node, dot, opt = k.partition(".")
        if dot:
            exp["nodes"].setdefault(node, {})[opt] = v
        else:
            exp["workload"][k] = v
    node, dot, opt = key.partition(".")
    exp["workload"].pop(key, None)                    # varied, so not fixed
    exp["nodes"].get(node, {}).pop(opt, None)
    if key == "timeline":
        exp["timelines"] = {"slow": [{"at": "1s", "link": "watch-phone", "set": {"delay": "60ms"}}]}
    f = tmp_path / "sweep.yaml"
    f.write_text(yaml_dump(exp, sort_keys=False))
    p = plan(load_experiment(f, CATALOG))
    doc = p.to_document()
    assert len(doc["cells"]) == 2, f"{key}: {values} planned {len(doc['cells'])} cells"

    def seen(cell: dict):
        if key in cell["values"]:
            return cell["values"][key]
        if key == "timeline":
            return cell["timeline"]
        return cell["nodes"][node][opt]
    a, b = (seen(c) for c in doc["cells"])
    assert a != b, f"{key}: both cells have {a}"
    if key == "phone.kind":
        assert {split_kind(str(v))[0] for v in values} == {c["nodes"]["phone"]["kind"] for c in doc["cells"]}
