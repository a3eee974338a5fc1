"""Topologies and profiles: resolution, override precedence, and located problems for bad input."""

from pathlib import Path
from textwrap import dedent

import pytest

from wearlab.errors import InputError
from wearlab.model.profiles import PROFILES
from wearlab.model.roles import Role
from wearlab.model.shape import Loss, Shape
from wearlab.model.topology import load_topology, topology_from_mapping
from wearlab.model.yamlsrc import parse_yaml
from wearlab.catalog import CATALOG

ROOT = Path(__file__).resolve().parents[1]

NODES = """\
nodes:
  watch: {role: wearable}
  phone: {role: phone}
  ap: {role: ap}
  server: {role: server}
"""


def write(tmp_path, text, name="t.yaml"):
    f = tmp_path / name
    f.write_text(dedent(text))
    return f


def problems(tmp_path, text):
    f = write(tmp_path, text)
    with pytest.raises(InputError) as e:
        load_topology(f, CATALOG)
    for p in e.value.problems:
        assert p.file == str(f)
    return e.value.problems


def one(tmp_path, text):
    found = problems(tmp_path, text)
    assert len(found) == 1, found
    return found[0]


# --- profiles: the numbers match what their citations say -------------------------------------


def test_wifi_2g4_good_is_10mbit_10ms_rtt():
    p = PROFILES["wifi-2g4-good"]
    for s in (p.forward, p.reverse):
        assert s.rate_bps == 10_000_000
    assert p.forward.delay_s + p.reverse.delay_s == pytest.approx(0.010)
    assert "10Mbps BW, 10ms RTT" in p.citation


def test_wifi_2g4_fair_is_5mbit_20ms_rtt():
    p = PROFILES["wifi-2g4-fair"]
    assert p.forward.rate_bps == p.reverse.rate_bps == 5_000_000
    assert p.forward.delay_s + p.reverse.delay_s == pytest.approx(0.020)
    assert "5Mbps BW, 20ms RTT" in p.citation


def test_bt_classic_is_the_1_1_mbit_bloat_threshold():
    p = PROFILES["bt-classic"]
    assert p.forward.rate_bps == p.reverse.rate_bps == 1_100_000
    assert "1.1" in p.citation and "seed 003" in p.citation
    assert "ASSUMPTION" in p.citation  # the delay is not from the paper


def test_ble_is_gomez_application_throughput():
    p = PROFILES["ble"]
    assert p.forward.rate_bps == p.reverse.rate_bps == 236_700
    assert "236.7" in p.citation and "Gomez" in p.citation and "ASSUMPTION" in p.citation


@pytest.mark.parametrize("name", ["wifi-5g-good", "wan"])
def test_assumed_profiles_say_so(name):
    assert "ASSUMPTION" in PROFILES[name].citation


def test_every_profile_is_complete():
    assert set(PROFILES) == {"bt-classic", "ble", "wifi-2g4-good", "wifi-2g4-fair", "wifi-5g-good", "wan"}
    for name, p in PROFILES.items():
        assert p.name == name and p.description and p.citation
        for s in (p.forward, p.reverse):
            assert s.rate_bps and s.rate_bps > 0 and s.jitter_s <= s.delay_s


# --- the shipped topology ----------------------------------------------------------------------


def test_wearable_basic():
    t = load_topology(ROOT / "topologies" / "wearable-basic.yaml", CATALOG)
    assert t.name == "wearable-basic"
    assert {n: node.role for n, node in t.nodes.items()} == {
        "watch": Role.WEARABLE, "phone": Role.PHONE, "ap": Role.AP, "server": Role.SERVER}
    assert t.nodes["phone"].sysctls == {"net.ipv4.tcp_rmem": "4096 131072 8291456"}
    assert [(link.a, link.b, link.profile) for link in t.links] == [
        ("watch", "phone", "bt-classic"), ("watch", "ap", "wifi-2g4-good"),
        ("phone", "ap", "wifi-5g-good"), ("ap", "server", "wan")]
    assert t.neighbors("watch") == ["phone", "ap"]
    assert t.neighbors("ap") == ["watch", "phone", "server"]
    assert t.link_between("server", "ap") is t.links[3]
    assert t.link_between("watch", "server") is None
    wan = t.links[3]
    assert wan.forward.delay_s == wan.reverse.delay_s == pytest.approx(0.015)  # link overrides profile
    assert wan.forward.rate_bps == PROFILES["wan"].forward.rate_bps
    assert wan.line is not None and all(link.index == i for i, link in enumerate(t.links))


def test_wearable_lossy():
    t = load_topology(ROOT / "topologies" / "wearable-lossy.yaml", CATALOG)
    wifi = t.link_between("watch", "ap")
    assert wifi.reverse.loss == Loss(model="gilbert-elliott", p=0.5, r=25.0, bad_loss=100.0, good_loss=0.0)
    assert wifi.forward.loss is None
    assert wifi.shape("ap", "watch") is wifi.reverse


def test_to_document_loads_back_to_the_same_topology():
    for f in sorted((ROOT / "topologies").glob("*.yaml")):
        t = load_topology(f, CATALOG)
        again = topology_from_mapping(t.to_document(CATALOG), None, {}, CATALOG)
        assert again.model_dump(exclude={"file"}) == t.model_dump(exclude={"file"}) | {
            "links": [link.model_dump() | {"line": None} for link in t.links]}


# --- override precedence -----------------------------------------------------------------------


def test_precedence_profile_link_direction(tmp_path):
    f = write(tmp_path, NODES + dedent("""\
    links:
      - between: [ap, server]
        profile: wan
        delay: 15ms
        loss: 2%
        forward: {rate: 20Mbit, delay: 30ms}
        reverse: {loss: 1%}
    """))
    link = load_topology(f, CATALOG).links[0]
    wan = PROFILES["wan"].forward
    # forward: direction > link > profile
    assert link.forward.rate_bps == 20_000_000
    assert link.forward.delay_s == pytest.approx(0.030)
    assert link.forward.loss == Loss(model="random", p=2.0)
    # reverse: link-level delay, own loss, profile rate
    assert link.reverse.rate_bps == wan.rate_bps
    assert link.reverse.delay_s == pytest.approx(0.015)
    assert link.reverse.loss == Loss(model="random", p=1.0)


def test_queue_override_replaces_the_other_unit(tmp_path):
    f = write(tmp_path, NODES + dedent("""\
    links:
      - between: [ap, server]
        queue_packets: 50
        reverse: {queue_bytes: 64KB}
    """))
    link = load_topology(f, CATALOG).links[0]
    assert (link.forward.queue_packets, link.forward.queue_bytes) == (50, None)
    assert (link.reverse.queue_packets, link.reverse.queue_bytes) == (None, 64_000)


def test_link_without_profile_and_needs_netem(tmp_path):
    f = write(tmp_path, NODES + dedent("""\
    links:
      - {between: [watch, ap], rate: 1Mbit}
      - {between: [ap, server], delay: 1ms, jitter: 1ms, reorder: true}
    """))
    t = load_topology(f, CATALOG)
    assert t.links[0].profile is None
    assert t.links[0].forward == Shape(rate_bps=1_000_000)
    assert not t.links[0].forward.needs_netem()
    assert t.links[1].forward.needs_netem() and t.links[1].reverse.reorder
    assert Shape(loss=Loss(p=0.0)).needs_netem() and Shape(queue_packets=5).needs_netem()


def test_default_name_is_file_stem(tmp_path):
    f = write(tmp_path, NODES, name="my-topo.yaml")
    assert load_topology(f, CATALOG).name == "my-topo"


def test_inline_mapping_with_prefix():
    inline = NODES + "links:\n  - {between: [watch, ap], dealy: 1ms}\n"
    src = parse_yaml("x: 1\ntopology:\n" + "".join("  " + line + "\n" for line in inline.splitlines()), "exp.yaml")
    with pytest.raises(InputError) as e:
        topology_from_mapping(src.data["topology"], "exp.yaml", src.lines, CATALOG, at=("topology",))
    [p] = e.value.problems
    assert (p.file, p.line, p.field) == ("exp.yaml", 9, "topology.links[0].dealy")
    assert "did you mean 'delay'?" in p.message


# --- bad input: file, line, field, and a useful message ---------------------------------------


def test_unknown_key_with_suggestion_and_line(tmp_path):
    p = one(tmp_path, NODES + dedent("""\
    links:
      - between: [watch, ap]
        profile: wifi-2g4-good
        dealy: 10ms
    """))
    assert (p.line, p.field) == (9, "links[0].dealy")
    assert "unknown key 'dealy'; did you mean 'delay'?" in p.message


def test_unknown_top_level_key(tmp_path):
    p = one(tmp_path, NODES + "link:\n  - {between: [watch, ap]}\n")
    assert (p.line, p.field) == (6, "link") and "did you mean 'links'?" in p.message


def test_wrong_units(tmp_path):
    found = problems(tmp_path, NODES + dedent("""\
    links:
      - between: [watch, ap]
        rate: 10Mbps
        delay: 10
        forward: {loss: 1}
        queue_bytes: 1kb
    """))
    by_field = {p.field: p for p in found}
    assert by_field["links[0].rate"].line == 8 and "'10Mbit'" in by_field["links[0].rate"].message
    assert by_field["links[0].delay"].line == 9 and "'10ms'" in by_field["links[0].delay"].message
    assert by_field["links[0].forward.loss"].line == 10 and "'1%'" in by_field["links[0].forward.loss"].message
    assert by_field["links[0].queue_bytes"].line == 11 and "'1KB'" in by_field["links[0].queue_bytes"].message
    assert len(found) == 4


def test_link_naming_absent_node(tmp_path):
    p = one(tmp_path, NODES + "links:\n  - {between: [watch, phne]}\n")
    assert (p.line, p.field) == (7, "links[0].between[1]")
    assert "'phne'" in p.message and "did you mean 'phone'?" in p.message
    assert "watch, phone, ap, server" in p.message


def test_self_link_and_duplicate_pair(tmp_path):
    found = problems(tmp_path, NODES + dedent("""\
    links:
      - {between: [watch, watch]}
      - {between: [watch, ap]}
      - {between: [ap, watch]}
    """))
    assert [(p.line, p.field) for p in found] == [(7, "links[0].between"), (9, "links[2].between")]
    assert "itself" in found[0].message
    assert "links[1]" in found[1].message and "line 8" in found[1].message


def test_unknown_profile_suggests(tmp_path):
    p = one(tmp_path, NODES + "links:\n  - {between: [watch, ap], profile: wifi-2g4-god}\n")
    assert (p.line, p.field) == (7, "links[0].profile")
    assert "did you mean 'wifi-2g4-good'?" in p.message and "bt-classic" in p.message


def test_jitter_greater_than_delay(tmp_path):
    found = problems(tmp_path, NODES + dedent("""\
    links:
      - {between: [watch, ap], profile: wifi-2g4-good, jitter: 8ms}
      - between: [phone, ap]
        delay: 1ms
        reverse: {jitter: 2ms}
    """))
    assert [(p.line, p.field) for p in found] == [(7, "links[0].jitter"), (10, "links[1].reverse.jitter")]
    assert "both directions" in found[0].message and "clip" in found[0].message
    assert "ap -> phone" in found[1].message


def test_unknown_role_suggests(tmp_path):
    p = one(tmp_path, "nodes:\n  watch: {role: wearabel}\n")
    assert (p.line, p.field) == (2, "nodes.watch.role") and "did you mean 'wearable'?" in p.message


@pytest.mark.parametrize("name", ["Watch", "1watch", "averyverylongname", "my-watch"])
def test_bad_node_name_explains_rule(tmp_path, name):
    p = one(tmp_path, f"nodes:\n  ok: {{role: ap}}\n  {name}: {{role: wearable}}\n")
    assert (p.line, p.field) == (3, f"nodes.{name}")
    assert "interface names" in p.message and "lowercase" in p.message


def test_empty_nodes(tmp_path):
    p = one(tmp_path, "nodes: {}\n")
    assert (p.line, p.field) == (1, "nodes") and "no nodes" in p.message


def test_missing_nodes(tmp_path):
    p = one(tmp_path, "name: x\nlinks: []\n")
    assert p.field == "nodes" and "missing" in p.message


def test_host_sysctl_refused(tmp_path):
    p = one(tmp_path, "nodes:\n  a:\n    role: ap\n    sysctls:\n      kernel.pid_max: 100\n")
    assert (p.line, p.field) == (5, "nodes.a.sysctls[kernel.pid_max]") and "net." in p.message


def test_sysctl_numbers_become_text(tmp_path):
    f = write(tmp_path, "nodes:\n  a: {role: ap, sysctls: {net.ipv4.ip_forward: 1}}\n")
    assert load_topology(f, CATALOG).nodes["a"].sysctls == {"net.ipv4.ip_forward": "1"}


@pytest.mark.parametrize("field, value, words", [
    ("rate", "0Mbit", "impossible"), ("delay", "-5ms", "impossible"), ("loss", "150%", "impossible"),
    ("queue_packets", "0", "impossible"), ("queue_packets", "-3", "impossible"), ("queue_bytes", "0B", "impossible"),
])
def test_negative_and_impossible_values(tmp_path, field, value, words):
    p = one(tmp_path, NODES + f"links:\n  - between: [watch, ap]\n    {field}: {value}\n")
    assert (p.line, p.field) == (8, f"links[0].{field}") and words in p.message


def test_queue_packets_and_bytes_exclusive(tmp_path):
    p = one(tmp_path, NODES + "links:\n  - {between: [watch, ap], queue_packets: 10, queue_bytes: 10KB}\n")
    assert (p.line, p.field) == (7, "links[0]") and "mutually exclusive" in p.message


def test_gilbert_elliott(tmp_path):
    f = write(tmp_path, NODES + "links:\n  - between: [watch, ap]\n    loss: {model: gilbert-elliott, p: 1%, r: 30%}\n")
    loss = load_topology(f, CATALOG).links[0].forward.loss
    assert loss == Loss(model="gilbert-elliott", p=1.0, r=30.0, bad_loss=100.0, good_loss=0.0)


@pytest.mark.parametrize("loss, words", [
    ("{model: gilbert-elliott, p: 1%}", "needs r"),
    ("{model: random, p: 1%, r: 5%}", "only apply to model: gilbert-elliott"),
    ("{model: gilbert, p: 1%, r: 5%}", "did you mean 'gilbert-elliott'?"),
    ("{model: gilbert-elliott, p: 1%, r: 5%, bad_los: 50%}", "did you mean 'bad_loss'?"),
])
def test_bad_loss_models(tmp_path, loss, words):
    p = one(tmp_path, NODES + f"links:\n  - between: [watch, ap]\n    loss: {loss}\n")
    assert p.line == 8 and p.field.startswith("links[0].loss") and words in p.message


def test_all_problems_at_once(tmp_path):
    found = problems(tmp_path, dedent("""\
    nodes:
      watch: {role: wearabel}
      Ap: {role: ap}
    links:
      - {between: [watch, ap], profile: bt-clasic, rate: 5}
    """))
    assert [p.line for p in found] == [2, 3, 5, 5, 5]
    assert {(p.line, p.field) for p in found} == {
        (2, "nodes.watch.role"), (3, "nodes.Ap"), (5, "links[0].between[1]"),
        (5, "links[0].profile"), (5, "links[0].rate")}


@pytest.mark.parametrize("text, line", [("- just\n- a list\n", 1), ("nodes:\n  a: {role: ap\n", 3)])
def test_not_a_mapping_or_broken(tmp_path, text, line):
    p = one(tmp_path, text)
    assert p.line == line


def test_empty_file(tmp_path):
    p = one(tmp_path, "")
    assert "empty" in p.message


def test_missing_file(tmp_path):
    with pytest.raises(InputError) as e:
        load_topology(tmp_path / "nope.yaml", CATALOG)
    assert e.value.problems[0].file == str(tmp_path / "nope.yaml")


def test_unreadable_file(tmp_path, monkeypatch):
    f = write(tmp_path, NODES)

    def deny(self, *a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_text", deny)
    with pytest.raises(InputError) as e:
        load_topology(f, CATALOG)
    [p] = e.value.problems
    assert p.file == str(f) and "permission" in p.message


def test_links_declare_their_medium(tmp_path):
    """A profile carries a medium, an explicit link gives one or inherits its profile's, and
    nothing is inferred from a name: a link with neither has none."""
    f = tmp_path / "t.yaml"
    f.write_text("""nodes: {watch: {role: wearable}, phone: {role: phone}, ap: {role: ap}, server: {role: server}}
links:
  - {between: [watch, phone], profile: ble}
  - {between: [watch, ap], profile: bt-classic, medium: wifi}
  - {between: [phone, ap], rate: 10Mbit}
  - {between: [ap, server], delay: 5ms, medium: wired}
""")
    t = load_topology(f, CATALOG)
    assert [l.medium.value if l.medium else None for l in t.links] == ["ble", "wifi", None, "wired"]
    again = topology_from_mapping(t.to_document(CATALOG), None, {}, CATALOG)
    assert [l.medium for l in again.links] == [l.medium for l in t.links]
    assert {p.name: p.medium.value for p in PROFILES.values()} == {
        "bt-classic": "bt", "ble": "ble", "wifi-2g4-good": "wifi", "wifi-2g4-fair": "wifi", "wifi-5g-good": "wifi",
        "wan": "wired"}


def test_an_unknown_medium_is_located(tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text("nodes: {a: {role: wearable}, b: {role: phone}}\nlinks:\n  - {between: [a, b], medium: blutooth}\n")
    with pytest.raises(InputError) as e:
        load_topology(f, CATALOG)
    [p] = e.value.problems
    assert (p.line, p.field) == (3, "links[0].medium") and "unknown medium 'blutooth'" in p.message
