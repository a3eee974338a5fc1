"""HAR import (issue 23, model/har.py): a HAR saved by a real headless Chromium here
(tests/fixtures/har/, its README says how) becomes a page that checks, with the origins, objects,
sizes and dependencies the HAR holds - stated below by hand from the fixture, not from the
importer - and the importer's rules (sizes as transferred, `_initiator`, the root without it)
hold on small HARs written here. Host-side, no network."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from rich.console import Console

from wearlab.errors import InputError
from wearlab.model.har import HarError, har_page_document
from wearlab.model.page import critical_path, load_page_file, page_file_from_mapping
from wearlab.report.page_commands import import_har, page_import

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "har" / "three-origins.har"

# By hand, from the fixture (and tests/fixtures/har/README.md): URL -> (host, body bytes, the URL
# its _initiator names, or None for the root).
# The hosts are IP addresses, so the origins get no host: and replay under their names
# (model/har.py: an IP address is no host name), each said in a note.
A, B, C = "ip1270058305", "ip1270058263", "ip1270052625"
RECORDED = {A: "http://127.0.0.1:58305", B: "http://127.0.0.2:58263", C: "http://127.0.0.3:52625"}
EXPECTED = {
    "/index.html": (A, 2000, None),
    "/style.css": (A, 1500, "/index.html"),
    "/app.js": (B, 3000, "/index.html"),
    "/img/logo.png": (A, 5000, "/index.html"),
    "/photo.jpg": (C, 12000, "/index.html"),
    "/api/data.json": (A, 700, "/app.js"),         # the script's fetch(): a script initiator
    "/img/bg.png": (A, 4000, "/style.css"),         # the stylesheet's url()
}


def har_json() -> dict:
    return json.loads(FIXTURE.read_text())


def load(doc: dict):
    return page_file_from_mapping(doc, "<har>", {})


def test_the_fixture_is_chromiums():
    log = har_json()["log"]
    assert log["version"] == "1.2" and "Chromium" in log["browser"]["version"]
    assert all("_initiator" in e for e in log["entries"])


def test_the_fixture_imports_into_the_page_it_holds():
    made = har_page_document(har_json(), name="three-origins")
    page = load(made.document).page
    assert page.name == "three-origins"
    assert sorted(o.name for o in page.origins) == sorted([A, B, C])
    assert all(o.host is None for o in page.origins)
    assert len(page.objects) == len(EXPECTED) == 7
    for obj in page.objects:
        want_origin, want_size, want_parent = EXPECTED[obj.path]
        assert obj.origin == want_origin, obj.path
        assert obj.size == want_size, obj.path
        parent = None if obj.parent is None else page.objects[obj.parent].path
        assert parent == want_parent, obj.path
    assert page.root.path == "/index.html" and page.root.type == "text/html"
    assert page.total_bytes == 28_200
    types = {o.path: o.type for o in page.objects}
    assert types["/app.js"] == "text/javascript" and types["/api/data.json"] == "application/json"
    assert types["/photo.jpg"] == "image/jpeg"
    # The longest chain by bytes: the document, then the 12,000 B photo.
    assert [o.path for o in critical_path(page)] == ["/index.html", "/photo.jpg"]
    # Compute times from the gaps (by hand: index.html ends at 23.378 + 0.149784 s, style.css starts at 23.552 s).
    assert page.root.compute_s == pytest.approx(0.0242, abs=1e-4)
    # What the browser saw: http.server closes every connection (7), 3 servers, 29,522 B transferred.
    assert (page.observed.connections, page.observed.servers, page.observed.bytes) == (7, 3, 29_522)
    assert made.notes == [f"origin {o} was {RECORDED[o]} (an IP address, no host name): replayed as host {o}"
                          for o in (A, B, C)]


def test_page_import_writes_a_page_file_that_loads(tmp_path):
    out = tmp_path / "imported.yaml"
    console = Console(width=200, record=True)
    assert page_import(str(FIXTURE), str(out), console) == 0
    pf = load_page_file(out)
    assert pf.name == "three-origins" and len(pf.page.objects) == 7 and pf.page.total_bytes == 28_200
    assert out.read_text().startswith("# Imported by `wearlab page import` from three-origins.har")
    assert "7 objects" in console.export_text()


def test_page_import_to_stdout(tmp_path):
    import io
    buf = io.StringIO()
    assert page_import(str(FIXTURE), None, Console(file=io.StringIO()), name="mine", stdout=buf) == 0
    (tmp_path / "x.yaml").write_text(buf.getvalue())
    assert load_page_file(tmp_path / "x.yaml").name == "mine"


# ---------------------------------------------------------------------------------------------
# The importer's rules, on small HARs


def entry(url: str, start: str, *, body: int = 1000, decoded: int | None = None, mime: str = "text/html",
          initiator: dict | None = None, status: int = 200, time: float = 10, page: str = "p1") -> dict:
    e = {"pageref": page, "startedDateTime": start, "time": time,
         "request": {"method": "GET", "url": url},
         "response": {"status": status, "bodySize": body, "headersSize": 100,
                      "content": {"size": body if decoded is None else decoded, "mimeType": mime}}}
    if initiator is not None:
        e["_initiator"] = initiator
    return e


def har(*entries: dict, pages: tuple[str, ...] = ("p1",)) -> dict:
    return {"log": {"version": "1.2", "creator": {"name": "test", "version": "1"},
                    "pages": [{"id": p, "title": p} for p in pages], "entries": list(entries)}}


def test_sizes_are_the_transferred_ones_else_the_decoded():
    doc = har_page_document(har(
        entry("https://www.example.com/", "2024-01-01T00:00:00.000Z", body=3000, decoded=12000),  # gzip: 3000 on the wire
        entry("https://www.example.com/a.js", "2024-01-01T00:00:00.100Z", body=-1, decoded=5000, mime="text/javascript"),
        entry("https://www.example.com/b.css", "2024-01-01T00:00:00.200Z", body=0, decoded=700, mime="text/css"),
    ), name="sizes").document
    assert [o.size for o in load(doc).page.objects] == [3000, 5000, 700]


def test_without_initiators_every_object_depends_on_the_root():
    doc = har(
        entry("https://www.example.com/", "2024-01-01T00:00:00.000Z"),
        entry("https://static.example.com/app.js", "2024-01-01T00:00:00.100Z", mime="text/javascript"),
        entry("https://static.example.com/data.json", "2024-01-01T00:00:00.300Z", mime="application/json"),
    )
    made = har_page_document(doc, name="firefox")
    page = load(made.document).page
    assert [o.parent for o in page.objects] == [None, 0, 0]
    assert [o.name for o in page.origins] == ["example", "staticexampl"]
    assert any("no _initiator" in n for n in made.notes)


def test_script_initiators_follow_the_stack_and_its_parents():
    root = "https://www.example.com/"
    made = har_page_document(har(
        entry(root, "2024-01-01T00:00:00.000Z", time=50),
        entry("https://cdn.example.net/lib.js", "2024-01-01T00:00:00.060Z", mime="text/javascript",
              initiator={"type": "parser", "url": root}, time=20),
        entry("https://api.example.org/x.json", "2024-01-01T00:00:00.100Z", mime="application/json",
              initiator={"type": "script", "stack": {"callFrames": [{"url": ""}],
                                                      "parent": {"callFrames": [{"url": "https://cdn.example.net/lib.js"}]}}}),
        # An initiator that started later than the object itself: the root instead.
        entry("https://www.example.com/early.png", "2024-01-01T00:00:00.150Z", mime="image/png",
              initiator={"type": "parser", "url": "https://www.example.com/late.css"}),
        entry("https://www.example.com/late.css", "2024-01-01T00:00:00.200Z", mime="text/css",
              initiator={"type": "parser", "url": root}),
    ), name="stacks")
    page = load(made.document).page
    assert [o.parent for o in page.objects] == [None, 0, 1, 0, 0]
    # lib.js ended at 0.080 s and its fetch started at 0.100 s: 20 ms of compute; the root's
    # children started 10 ms after it ended.
    assert page.objects[1].compute_s == pytest.approx(0.020)
    assert page.root.compute_s == pytest.approx(0.010)
    assert [o.name for o in page.origins] == ["example", "cdnexample", "apiexample"]


def test_dropped_entries_and_repeats_are_noted():
    made = har_page_document(har(
        entry("https://www.example.com/", "2024-01-01T00:00:00.000Z"),
        entry("data:image/png;base64,AAAA", "2024-01-01T00:00:00.010Z"),
        entry("https://www.example.com/blocked.js", "2024-01-01T00:00:00.020Z", status=0),
        entry("https://www.example.com/a.png", "2024-01-01T00:00:00.030Z", mime="image/png"),
        entry("https://www.example.com/a.png", "2024-01-01T00:00:00.040Z", mime="image/png"),
    ), name="drops")
    assert len(load(made.document).page.objects) == 2
    assert any("2 entries dropped" in n for n in made.notes)
    assert any("fetched again" in n for n in made.notes)


def test_several_har_pages_become_a_session():
    made = har_page_document(har(
        entry("http://bouer.local/login", "2024-01-01T00:00:00.000Z", page="p1"),
        entry("http://bouer.local/display", "2024-01-01T00:00:01.000Z", page="p2"),
        entry("http://bouer.local/dashboard", "2024-01-01T00:00:02.000Z", page="p3"),
        pages=("p1", "p2", "p3")), name="session")
    pf = load(made.document)
    assert [p.name for p in pf.sequence()] == ["login", "display", "dashboard"]
    assert pf.session is not None and pf.session.pool == "shared"
    assert [o.name for o in pf.origins] == ["bouer"]


def test_same_host_other_port_is_another_origin():
    made = har_page_document(har(
        entry("http://www.example.com/", "2024-01-01T00:00:00.000Z"),
        entry("http://www.example.com:8080/", "2024-01-01T00:00:00.100Z"),
    ), name="ports")
    page = load(made.document).page
    # the replay serves both on its servers' standard ports: one host name, two origins (nodes)
    assert [(o.name, o.host) for o in page.origins] == [("example", "www.example.com"),
                                                       ("example8080", "www.example.com")]
    assert made.notes[0] == ("origin example8080 was http://www.example.com:8080: replayed as www.example.com on "
                             "its server's standard port")
    assert page.objects[1].ref == "example8080:/"


def test_not_a_har(tmp_path):
    with pytest.raises(HarError, match="no log.entries"):
        har_page_document({"log": {}}, name="x")
    with pytest.raises(HarError, match="nothing to make a page of"):
        har_page_document(har(entry("ftp://x/", "2024-01-01T00:00:00Z")), name="x")
    bad = tmp_path / "bad.har"
    bad.write_text('{"log":\n  {"entries": [,]}}')
    with pytest.raises(InputError) as e:
        import_har(bad)
    assert (e.value.problems[0].file, e.value.problems[0].line) == (str(bad), 2)
    notahar = tmp_path / "x.har"
    notahar.write_text("[]")
    with pytest.raises(InputError) as e:
        import_har(notahar)
    assert "not a HAR" in str(e.value)


def test_the_fixture_without_initiators_still_loads():
    data = copy.deepcopy(har_json())
    for e in data["log"]["entries"]:
        del e["_initiator"]
    page = load(har_page_document(data, name="plain").document).page
    assert all(o.parent == 0 for o in page.objects[1:]) and page.total_bytes == 28_200


def test_page_commands_on_the_command_line(tmp_path):
    """`wearlab page import` writes a page that `wearlab page check` accepts; a bad page file exits
    2 naming file, line and field, with no traceback."""
    from conftest import ROOT, wearlab

    har = ROOT / "tests" / "fixtures" / "har" / "three-origins.har"
    out = tmp_path / "page.yaml"
    res = wearlab("page", "import", str(har), "-o", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    res = wearlab("page", "check", str(out), *map(str, sorted((ROOT / "experiments" / "pages").glob("*.yaml"))))
    assert res.returncode == 0, res.stdout + res.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("origins: [a]\nobjects:\n  - {path: /, size: -3}\n")
    res = wearlab("page", "check", str(bad))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"{bad}:3: objects[0].size:" in res.stderr, res.stderr


def test_the_imported_fixture_plans_as_a_page_load(tmp_path):
    """`wearlab page import` of Chromium's HAR gives a page the page-load workload plans: its three
    origins (IP addresses in the recording, so replayed under their names) mapped onto
    topologies/pages-wifi.yaml's two servers; and each server serves its origins' objects at their
    recorded sizes."""
    from conftest import ROOT, wearlab

    page = tmp_path / "three-origins.yaml"
    res = wearlab("page", "import", str(FIXTURE), "-o", str(page))
    assert res.returncode == 0, res.stdout + res.stderr
    exp = tmp_path / "imported.yaml"
    exp.write_text(f"""name: imported
topology: {ROOT / "topologies" / "pages-wifi.yaml"}
repetitions: 1
workload:
  kind: page-load
  client: watch
  page: three-origins.yaml
  servers: {{{A}: www, {B}: static, {C}: static}}
matrix:
  http_version: [1.1, 2, 3]
""")
    res = wearlab("plan", str(exp), "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    plan = json.loads(res.stdout)
    served = {n["node"]: sorted((o[0], o[1], o[2]) for o in n["objects"]) for n in plan["needs"]
              if n["need"] == "pagecontent"}
    assert served == {
        "www": sorted((A, p, size) for p, (o, size, _) in EXPECTED.items() if o == A),
        "static": sorted((o, p, size) for p, (o, size, _) in EXPECTED.items() if o in (B, C)),
    }, served


CADDY_FIXTURE = FIXTURE.parent / "two-origins-caddy.har"


def test_the_caddy_fixture_keeps_its_host_names_without_ports():
    """The same page from Caddy on two named origins (tests/fixtures/har/README.md, by hand): host
    names kept, ports dropped (noted), keep-alive connections counted as the browser used them."""
    made = har_page_document(json.loads(CADDY_FIXTURE.read_text()), name="two")
    page = load(made.document).page
    assert [(o.name, o.host) for o in page.origins] == [("www60791", "www.test"), ("cdn44815", "cdn.test")]
    host = {o.name: o.host for o in page.origins}
    on_cdn = {"/app.js", "/photo.jpg"}
    for obj in page.objects:
        _, want_size, want_parent = EXPECTED[obj.path]
        assert host[obj.origin] == ("cdn.test" if obj.path in on_cdn else "www.test"), obj.path
        assert obj.size == want_size, obj.path
        assert (None if obj.parent is None else page.objects[obj.parent].path) == want_parent, obj.path
    assert page.total_bytes == 28_200 and page.observed.connections == 4 and page.observed.servers == 2
    assert made.notes == [f"origin {n} was http://{h}:{p}: replayed as {h} on its server's standard port"
                          for n, h, p in (("www60791", "www.test", 60791), ("cdn44815", "cdn.test", 44815))]
