"""Bad input never ends in a traceback: random mutations of the shipped experiments and their
topologies (keys deleted, renamed or added, values of the wrong type, bad units, unknown kinds,
negative numbers, names swapped, broken YAML) either load and plan, or stop with an InputError
whose every problem names its file and its line or field (or an EnvironmentProblem), never with
any other exception; through the real command line, `wearlab plan` exits 0 or 2 with no
traceback.

Property-based (hypothesis), derandomized so CI sees the same examples every time. The shipped
files are copied to a scratch directory (experiments/, topologies/ and traces/ side by side, so
their relative references hold) and mutated there.
"""

from __future__ import annotations

import copy
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml.error import YAMLError
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from conftest import ROOT, wearlab, yaml_dump, yaml_load
from wearlab.catalog import CATALOG
from wearlab.errors import EnvironmentProblem, InputError
from wearlab.model.experiment_file import load_experiment
from wearlab.model.topology import load_topology
from wearlab.plan.plan import plan


EXPERIMENTS = sorted(p.name for p in (ROOT / "experiments").glob("*.yaml"))
TOPOLOGIES = sorted(p.name for p in (ROOT / "topologies").glob("*.yaml"))
INPUT_DIRS = ("experiments", "topologies", "traces")   # what shipped experiments may refer to
IN_PROCESS_EXAMPLES = 300
THROUGH_CLI = 6

# What a value may become: other types, out-of-range numbers, text that is almost a quantity.
OTHER_VALUES: list[Any] = [
    None, True, False, 0, 1, -1, -7, 2**40, -0.5, 1e300, float("inf"), float("nan"), "", " ", "x", "banana",
    [], [None], [1, "a"], {}, {"a": 1}, {"kind": "relay"},
]
BAD_QUANTITIES = [
    "10 parsecs", "-5ms", "5", "ms", "1e999ms", "nan s", "inf", "0x10ms", "10Mbpsx", "-1%", "101%", "1KB/s",
    "1 KB", "1kb", "0", "0s", "-0.001", "10µs", "1e-9s", "9999999999TB", "12h", "1,5ms", "∞",
]
UNKNOWN_NAMES = ["bogus", "relay", "nginx", "host", "wearable", "haproxy", "http-get", "stream", "server", "phone",
                 "watch", "ap", "bt", "wifi", "wan", "command: ./p {listen} {upstream}", "Relay", "nginx2"]


# -- the mutations ------------------------------------------------------------------------------


def paths(doc: Any, at: tuple = ()) -> list[tuple]:
    """Every place in a YAML document: mapping keys and list indices, the root included."""
    out = [at]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths(v, at + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += paths(v, at + (i,))
    return out


def scalars(doc: Any) -> list[Any]:
    return [v for p in paths(doc) if not isinstance(v := get(doc, p), (dict, list))]


def get(doc: Any, path: tuple) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def put(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    get(doc, path[:-1])[path[-1]] = value
    return doc


def negated(value: Any) -> Any:
    if isinstance(value, bool):
        return -1
    if isinstance(value, (int, float)):
        return -value if value else -1
    if isinstance(value, str) and value[:1].isdigit():
        return "-" + value
    return -3


def mutate(doc: Any, path: tuple, how: str, choose) -> Any:
    """`doc` with one mutation `how` at `path`; `choose(list)` picks among alternatives."""
    target = get(doc, path)
    parent = get(doc, path[:-1]) if path else None
    if how == "delete" and path:
        del parent[path[-1]]
    elif how == "rename" and path and isinstance(path[-1], str):
        key = path[-1]
        new = choose([key[:-1] or "x", key + "s", key.upper(), key.replace("_", "-"), "bogus_key"])
        parent[new if new not in parent else "bogus_key_2"] = parent.pop(key)
    elif how == "add_key" and isinstance(target, dict):
        target[choose(["bogus", "kind", "role", "matrix", "nodes", "links", "timeline", "delay", "seed"])] = \
            choose(OTHER_VALUES + BAD_QUANTITIES)
    elif how == "duplicate" and isinstance(target, list) and target:
        target.append(copy.deepcopy(choose(target)))
    elif how == "empty" and isinstance(target, (dict, list)):
        target.clear()
    elif how == "retype":
        doc = put(doc, path, copy.deepcopy(choose(OTHER_VALUES)))
    elif how == "bad_quantity":
        doc = put(doc, path, choose(BAD_QUANTITIES))
    elif how == "unknown_name":
        doc = put(doc, path, choose(UNKNOWN_NAMES))
    elif how == "negative":
        doc = put(doc, path, negated(target))
    elif how == "swap":    # another value of the same file: a node name where a rate goes, ...
        doc = put(doc, path, copy.deepcopy(choose(scalars(doc) or [None])))
    return doc


HOWS = ["delete", "rename", "add_key", "duplicate", "empty", "retype", "bad_quantity", "unknown_name", "negative",
        "swap"]


def break_text(text: str, choose) -> str:
    """A mutation of the file's text that YAML itself may refuse."""
    lines = text.splitlines(keepends=True) or [""]
    i = choose(range(len(lines)))
    how = choose(["truncate", "tab", "colon", "bracket", "dup_line", "dedent", "bytes"])
    if how == "truncate":
        return "".join(lines[:i]) + lines[i][: len(lines[i]) // 2]
    if how == "tab":
        lines[i] = "\t" + lines[i]
    elif how == "colon":
        lines[i] = lines[i].rstrip("\n") + ": :\n"
    elif how == "bracket":
        lines[i] = lines[i].replace(":", ": [", 1)
    elif how == "dup_line":    # duplicate keys
        lines.insert(i, lines[i])
    elif how == "dedent":
        lines[i] = lines[i].lstrip()
    elif how == "bytes":
        return "".join(lines[:i]) + "\udcff\x00" + "".join(lines[i:])
    return "".join(lines)


# -- the scratch copy and the check -------------------------------------------------------------


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return copy_inputs(tmp_path_factory.mktemp("mutations"))


def copy_inputs(root: Path) -> Path:
    """The shipped inputs side by side, so relative references (`../topologies/...`) hold."""
    for d in INPUT_DIRS:
        if (ROOT / d).is_dir():
            shutil.copytree(ROOT / d, root / d)
    return root


def original(kind: str, name: str) -> str:
    return (ROOT / kind / name).read_text()


def write(path: Path, text: str) -> None:
    path.write_bytes(text.encode("utf-8", "surrogateescape"))


def render(doc: Any) -> str:
    return yaml_dump(doc, sort_keys=False, allow_unicode=True)


def check(experiment: Path, topology: Path | None) -> str:
    """Load and plan; the outcome ("ok", "input", "environment"). Anything else fails the test."""
    try:
        if topology is not None:
            try:
                load_topology(topology, CATALOG)
            except InputError as e:
                assert_located(e)
        p = plan(load_experiment(experiment, CATALOG))
        json.dumps(p.to_document())     # what `wearlab plan --json` prints
        return "ok"
    except InputError as e:
        assert_located(e)
        return "input"
    except EnvironmentProblem as e:
        assert str(e).strip()
        return "environment"


def assert_located(e: InputError) -> None:
    assert e.problems, "an InputError with no problem in it"
    for p in e.problems:
        assert p.file and p.message.strip(), p
        assert p.line is not None or p.field or about_the_whole_file(p.file), \
            f"a problem located nowhere in {p.file}: {p.message}"


def about_the_whole_file(file: str) -> bool:
    """A problem may name no line when it is the whole file's: missing, unreadable, empty, not a
    mapping."""
    try:
        doc = yaml_load(Path(file).read_bytes())
    except (OSError, YAMLError):
        return True
    return not isinstance(doc, dict)


def mutated(scratch: Path, draw) -> tuple[Path, Path | None, str]:
    """Write one mutated experiment (or its topology file) into `scratch`, the others as
    shipped. `draw(list)` picks. Returns (experiment, mutated topology or None, what was done)."""
    name = draw(EXPERIMENTS)
    exp_text = original("experiments", name)
    exp_doc = yaml_load(exp_text)
    topo_name = Path(exp_doc["topology"]).name if isinstance(exp_doc.get("topology"), str) else None
    target = draw(["experiment", "topology"]) if topo_name else "experiment"
    kind, file = ("experiments", name) if target == "experiment" else ("topologies", topo_name)
    text = original(kind, file)
    done = [f"{kind}/{file}"]
    if draw(range(10)) == 0:
        text = break_text(text, draw)
        done.append("text")
    else:
        doc = yaml_load(text)
        for _ in range(draw([1, 1, 2, 3])):
            where, how = draw(paths(doc)), draw(HOWS)
            doc = mutate(doc, where, how, draw)
            done.append(f"{how} at {'.'.join(map(str, where)) or '<root>'}")
        text = render(doc)
    # Every file as shipped, then the mutated one.
    for n in EXPERIMENTS:
        write(scratch / "experiments" / n, original("experiments", n))
    for n in TOPOLOGIES:
        write(scratch / "topologies" / n, original("topologies", n))
    write(scratch / kind / file, text)
    return (scratch / "experiments" / name, scratch / "topologies" / file if target == "topology" else None,
            "; ".join(done))


# -- the properties -----------------------------------------------------------------------------


@settings(max_examples=IN_PROCESS_EXAMPLES, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_mutated_experiment_plans_or_says_where_it_is_wrong(scratch, data):
    def draw(options):
        return data.draw(st.sampled_from(list(options)))

    experiment, topology, what = mutated(scratch, draw)
    note(what)
    check(experiment, topology)


def test_the_shipped_files_plan(scratch):
    """The unmutated baseline: every shipped experiment plans, so a mutation is what fails."""
    for name in EXPERIMENTS:
        assert check(ROOT / "experiments" / name, None) == "ok", name


def test_mutations_through_the_command_line(tmp_path):
    """A handful through `wearlab plan` itself (argument parsing, printing, exit status)."""
    root = copy_inputs(tmp_path)
    rng = random.Random(19)
    statuses = []
    for i in range(THROUGH_CLI):
        experiment, _, what = mutated(root, lambda options: rng.choice(list(options)))
        res = wearlab("plan", str(experiment), timeout=120)
        out = res.stdout + res.stderr
        assert res.returncode in (0, 2), (what, res.returncode, out[-2000:])
        assert "Traceback" not in out and "internal error" not in out, (what, out[-2000:])
        statuses.append(res.returncode)
    assert 2 in statuses, "no mutation was refused: the mutations are too weak"
