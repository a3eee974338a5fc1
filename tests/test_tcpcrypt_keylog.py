"""The opt-in tcpcrypt key log on wearlab's side (issue 22 item 5), without namespaces: the node
option `tcpcrypt_key_log` is off unless a node asks; when on, it reaches the node's tcpcryptd as
--key-log <results>/keys/<node>.keylog, the file owner-only (0600), and a run says so loudly
(console, metadata.json). `wearlab decrypt`'s refusals: exit 2, one line naming the file, no
traceback. (Decrypting real captures: tests/test_tcpcrypt_http.py, in the guest.)"""

from __future__ import annotations

import csv
import json
import stat
from textwrap import dedent
from types import SimpleNamespace

import pytest
from rich.console import Console

from conftest import wearlab
from test_tcpcrypt_policy import daemon_factory, topo  # noqa: F401  (daemon_factory is a fixture)
from wearlab.catalog import CATALOG
from wearlab.errors import InputError
from wearlab.model.needs import Tcpcrypt
from wearlab.nodes import tcpcrypt as tc
from wearlab.report import decrypt as dc


def test_key_log_node_option(tmp_path):
    assert topo(tmp_path, "").nodes["watch"].tcpcrypt_key_log is False        # never on by default
    t = topo(tmp_path, ", tcpcrypt_key_log: true")
    assert t.nodes["watch"].tcpcrypt_key_log is True and t.nodes["server"].tcpcrypt_key_log is False
    doc = t.to_document(CATALOG)["nodes"]
    assert doc["watch"]["tcpcrypt_key_log"] is True and "tcpcrypt_key_log" not in doc["server"]
    with pytest.raises(InputError) as e:
        topo(tmp_path, ", tcpcrypt_key_log: please")
    assert "tcpcrypt_key_log" in str(e.value)


def test_the_plan_names_the_nodes_that_keep_one(tmp_path):
    """A key log is kept only where tcpcryptd runs: on a node with the option and a tcpcrypt need
    (here the watch, in the tcpcrypt cell); the server, with the option but plain HTTP, keeps none."""
    from wearlab.model.experiment_file import load_experiment
    from wearlab.plan.plan import plan
    exp = tmp_path / "exp.yaml"
    for protocol, expected in (("tcpcrypt", ["watch", "server"]), ("http", [])):
        exp.write_text(dedent(f"""
            topology:
              nodes:
                watch: {{role: wearable, tcpcrypt_key_log: true}}
                server: {{role: server, tcpcrypt_key_log: true}}
              links: [{{between: [watch, server]}}]
            workload: {{kind: http-get, client: watch, server: server, size: 1000, protocol: {protocol}}}
        """))
        assert plan(load_experiment(exp, CATALOG)).key_log_nodes() == expected


def test_key_log_from_the_topology_to_the_daemon(tmp_path, monkeypatch, daemon_factory):  # noqa: F811
    """Only the node that asks gets --key-log, into the results' keys/ (not the run's scratch
    work directory), and the node facts metadata.json keeps say where."""
    from wearlab.nodes import node_kind
    made = {}

    class Daemon(tc.TcpcryptDaemon):
        def __init__(self, net, node, workdir, needs, device=None, **kw):
            made[node] = daemon_factory(needs, **kw)
            self.__dict__.update(made[node].__dict__)

        def start(self):
            pass

        def version(self):
            return "tcpcryptd test"
    monkeypatch.setattr(node_kind, "TcpcryptDaemon", Daemon)
    t = topo(tmp_path, ", tcpcrypt_key_log: true")
    results = tmp_path / "results"
    facts = {}
    for node in ("watch", "server"):
        net = SimpleNamespace(topo=t)
        ctx = node_kind.NodeContext(net=net, node=node, settings={}, workdir=tmp_path / node, out_dir=results)
        kind = node_kind.NodeKind(ctx, [Tcpcrypt(node, 8080, "outbound")])
        kind.bring_up()
        kind.name = "host"
        facts[node] = kind.facts()["tcpcrypt"]
    argv = made["watch"].argv()
    assert argv[argv.index("--key-log") + 1] == str(results / "keys" / "watch.keylog")
    assert facts["watch"]["key_log"] == str(results / "keys" / "watch.keylog")
    assert "--key-log" not in made["server"].argv() and "key_log" not in facts["server"]


def test_key_log_file_is_owner_only(tmp_path):
    """Made 0600 before the daemon opens it to append; a key log already there (a node kind
    restarted for another cell) keeps its lines and is made 0600 too."""
    f = tmp_path / "keys" / "watch.keylog"
    tc.make_key_log(f)
    assert stat.S_IMODE(f.stat().st_mode) == 0o600 and f.read_text() == ""
    f.write_text("TCPCRYPT_ES aa bb\n")
    f.chmod(0o644)
    tc.make_key_log(f)
    assert stat.S_IMODE(f.stat().st_mode) == 0o600 and f.read_text() == "TCPCRYPT_ES aa bb\n"


def test_a_run_with_a_key_log_says_so(tmp_path):
    from wearlab.run import runner
    notes, doc = [], {}
    record = SimpleNamespace(note=notes.append, set=doc.update)
    console = Console(record=True, width=300)
    runner._warn_key_logs(SimpleNamespace(key_log_nodes=lambda: ["watch"]), tmp_path, record, console)
    assert doc == {"tcpcrypt_key_logs": {"watch": "keys/watch.keylog"}}
    assert "these results hold session keys" in notes[0]
    assert console.export_text().startswith("WARNING: tcpcrypt key log kept on watch")
    notes.clear()
    runner._warn_key_logs(SimpleNamespace(key_log_nodes=lambda: []), tmp_path, record, console)
    assert notes == []


# -- wearlab decrypt's refusals ---------------------------------------------------------------

def results_dir(tmp_path, *, tcpcrypt_nodes=("watch", "server")):
    d = tmp_path / "r"
    d.mkdir()
    (d / "plan.json").write_text("{}")
    nodes = {n: [{"kind": "host", "tcpcrypt": {"argv": ["tcpcryptd", "run"]}} if n in tcpcrypt_nodes
                 else {"kind": "host"}] for n in ("watch", "server", "ap")}
    (d / "metadata.json").write_text(json.dumps({"nodes": nodes}))
    return d


def test_no_key_log_names_the_nodes_to_turn_it_on_for(tmp_path):
    d = results_dir(tmp_path)
    res = wearlab("decrypt", str(d))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert str(d / "keys") in res.stderr
    assert "tcpcrypt_key_log: true` on node server or watch" in res.stderr.replace("\n", " ")


def test_no_tcpcrypt_at_all(tmp_path):
    with pytest.raises(InputError) as e:
        dc.decrypt(results_dir(tmp_path, tcpcrypt_nodes=()))
    assert "no node ran tcpcryptd" in str(e.value)


def keys(d, text="TCPCRYPT_ES " + "ab" * 32 + " " + "cd" * 32 + "\n"):
    (d / "keys").mkdir()
    (d / "keys" / "watch.keylog").write_text(text)


def test_a_run_without_a_session(tmp_path):
    d = results_dir(tmp_path)
    keys(d)
    (d / "series").mkdir()
    with (d / "series" / "tcpcrypt.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerows([["run", "node", "mode", "session_id"], [1, "watch", "tcpcrypt", "23" + "ab" * 32],
                     [2, "watch", "plain", ""]])
    for run, what in ((2, "no encrypted connection"), (7, "no row")):
        with pytest.raises(InputError) as e:
            dc.decrypt(d, run=run)
        assert str(d / "series" / "tcpcrypt.csv") in str(e.value) and what in str(e.value)
        assert "runs with tcpcrypt sessions: 1" in str(e.value)


def test_no_capture_and_an_empty_key_log(tmp_path):
    d = results_dir(tmp_path)
    keys(d, text="")
    with pytest.raises(InputError) as e:
        dc.decrypt(d)
    assert "key logs are empty" in str(e.value)
    (d / "keys" / "watch.keylog").write_text("TCPCRYPT_ES " + "ab" * 32 + " " + "cd" * 32 + "\n")
    with pytest.raises(InputError) as e:
        dc.decrypt(d)
    assert str(d / "captures") in str(e.value) and "--pcap" in str(e.value)


def test_a_merged_directory_s_shards_are_read(tmp_path):
    """`wearlab merge` keeps each shard's key logs and captures under shards/<I-of-N>/."""
    d = results_dir(tmp_path)
    shard = d / "shards" / "1-of-2"
    shard.mkdir(parents=True)
    keys(shard)
    (shard / "captures").mkdir()
    (shard / "captures" / "watch-eth0.pcap").write_bytes(b"")
    assert dc.key_logs(d) == [shard / "keys" / "watch.keylog"]
    assert dc.captures(d, []) == [shard / "captures" / "watch-eth0.pcap"]


def test_an_unreadable_capture_is_named(tmp_path):
    if not tc.BINARY.exists():
        pytest.fail(f"{tc.BINARY} is not built: `make test` builds it (make tcpcrypt)", pytrace=False)
    d = results_dir(tmp_path)
    keys(d)
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"not a capture at all")
    with pytest.raises(InputError) as e:
        dc.decrypt(d, pcaps=[bad])
    assert str(bad) in str(e.value) and "cannot decrypt" in str(e.value)
    with pytest.raises(InputError) as e:
        dc.decrypt(d, pcaps=[tmp_path / "missing.pcap"])
    assert "missing.pcap" in str(e.value)


def test_parse_and_escape():
    report = ("connection 1: 10.0.0.1:4000 -> 10.0.1.2:80: tcpcrypt, fresh key exchange, TEP 0x23, AES128_GCM, "
              "session 23abcd\n  A->B: 3 bytes in 1 frames, FINp\n  B->A: 0 bytes in 0 frames, no FINp\n"
              "connection 2: 10.0.0.1:4001 -> 10.0.1.2:80: plain TCP (no ENO)\n"
              "connection 3: 10.0.0.1:4002 -> 10.0.1.2:80: tcpcrypt, not decrypted: no key\n")
    conns = dc.parse(report)
    assert [c.number for c in conns] == [1, 2, 3]
    assert conns[0].session == "23abcd" and len(conns[0].lines) == 3 and not conns[0].failed
    assert conns[1].session is None and conns[2].failed
    assert dc.escape(b"GET / HTTP/1.1\r\n\x00\\\xff") == "GET / HTTP/1.1\\r\\n\\x00\\\\\\xff"
