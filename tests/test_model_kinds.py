"""Node kinds and workload kinds as declared types: topology `kind:`, experiment `nodes:`, node
settings in the matrix (`phone.kind`), `--set` overrides, and located errors for all of it."""

from __future__ import annotations

from textwrap import dedent

from pathlib import Path

import pytest

from conftest import wearlab
from wearlab.errors import InputError
from wearlab.model.columns import columns_of
from wearlab.model.experiment_file import load_experiment
from wearlab.model.topology import load_topology
from wearlab.catalog import CATALOG

TOPO = """\
nodes:
  watch: {role: wearable}
  phone: {role: phone, rmem_max: 8291456}
  ap: {role: ap}
  server: {role: server}
links:
  - {between: [watch, phone], profile: bt-classic}
  - {between: [watch, ap], profile: wifi-2g4-good}
  - {between: [phone, ap], profile: wifi-5g-good}
  - {between: [ap, server], profile: wan}
"""


def write(tmp_path, name, text):
    (tmp_path / "t.yaml").write_text(TOPO)
    f = tmp_path / name
    f.write_text(dedent(text))
    return f


def problems(f, **kw):
    with pytest.raises(InputError) as e:
        load_experiment(f, CATALOG, **kw)
    return e.value.problems


def test_every_kind_is_declared_completely():
    for k in CATALOG.node_kinds.values():
        assert k.name and k.doc and k.roles
        for p in k.options:
            assert p.doc, (k.name, p.name)
    for w in CATALOG.workloads.values():
        assert w.name and w.doc and w.metrics
        assert "kind" in w.Fields.model_fields
        assert len({m.name for m in w.metrics}) == len(w.metrics)
        for m in w.metrics:
            assert m.better in ("lower", "higher", "none") and m.unit


def test_default_kinds_follow_roles(tmp_path):
    (tmp_path / "t.yaml").write_text(TOPO)
    t = load_topology(tmp_path / "t.yaml", CATALOG)
    assert {n.name: n.kind for n in t.nodes.values()} == {
        "watch": "wearable", "phone": "relay", "ap": "host", "server": "nginx"}
    assert t.nodes["phone"].options == {"rmem_max": 8291456}
    assert CATALOG.default_kinds[t.nodes["phone"].role] == "relay"


def test_node_settings_layer_topology_experiment_and_cell(tmp_path):
    f = write(tmp_path, "e.yaml", """\
    topology: t.yaml
    nodes:
      phone: {mitigation: virtual-queue}
    workload: {kind: stream, pattern: cbr, client: watch, server: server, path: phone}
    matrix:
      phone.kind: [relay, haproxy, "command: ./p {listen} {upstream}"]
    """)
    e = load_experiment(f, CATALOG)
    cells = e.cells()
    assert [c["phone.kind"] for c in cells] == ["relay", "haproxy", "command: ./p {listen} {upstream}"]
    kind, opts = e.node_settings("phone", cells[0])
    assert kind == "relay" and opts["rmem_max"] == 8291456 and opts["mitigation"] == "virtual-queue"
    assert opts["app_buffer"] == 65536  # the kind's default
    kind, opts = e.node_settings("phone", cells[1])
    assert kind == "haproxy" and opts["rmem_max"] == 8291456 and "mitigation" not in opts
    kind, opts = e.node_settings("phone", cells[2])
    assert kind == "command" and opts["command"] == "./p {listen} {upstream}"
    assert "phone.kind" in columns_of(e.workload_class, (), e.matrix).params


def test_matrix_of_node_options_is_normalised(tmp_path):
    f = write(tmp_path, "e.yaml", """\
    topology: t.yaml
    workload: {kind: stream, pattern: cbr, client: watch, server: server, path: phone}
    matrix:
      phone.rmem_max: [8291456, 4525824, 2MiB]
    """)
    assert load_experiment(f, CATALOG).matrix["phone.rmem_max"] == [8291456, 4525824, 2097152]


def test_set_overrides_replace_what_the_file_fixes_or_varies(tmp_path):
    f = write(tmp_path, "e.yaml", """\
    topology: t.yaml
    workload: {kind: stream, pattern: cbr, client: watch, server: server, path: phone, rate: 1Mbit}
    matrix:
      duration: [10s, 20s]
    """)
    e = load_experiment(f, CATALOG, overrides={"duration": "2s", "rate": "3Mbit", "phone.kind": "haproxy"})
    assert "duration" not in e.matrix and e.fixed["duration"] == 2.0 and e.fixed["rate"] == 3_000_000
    assert e.node_settings("phone")[0] == "haproxy"
    # A node setting fixed for the whole experiment is not a cell column (compare matches cells).
    assert "phone.kind" not in columns_of(e.workload_class, (), e.matrix).params


@pytest.mark.parametrize("text, field, fragment", [
    ("nodes: {phone: {kind: squid}}\n", "nodes.phone.kind", "unknown kind 'squid'"),
    ("nodes: {phone: {kind: relay, app_bufer: 1MB}}\n", "nodes.phone.app_bufer", "did you mean 'app_buffer'?"),
    ("nodes: {phone: {kind: command, command: './p {listen}'}}\n", "nodes.phone.command", "{upstream}"),
    ("nodes: {phone: {kind: command}}\n", "nodes.phone.kind", "needs 'command'"),
    ("nodes: {server: {kind: relay}}\n", "nodes.server.kind", "not on a server"),
    ("nodes: {phon: {kind: relay}}\n", "nodes.phon", "did you mean 'phone'?"),
    ("matrix: {phone.kind: [relay, hapoxy]}\n", "matrix[phone.kind][1]", "did you mean 'haproxy'?"),
    ("matrix: {phone.bogus: [1]}\n", "matrix[phone.bogus]", "has no option 'bogus'"),
    ("matrix: {rate: [0bit]}\n", "matrix.rate[0]", "impossible"),
    ("matrix: {duration: [-3s]}\n", "matrix.duration[0]", "negative"),
])
def test_bad_kinds_and_settings_are_located(tmp_path, text, field, fragment):
    f = write(tmp_path, "e.yaml", "topology: t.yaml\nworkload: {kind: stream, pattern: cbr, client: watch, server: server, path: phone}\n"
              + text)
    found = problems(f)
    assert any(p.field == field and fragment in p.message and p.line is not None for p in found), found


def test_bad_set_override_names_the_command_line(tmp_path):
    f = write(tmp_path, "e.yaml", "topology: t.yaml\nworkload: {kind: stream, pattern: cbr, client: watch, server: server}\n")
    found = problems(f, overrides={"rat": "1Mbit"})
    assert found[0].file == "command line" and found[0].field == "--set rat" and "did you mean 'rate'?" in found[0].message


def test_cli_exits_2_on_an_unknown_proxy_kind_and_creates_nothing(tmp_path):
    f = write(tmp_path, "e.yaml", "topology: t.yaml\nworkload: {kind: stream, pattern: cbr, client: watch, server: server, path: phone}\n"
              "nodes: {phone: {kind: squid}}\n")
    res = wearlab("run", str(f), "--out", str(tmp_path / "r"))
    assert res.returncode == 2 and "unknown kind 'squid'" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "r").exists()


def test_resolved_experiment_loads_back_with_node_settings(tmp_path):
    from ruamel.yaml import YAML

    f = write(tmp_path, "e.yaml", """\
    topology: t.yaml
    nodes: {phone: {app_buffer: 32KiB}}
    workload: {kind: stream, pattern: bulk, client: watch, server: server, path: phone, bytes: 1MB}
    matrix: {phone.rmem_max: [8MB, 2MB]}
    """)
    e = load_experiment(f, CATALOG)
    out = tmp_path / "resolved.yaml"
    with out.open("w") as fh:
        YAML().dump(e.to_document(), fh)
    again = load_experiment(out, CATALOG)
    assert again.cells() == e.cells() and again.nodes == e.nodes


def test_experiment_overrides_keep_the_topologys_normalised_options(tmp_path):
    # The topology's sniff_timer is normalised once (5.0 s); an experiment overriding another
    # option of the same node must not normalise it again ("'5' has no unit").
    from wearlab.model.experiment_file import load_experiment
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "e.yaml").write_text(f"""
topology: {root / "topologies" / "bt-sniff.yaml"}
workload: {{kind: stream, client: watch, server: server, path: phone, duration: 5s}}
nodes: {{watch: {{uplink_keepalive: true}}}}
""")
    exp = load_experiment(tmp_path / "e.yaml", CATALOG)
    kind, options = exp.node_settings("watch")
    assert kind == "wearable" and options["sniff_timer"] == 5.0 and options["uplink_keepalive"] is True
