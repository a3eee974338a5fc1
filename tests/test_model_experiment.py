"""Experiments: parameters fixed vs varied, cells() expansion, and located problems."""

from pathlib import Path
from textwrap import dedent

import pytest
from ruamel.yaml import YAML

from wearlab.errors import InputError
from wearlab.model.experiment_file import load_experiment
from wearlab.catalog import CATALOG

PARAMS = CATALOG.workloads["http-get"].params.names()

ROOT = Path(__file__).resolve().parents[1]
BASIC = (ROOT / "topologies" / "wearable-basic.yaml").as_posix()

INLINE = """\
topology:
  nodes:
    watch: {role: wearable}
    phone: {role: phone}
    ap: {role: ap}
    server: {role: server}
    island: {role: server}
  links:
    - {between: [watch, ap], profile: wifi-2g4-good}
    - {between: [watch, phone], profile: bt-classic}
    - {between: [phone, ap], profile: wifi-5g-good}
    - {between: [ap, server], profile: wan}
    - {between: [watch, island]}
"""


def write(tmp_path, text, name="e.yaml"):
    f = tmp_path / name
    f.write_text(dedent(text).replace("@BASIC@", BASIC))
    return f


def problems(tmp_path, text, **kw):
    f = write(tmp_path, text)
    with pytest.raises(InputError) as e:
        load_experiment(f, CATALOG, **kw)
    return e.value.problems


def one(tmp_path, text, **kw):
    found = problems(tmp_path, text, **kw)
    assert len(found) == 1, found
    return found[0]


# --- the shipped experiments -------------------------------------------------------------------


def test_quickstart():
    e = load_experiment(ROOT / "experiments" / "quickstart.yaml", CATALOG)
    assert e.name == "quickstart" and e.runtime == "auto" and e.repetitions == 5 and e.seed == 1
    assert e.timeout_s == 120.0
    assert (e.workload.kind, e.workload.client, e.workload.server) == ("http-get", "watch", "server")
    assert e.topology.name == "wearable-basic"
    assert e.matrix == {"protocol": ["http", "https"], "size": [1000, 100_000, 1_000_000],
                        "watch.interface_policy": ["wifi", "bt"]}
    assert e.fixed == {"tls_version": "1.3", "cipher": "default", "cert": "rsa2048"}
    cells = e.cells()
    assert len(cells) == 12
    assert all(set(c) == set(PARAMS) | {"watch.interface_policy"} for c in cells)
    assert {(c["watch.interface_policy"], c["path"]) for c in cells} == {("wifi", "ap"), ("bt", "phone")}
    https = [c for c in cells if c["protocol"] == "https"]
    assert len(https) == 6 and all(c["tls_version"] == "1.3" for c in https)
    assert all(c["tls_version"] == c["cipher"] == c["cert"] == "" for c in cells if c["protocol"] == "http")


@pytest.mark.parametrize("name", ["https-ciphers.yaml", "lossy-wifi.yaml"])
def test_other_examples_load(name):
    assert load_experiment(ROOT / "experiments" / name, CATALOG).cells()


def test_overrides():
    e = load_experiment(ROOT / "experiments" / "quickstart.yaml", CATALOG, repetitions=2, runtime="uml")
    assert (e.repetitions, e.runtime) == (2, "uml")


@pytest.mark.parametrize("kw, field", [({"repetitions": 0}, "--repetitions"), ({"runtime": "hots"}, "--runtime")])
def test_bad_overrides(kw, field):
    with pytest.raises(InputError) as e:
        load_experiment(ROOT / "experiments" / "quickstart.yaml", CATALOG, **kw)
    [p] = e.value.problems
    assert p.field == field and p.line is None


def test_to_document_loads_back(tmp_path):
    e = load_experiment(ROOT / "experiments" / "quickstart.yaml", CATALOG)
    f = tmp_path / "quickstart.yaml"
    with f.open("w") as out:
        YAML().dump(e.to_document(), out)
    again = load_experiment(f, CATALOG)
    assert again.cells() == e.cells()
    assert again.topology.links[3].forward == e.topology.links[3].forward
    assert again.model_dump(exclude={"file", "topology"}) == e.model_dump(exclude={"file", "topology"})


# --- cells() -----------------------------------------------------------------------------------


def test_cells_order_and_defaults(tmp_path):
    f = write(tmp_path, """\
    topology: @BASIC@
    workload: {kind: http-get, client: watch, server: server}
    matrix:
      size: [1KB, 2KB]
      path: [phone, ap]
    """)
    e = load_experiment(f, CATALOG)
    # Defaults: https, TLS 1.3, default cipher, RSA cert.
    assert e.fixed == {"protocol": "https", "tls_version": "1.3", "cipher": "default", "cert": "rsa2048"}
    # First matrix key varies slowest; within a key, the listed order.
    assert [(c["size"], c["path"]) for c in e.cells()] == [(1000, "phone"), (1000, "ap"), (2000, "phone"), (2000, "ap")]


def test_cells_http_dedup_keeps_order(tmp_path):
    f = write(tmp_path, """\
    topology: @BASIC@
    workload: {kind: http-get, client: watch, server: server, path: ap, size: 1KB}
    matrix:
      protocol: [https, http]
      tls_version: [1.2, "1.3"]
      cert: [rsa2048, ecdsa-p256]
    """)
    cells = load_experiment(f, CATALOG).cells()
    assert [(c["protocol"], c["tls_version"], c["cert"]) for c in cells] == [
        ("https", "1.2", "rsa2048"), ("https", "1.2", "ecdsa-p256"),
        ("https", "1.3", "rsa2048"), ("https", "1.3", "ecdsa-p256"),
        ("http", "", ""),
    ]
    assert cells[-1]["cipher"] == ""


def test_default_path_is_first_neighbor(tmp_path):
    f = write(tmp_path, INLINE + "workload: {kind: http-get, client: watch, server: server}\n")
    e = load_experiment(f, CATALOG)
    assert e.fixed["path"] == "ap"
    assert e.topology.name == "e-topology"


def test_tls_version_floats_and_strings(tmp_path):
    f = write(tmp_path, """\
    topology: @BASIC@
    workload: {kind: http-get, client: watch, server: server, cipher: ECDHE-RSA-AES128-SHA}
    matrix:
      tls_version: [1.0, 1.1, "1.2"]
    """)
    assert load_experiment(f, CATALOG).matrix["tls_version"] == ["1.0", "1.1", "1.2"]


def test_phone_path_relays(tmp_path):
    f = write(tmp_path, INLINE + "workload: {kind: http-get, client: watch, server: server, path: phone}\n")
    e = load_experiment(f, CATALOG)
    assert e.fixed["path"] == "phone" and e.topology.nodes["phone"].role.value == "phone"


# --- bad input ---------------------------------------------------------------------------------


def test_unknown_key_with_suggestion(tmp_path):
    p = one(tmp_path, """\
    topology: @BASIC@
    repetitons: 3
    workload: {kind: http-get, client: watch, server: server}
    """)
    assert (p.line, p.field) == (2, "repetitons") and "did you mean 'repetitions'?" in p.message


def test_matrix_size_in_kilobits(tmp_path):
    f = write(tmp_path, """\
    topology: @BASIC@
    workload: {kind: http-get, client: watch, server: server}
    matrix:
      size: [1KB, 1kb]
    """)
    with pytest.raises(InputError) as e:
        load_experiment(f, CATALOG)
    [p] = e.value.problems
    assert (p.file, p.line, p.field) == (str(f), 4, "matrix.size[1]")
    assert "'1KB'" in p.message and "kilobits" in p.message
    assert str(p) == f"{f}:4: matrix.size[1]: {p.message}"


def test_param_both_fixed_and_varied(tmp_path):
    p = one(tmp_path, """\
    topology: @BASIC@
    workload:
      kind: http-get
      client: watch
      server: server
      protocol: https
    matrix:
      protocol: [http, https]
    """)
    assert (p.line, p.field) == (8, "matrix.protocol") and "line 6" in p.message


def test_unknown_workload_parameter(tmp_path):
    p = one(tmp_path, """\
    topology: @BASIC@
    workload:
      kind: http-get
      client: watch
      server: server
      sise: 1KB
    """)
    assert (p.line, p.field) == (6, "workload.sise") and "did you mean 'size'?" in p.message


def test_unknown_matrix_parameter(tmp_path):
    p = one(tmp_path, """\
    topology: @BASIC@
    workload: {kind: http-get, client: watch, server: server}
    matrix:
      protocl: [http]
    """)
    assert (p.line, p.field) == (4, "matrix.protocl") and "did you mean 'protocol'?" in p.message


def test_unknown_kind_and_bad_values(tmp_path):
    found = problems(tmp_path, """\
    topology: @BASIC@
    runtime: hots
    repetitions: 0
    timeout: 120
    workload:
      kind: http-got
      client: watch
      server: server
      protocol: htps
      cert: rsa4096
    """)
    by_field = {p.field: p for p in found}
    assert by_field["runtime"].line == 2 and "did you mean 'host'?" in by_field["runtime"].message
    assert by_field["repetitions"].line == 3 and "impossible" in by_field["repetitions"].message
    assert by_field["timeout"].line == 4 and "'120s'" in by_field["timeout"].message
    assert by_field["workload.kind"].line == 6 and "did you mean 'http-get'?" in by_field["workload.kind"].message
    assert by_field["workload.protocol"].line == 9 and "did you mean 'https'?" in by_field["workload.protocol"].message
    assert by_field["workload.cert"].line == 10 and "rsa2048" in by_field["workload.cert"].message
    assert len(found) == 6


def test_client_server_must_exist(tmp_path):
    p = one(tmp_path, """\
    topology: @BASIC@
    workload: {kind: http-get, client: wach, server: server}
    """)
    assert (p.line, p.field) == (2, "workload.client") and "did you mean 'watch'?" in p.message


def test_path_must_be_a_neighbor(tmp_path):
    p = one(tmp_path, """\
    topology: @BASIC@
    workload: {kind: http-get, client: watch, server: server}
    matrix:
      path: [ap, server]
    """)
    assert (p.line, p.field) == (4, "matrix.path[1]") and "phone, ap" in p.message


def test_path_must_reach_server(tmp_path):
    p = one(tmp_path, INLINE + "workload: {kind: http-get, client: watch, server: server, path: island}\n")
    assert (p.line, p.field) == (14, "workload.path") and "cannot be reached" in p.message


def test_tls_only_params_varied_under_http(tmp_path):
    p = one(tmp_path, """\
    topology: @BASIC@
    workload: {kind: http-get, client: watch, server: server, protocol: http}
    matrix:
      cert: [rsa2048, ecdsa-p256]
    """)
    assert (p.line, p.field) == (4, "matrix.cert") and "no effect" in p.message


def test_cipher_version_conflicts(tmp_path):
    found = problems(tmp_path, """\
    topology: @BASIC@
    workload: {kind: http-get, client: watch, server: server, tls_version: 1.2}
    matrix:
      cipher: [ECDHE-RSA-AES128-SHA, TLS_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA265]
    """)
    assert {(p.line, p.field) for p in found} == {(4, "matrix.cipher[1]"), (4, "matrix.cipher[2]")}
    messages = {p.field: p.message for p in found}
    assert "TLS 1.3 suite" in messages["matrix.cipher[1]"]
    assert "did you mean 'TLS_AES_128_GCM_SHA256'?" in messages["matrix.cipher[2]"]


def test_duplicate_and_empty_matrix_values(tmp_path):
    found = problems(tmp_path, """\
    topology: @BASIC@
    workload: {kind: http-get, client: watch, server: server}
    matrix:
      size: [1KB, 1000]
      path: []
    """)
    assert {(p.line, p.field) for p in found} == {(4, "matrix.size[1]"), (5, "matrix.path")}


def test_missing_topology_file_reported_at_topology_line(tmp_path):
    f = write(tmp_path, """\
    name: x
    topology: ../nothere.yaml
    workload: {kind: http-get, client: watch, server: server}
    """)
    with pytest.raises(InputError) as e:
        load_experiment(f, CATALOG)
    [p] = e.value.problems
    assert (p.file, p.line, p.field) == (str(f), 2, "topology") and "not found" in p.message


def test_topology_problems_reported_against_topology_file(tmp_path):
    (tmp_path / "topologies").mkdir()
    (tmp_path / "experiments").mkdir()
    topo = tmp_path / "topologies" / "t.yaml"
    topo.write_text("nodes:\n  watch: {role: wearable}\n  server: {role: server}\n"
                    "links:\n  - {between: [watch, server], dealy: 5ms}\n")
    f = write(tmp_path / "experiments", """\
    topology: ../topologies/t.yaml
    workload: {kind: http-get, client: watch, server: server, size: 1kb}
    """)
    with pytest.raises(InputError) as e:
        load_experiment(f, CATALOG)
    by_file = {p.file: p for p in e.value.problems}
    assert len(e.value.problems) == 2
    assert (by_file[str(f)].line, by_file[str(f)].field) == (2, "workload.size")
    tp = by_file[str(topo)]
    assert (tp.line, tp.field) == (5, "links[0].dealy") and "did you mean 'delay'?" in tp.message


def test_inline_topology_problems_reported_in_experiment(tmp_path):
    p = one(tmp_path, INLINE.replace("wifi-5g-good", "wifi-5g-gut")
            + "workload: {kind: http-get, client: watch, server: server}\n")
    assert (p.line, p.field) == (11, "topology.links[2].profile") and "did you mean 'wifi-5g-good'?" in p.message


def test_missing_workload(tmp_path):
    p = one(tmp_path, "topology: @BASIC@\n")
    assert p.field == "workload" and "missing" in p.message


@pytest.mark.parametrize("text, line", [("", None), ("- a\n", 1), ("topology: [\n", 2)])
def test_empty_list_or_broken_file(tmp_path, text, line):
    p = one(tmp_path, text)
    assert p.line == line


def test_missing_experiment_file(tmp_path):
    with pytest.raises(InputError) as e:
        load_experiment(tmp_path / "nope.yaml", CATALOG)
    assert "not found" in e.value.problems[0].message
