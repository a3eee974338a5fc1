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


def test_resumption_node_option(tmp_path):
    """`tcpcrypt_resumption` (RFC 8548 3.5) is off unless a node asks; the resolved topology (which
    the results keep) says so only where it is on."""
    assert topo(tmp_path, "").nodes["watch"].tcpcrypt_resumption is False
    t = topo(tmp_path, ", tcpcrypt_resumption: true")
    assert t.nodes["watch"].tcpcrypt_resumption is True and t.nodes["server"].tcpcrypt_resumption is False
    doc = t.to_document(CATALOG)["nodes"]
    assert doc["watch"]["tcpcrypt_resumption"] is True and "tcpcrypt_resumption" not in doc["server"]
    with pytest.raises(InputError) as e:
        topo(tmp_path, ", tcpcrypt_resumption: sometimes")
    assert "tcpcrypt_resumption" in str(e.value)


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


def test_resumption_reaches_the_daemon(daemon_factory):
    """tcpcryptd resumes by default; wearlab passes --no-resume unless the node asks, so an
    experiment that does not mention resumption measures a key exchange per connection."""
    assert "--no-resume" in daemon_factory([Tcpcrypt("watch", 8080, "outbound")]).argv()
    assert "--no-resume" not in daemon_factory([Tcpcrypt("watch", 8080, "outbound")], resumption=True).argv()


def test_resumption_from_the_topology_to_the_daemon(tmp_path, monkeypatch, daemon_factory):
    """The node option reaches the daemon a node kind starts (nodes.node_kind: bring_up)."""
    from wearlab.nodes import node_kind
    made = {}

    class Daemon:
        def __init__(self, net, node, workdir, needs, device=None, **kw):
            made[node] = daemon_factory(needs, **kw)

        def start(self):
            pass
    monkeypatch.setattr(node_kind, "TcpcryptDaemon", Daemon)
    t = topo(tmp_path, ", tcpcrypt_resumption: true")
    for node in ("watch", "server"):
        net = SimpleNamespace(topo=t)
        ctx = node_kind.NodeContext(net=net, node=node, settings={}, workdir=tmp_path / node)
        node_kind.NodeKind(ctx, [Tcpcrypt(node, 8080, "outbound")]).bring_up()
    assert "--no-resume" not in made["watch"].argv()
    assert "--no-resume" in made["server"].argv()


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


def test_close_records_are_read_only_when_whole(tmp_path):
    """The daemon appends a record with one write(), but a reader can see it half-copied (a
    write crossing a page boundary grows the file a page at a time): a line without its newline
    yet is left for the next read, never parsed half (CI saw "Expecting ',' delimiter" there)."""
    stats = tmp_path / "tcpcrypt-stats.jsonl"
    first = b'{"id": 1, "state": "closed"}\n'
    second = b'{"id": 2, "state": "closed", "mode": "tcpcrypt"}\n'
    stats.write_bytes(first + second[:17])
    records, offset = tc.whole_json_lines(stats, 0)
    assert [r["id"] for r in records] == [1] and offset == len(first)
    stats.write_bytes(first + second)
    records, offset = tc.whole_json_lines(stats, offset)
    assert [r["id"] for r in records] == [2] and offset == len(first + second)
    assert tc.whole_json_lines(stats, offset) == ([], offset)
    assert tc.whole_json_lines(tmp_path / "absent.jsonl", 0) == ([], 0)


def test_the_servers_record_of_a_fetch_is_never_an_earlier_connections():
    """CI once read a direct tcpcrypt fetch as unencrypted: the server daemon's first record in the
    run was the plain connection a splitting phone had opened for the warm-up fetch before it,
    closing late, and any server record was taken for the fetch's. The fetch's own is the one with
    the client's session ID; a fallback's, the first that started after the client's."""
    from wearlab.workloads.http_get import _their_record
    mine = {"mode": "tcpcrypt", "state": "closed", "session_id": "ab12", "started_unix": 100.0}
    late_warm_up = {"mode": "none", "state": "closed", "session_id": None, "started_unix": 99.2}
    fetch = {"mode": "tcpcrypt", "state": "closed", "session_id": "ab12", "started_unix": 100.004}
    assert _their_record(mine, [late_warm_up, fetch]) is fetch
    assert tc.encrypted(mine, _their_record(mine, [late_warm_up, fetch]))
    assert _their_record(mine, [late_warm_up]) is None          # not in yet: wait for it
    # Through a splitting phone: the client's connection is plain (or reset); the server's is the
    # proxy's, which started once the client's reached the phone.
    split = {"mode": "none", "state": "aborted", "session_id": None, "started_unix": 200.0}
    proxy = {"mode": "none", "state": "closed", "session_id": None, "started_unix": 200.016}
    later = {"mode": "none", "state": "closed", "session_id": None, "started_unix": 203.0}
    assert _their_record(split, [late_warm_up, later, proxy]) is proxy
    assert not tc.encrypted(split, proxy)
