"""wearlab's side of tcpcrypt's policy and verification (issue 22 item 2), without namespaces: a
topology node's `tcpcrypt: require` and a need's `require` reach tcpcryptd as
--require-encryption; a run counts as encrypted only when the client's connection ran tcpcrypt,
closed cleanly and both daemons report the same session ID; a fallback keeps its reason."""

from __future__ import annotations

from textwrap import dedent
from types import SimpleNamespace

import pytest

from wearlab.catalog import CATALOG
from wearlab.errors import InputError
from wearlab.model.needs import Tcpcrypt
from wearlab.model.topology import load_topology
from wearlab.nodes import tcpcrypt as tc


def topo(tmp_path, node_extra: str):
    f = tmp_path / "t.yaml"
    f.write_text(dedent(f"""
        nodes:
          watch: {{role: wearable{node_extra}}}
          server: {{role: server}}
        links:
          - {{between: [watch, server]}}
    """))
    return load_topology(f, CATALOG)


def test_topology_node_option(tmp_path):
    assert topo(tmp_path, "").nodes["watch"].tcpcrypt == "opportunistic"
    t = topo(tmp_path, ", tcpcrypt: require")
    assert t.nodes["watch"].tcpcrypt == "require" and t.nodes["server"].tcpcrypt == "opportunistic"
    assert t.to_document(CATALOG)["nodes"]["watch"]["tcpcrypt"] == "require"
    with pytest.raises(InputError):
        topo(tmp_path, ", tcpcrypt: maybe")


@pytest.fixture
def daemon_factory(tmp_path, monkeypatch):
    monkeypatch.setattr(tc.cgroup, "base", lambda: tmp_path / "cg")
    monkeypatch.setattr(tc.cgroup, "cgroup2_root", lambda: tmp_path)
    monkeypatch.setattr(tc, "binary", lambda: tc.BINARY)
    net = SimpleNamespace(run_id="r1", workdir=tmp_path)

    def make(needs, **kw):
        return tc.TcpcryptDaemon(net, "watch", tmp_path / "w", needs, **kw)
    return make


def test_require_reaches_the_daemon(daemon_factory):
    opportunistic = daemon_factory([Tcpcrypt("watch", 8080, "outbound")]).argv()
    assert "--require-encryption" not in opportunistic
    per_port = daemon_factory([Tcpcrypt("watch", 8080, "outbound", require=True),
                               Tcpcrypt("watch", 5002, "outbound")]).argv()
    assert per_port[per_port.index("--require-encryption") + 1] == "8080"
    node = daemon_factory([Tcpcrypt("watch", 8080, "outbound")], require_all=True).argv()
    assert node[node.index("--require-encryption") + 1] == "all"


SID = "23" + "ab" * 32


def test_encrypted_needs_a_clean_close_and_one_session_id():
    client = {"mode": "tcpcrypt", "state": "closed", "session_id": SID}
    server = {"mode": "tcpcrypt", "state": "closed", "session_id": SID}
    assert tc.encrypted(client, server)
    assert tc.fallback_reason(client) is None
    # the old rule (the client's mode) counted these:
    assert not tc.encrypted({**client, "state": "aborted", "reason": "frame authentication failed"}, server)
    assert not tc.encrypted(client, {**server, "session_id": "23" + "cd" * 32})   # two sessions: a middlebox
    assert not tc.encrypted(client, None)                                           # no record at the server
    assert not tc.encrypted({**client, "session_id": None}, {**server, "session_id": None})
    plain = {"mode": "plain", "state": "closed", "reason": "eno-bpf: SynAckWithoutEno"}
    assert not tc.encrypted(plain, plain) and tc.fallback_reason(plain) == "eno-bpf: SynAckWithoutEno"
    reset = {"mode": "none", "state": "aborted", "reason": "fail closed: no ENO record for the socket"}
    assert tc.fallback_reason(reset) == "fail closed: no ENO record for the socket"
