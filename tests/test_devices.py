"""Devices (wearlab.model.devices): the built-in ones against the papers they cite, the schema's
problems located at file:line:field (inline in a topology, in an experiment's inline topology, in a
devices file of their own), `device:` on a node resolved by the plan, `wearlab devices`, and the
profile the mechanism reads."""

import os
from pathlib import Path
from textwrap import dedent, indent

import pytest

from conftest import wearlab
from wearlab.catalog import CATALOG
from wearlab.errors import InputError
from wearlab.model.devices import BASES, KEY_OPS, builtin_devices
from wearlab.model.experiment_file import load_experiment
from wearlab.model.topology import load_topology
from wearlab.plan.plan import plan

ROOT = Path(__file__).resolve().parents[1]

NODES = """\
nodes:
  watch:  {role: wearable, device: DEVICE}
  ap:     {role: ap}
  server: {role: server}
links:
  - {between: [watch, ap], profile: wifi-2g4-good}
  - {between: [ap, server], profile: wan}
"""

EXPERIMENT = """\
topology: topo.yaml
repetitions: 1
workload: {kind: http-get, client: watch, server: server, path: ap}
"""


def write(tmp_path, name, text):
    f = tmp_path / name
    f.write_text(text)
    return f


def line_of(text: str, needle: str) -> int:
    """1-based line of the first line containing `needle` in `text`."""
    for i, l in enumerate(text.splitlines(), 1):
        if needle in l:
            return i
    raise AssertionError(f"{needle!r} not in the text")


def problems_of(path: Path, load=lambda p: load_topology(p, CATALOG)):
    with pytest.raises(InputError) as e:
        load(path)
    return e.value.problems


# --- the built-in devices against their papers ------------------------------------------------


def test_every_number_says_where_it_comes_from():
    for d in builtin_devices().values():
        for c in (*d.costs.values(), d.handshake):
            assert c.basis in BASES and len(c.source) > 20, (d.name, c.key)
            assert all(t >= 0 for _, t in c.points)
        assert d.cpu_factor.basis in BASES and d.cpu_factor.value >= 1
        assert d.hardware is not None and d.hardware.source


def test_seed_002_tables_are_the_thesis_numbers():
    # Table 5.3 (RSA 2048 sign 23.1/s, verify 773.9/s), Table 5.2 (ECDH P-256 150.8/s: 6.6 ms, the
    # thesis's "secp160r1 2.6 ms ... nistb571 129.9 ms" range), Table 5.1 (SHA256 at 8192 B, 1000s of bytes/s).
    d = builtin_devices()["vehicle-embedded-computer"]
    assert 1 / d.cost("sign:rsa2048").seconds() == pytest.approx(23.1)
    assert 1 / d.cost("verify:rsa2048").seconds() == pytest.approx(773.9)
    assert d.cost("derive:p256").seconds() == pytest.approx(0.00663, rel=0.01)
    assert 8192 / d.cost("digest:sha256").seconds(8192) == pytest.approx(34417.32e3)
    for key in ("sign:rsa2048", "derive:p256", "digest:sha256", "cipher:aes-128-cbc"):
        assert d.cost(key).basis == "measured" and "seed 002" in d.cost(key).source


def test_seed_001_watch_rsa_and_the_derived_rest():
    sw3 = builtin_devices()["sony-smartwatch-3"]
    ecu = builtin_devices()["vehicle-embedded-computer"]
    assert sw3.cost("verify:rsa2048").seconds() == pytest.approx(0.0025)       # "around 2.5 ms for a Smart Watch"
    assert sw3.cost("sign:rsa2048").seconds() == pytest.approx(0.035)          # "35 ms" on Android Wear
    k = 0.035 / ecu.cost("sign:rsa2048").seconds()                             # the stated scale, 0.8085
    assert k == pytest.approx(0.8085, abs=0.0005)
    assert sw3.cost("derive:p256").seconds() == pytest.approx(ecu.cost("derive:p256").seconds() * 0.8085)
    assert sw3.cost("derive:p256").basis == "derived"


def test_watch_handshake_is_seed_000s_client_share_minus_its_primitives():
    # Seed 000: ~147 ms handshake, ~87 % of it the client's validation and key computation. The
    # platform cost is what the watch's primitives (ECDHE-RSA, RSA-2048 server and CA) leave of it.
    w = builtin_devices()["lg-g-watch-r"]
    primitives = (2 * w.cost("verify:rsa2048").seconds() + w.cost("keygen:p256").seconds()
                  + w.cost("derive:p256").seconds())
    assert w.handshake.seconds() == pytest.approx(0.87 * 0.147 - primitives, abs=0.0001)
    assert builtin_devices()["sony-smartwatch-3"].handshake.seconds() == w.handshake.seconds()


def test_cores_and_the_resumed_handshake_say_where_they_come_from():
    """Each built-in device's cores (seed 000 Table I: the watch quad-core, the glass dual-core)
    and its platform cost per resumed handshake, each with its basis."""
    d = builtin_devices()
    assert {n: x.cores.value for n, x in d.items()} == {
        "vehicle-embedded-computer": 1, "sony-smartwatch-3": 4, "lg-g-watch-r": 4, "google-glass-explorer": 2,
        "galaxy-s4": 4, "nexus-4": 4}
    assert d["lg-g-watch-r"].cores.basis == "measured" and "quad-core" in d["lg-g-watch-r"].cores.source
    for x in d.values():
        assert x.cores.basis in BASES and len(x.cores.source) > 20
        assert x.resumed.basis in BASES and len(x.resumed.source) > 20
        assert x.resumed.seconds() <= x.handshake.seconds()
    # The watch's: its platform cost x the share of its client primitives a resumption still does
    # (keygen + derive p256, 6.83 of 11.83 ms); no seed times one, so it is assumed.
    w = d["lg-g-watch-r"]
    assert w.resumed.seconds() == pytest.approx(0.11606 * 6.83 / 11.83, abs=1e-5)
    assert w.resumed.basis == "assumed"
    assert f"resumed_handshake_ns {round(w.resumed.seconds() * 1e9)}" in w.profile_text()


def test_like_scales_every_operation_and_marks_assumptions():
    watch, glass = builtin_devices()["lg-g-watch-r"], builtin_devices()["google-glass-explorer"]
    for key, c in watch.costs.items():
        assert glass.cost(key).seconds(8192) == pytest.approx(c.seconds(8192) * 1.2)
        assert glass.cost(key).basis == "assumed"       # the glass's scale is an assumption
    assert glass.handshake.seconds() == pytest.approx(watch.handshake.seconds() * 1.2)


def test_power_figures_per_state_and_medium():
    w = builtin_devices()["lg-g-watch-r"]
    assert w.power.battery.mah == 410
    assert w.power.measured_on == "wifi"
    assert w.power.levels["handshake"].mw == pytest.approx(405.22)
    assert w.power.levels["tail"].duration == pytest.approx(0.2)
    assert w.power.radios["bt"].active.ma == 64 and w.power.radios["bt"].active.basis == "assumed"
    assert w.power.radios["bt"].active.watts == pytest.approx(0.064 * 3.8)
    assert builtin_devices()["nexus-4"].power.radios["wifi"].active.volts == 4.0


def test_profile_text_is_what_the_mechanism_reads():
    w = builtin_devices()["lg-g-watch-r"]
    lines = {l.split()[1]: l.split()[2:] for l in w.profile_text().splitlines() if l.split()[0] in ("op", "bytes")}
    assert lines["verify:rsa2048"] == ["2500000"]
    assert set(lines) == set(w.costs)
    pts = [tuple(map(int, p.split(":"))) for p in lines["digest:sha256"]]
    assert [s for s, _ in pts] == [16, 64, 256, 1024, 8192]
    assert pts[-1][1] == round(w.cost("digest:sha256").seconds(8192) * 1e9)
    assert f"handshake_ns {round(w.handshake.seconds() * 1e9)}" in w.profile_text()


def test_interpolation_between_and_beyond_the_table():
    c = builtin_devices()["vehicle-embedded-computer"].cost("digest:sha256")
    t = dict(c.points)
    assert c.seconds(640) == pytest.approx(t[256] + (t[1024] - t[256]) * (640 - 256) / 768)
    assert c.seconds(16384) == pytest.approx(t[8192] + (t[8192] - t[1024]) * 8192 / 7168)
    assert c.seconds(8) == pytest.approx(t[16] / 2)


# --- a node names a device; the plan resolves it -----------------------------------------------


def test_plan_resolves_a_builtin_device(tmp_path):
    write(tmp_path, "topo.yaml", NODES.replace("DEVICE", "lg-g-watch-r"))
    p = plan(load_experiment(write(tmp_path, "exp.yaml", EXPERIMENT), CATALOG))
    assert p.device_of("watch").name == "lg-g-watch-r"
    assert p.device_of("server") is None
    assert p.to_document()["devices"]["watch"]["device"] == "lg-g-watch-r"
    assert "devicecpu" in p.builds()


def test_without_devices_nothing_is_slowed(tmp_path):
    write(tmp_path, "topo.yaml", NODES.replace(", device: DEVICE", ""))
    p = plan(load_experiment(write(tmp_path, "exp.yaml", EXPERIMENT), CATALOG))
    assert p.devices == {} and p.to_document()["devices"] == {}
    assert "devicecpu" not in p.builds()


def test_unknown_device_is_located_by_the_plan(tmp_path):
    text = NODES.replace("DEVICE", "lg-g-watch")
    topo = write(tmp_path, "topo.yaml", text)
    exp = load_experiment(write(tmp_path, "exp.yaml", EXPERIMENT), CATALOG)
    with pytest.raises(InputError) as e:
        plan(exp)
    [p] = e.value.problems
    assert (p.file, p.line, p.field) == (str(topo), line_of(text, "watch:"), "nodes.watch.device")
    assert "unknown device 'lg-g-watch'" in p.message and "did you mean 'lg-g-watch-r'" in p.message


def test_user_device_inline_like_a_builtin_one(tmp_path):
    text = dedent("""\
    devices:
      my-watch:
        description: a watch twice as slow as the LG
        like: {device: lg-g-watch-r, scale: 2, assumed: "a test"}
        keys:
          rsa2048: {verify: {time: 4ms, measured: "a bench of my own"}}
    """) + NODES.replace("DEVICE", "my-watch")
    write(tmp_path, "topo.yaml", text)
    p = plan(load_experiment(write(tmp_path, "exp.yaml", EXPERIMENT), CATALOG))
    d, lg = p.device_of("watch"), builtin_devices()["lg-g-watch-r"]
    assert d.cost("verify:rsa2048").seconds() == pytest.approx(0.004)
    assert d.cost("derive:p256").seconds() == pytest.approx(2 * lg.cost("derive:p256").seconds())
    assert d.handshake.seconds() == pytest.approx(2 * lg.handshake.seconds())
    assert d.defined_in == str(tmp_path / "topo.yaml")


def test_devices_file_by_path_relative_to_the_topology(tmp_path):
    (tmp_path / "hw").mkdir()
    write(tmp_path, "hw/devices.yaml", dedent("""\
    band:
      hardware: {cpu: "Cortex-M4 64 MHz", assumed: "a test"}
      keys:
        p256: {derive: {time: 400ms, assumed: "a test"}}
      handshake: {time: 0ms, assumed: "a test"}
      cpu_factor: {value: 200, assumed: "a test"}
    """))
    write(tmp_path, "topo.yaml", "devices: hw/devices.yaml\n" + NODES.replace("DEVICE", "band"))
    p = plan(load_experiment(write(tmp_path, "exp.yaml", EXPERIMENT), CATALOG))
    assert p.device_of("watch").cost("derive:p256").seconds() == pytest.approx(0.4)


# --- the schema's problems, each at its file, line and field -----------------------------------


@pytest.mark.parametrize("device,needle,field,message", [
    ("""\
      w:
        keys:
          rsa2048: {sign: {time: 35ms}}
        handshake: {time: 1ms, assumed: x}
        cpu_factor: {value: 2, assumed: x}
    """, "rsa2048", "devices.w.keys.rsa2048.sign", "exactly one of measured: / derived: / assumed:"),
    ("""\
      w:
        keys:
          rsa2049: {sign: {time: 35ms, measured: x}}
        handshake: {time: 1ms, assumed: x}
        cpu_factor: {value: 2, assumed: x}
    """, "keys:", "devices.w.keys", "unknown key type 'rsa2049'"),
    ("""\
      w:
        digests:
          sha265: {kbytes_per_s: {16: 1}, measured: x}
        handshake: {time: 1ms, assumed: x}
        cpu_factor: {value: 2, assumed: x}
    """, "digests:", "devices.w.digests", "did you mean 'sha256'"),
    ("""\
      w:
        keys:
          p256: {derive: {time: 6, measured: x}}
        handshake: {time: 1ms, assumed: x}
        cpu_factor: {value: 2, assumed: x}
    """, "p256", "devices.w.keys.p256.derive.time", "'6' has no unit; write '6ms'"),
    ("""\
      w:
        keys:
          p256: {derive: {time: 6ms, per_s: 150, measured: x}}
        handshake: {time: 1ms, assumed: x}
        cpu_factor: {value: 2, assumed: x}
    """, "p256", "devices.w.keys.p256.derive", "exactly one"),
    ("""\
      w:
        like: {device: lg-g-wach-r, scale: 1, derived: x}
    """, "like:", "devices.w.like.device", "did you mean 'lg-g-watch-r'"),
    ("""\
      a:
        like: {device: b, scale: 1, derived: x}
      b:
        like: {device: a, scale: 1, derived: x}
    """, "like: {device: a", "devices.b.like.device", "cannot be derived from itself"),
    ("""\
      w:
        keys: {}
        cpu_factor: {value: 2, assumed: x}
    """, "w:", "devices.w", "missing 'handshake:'"),
    ("""\
      w:
        handshake: {time: 1ms, assumed: x}
        cpu_factor: {value: 0.5, assumed: x}
    """, "cpu_factor", "devices.w.cpu_factor.value", "must be at least 1"),
    ("""\
      w:
        handshake: {time: 1ms, assumed: x}
        cpu_factor: {value: 2, assumed: x}
        power:
          radios: {wlan: {active: {mw: 1, assumed: x}}}
    """, "radios:", "devices.w.power.radios", "unknown medium 'wlan'"),
    ("""\
      w:
        handshake: {time: 1ms, assumed: x}
        cpu_factor: {value: 2, assumed: x}
        power:
          measured_on: wifi
          levels: {handshake: {mw: 1, assumed: x}, data: {mw: 2, assumed: x}, tial: {mw: 1, assumed: x}}
    """, "levels:", "devices.w.power.levels", "unknown state 'tial'"),
    ("""\
      w:
        handshake: {time: 1ms, assumed: x}
        cpu_factor: {value: 2, assumed: x}
        power:
          levels: {handshake: {mw: 1, assumed: x}, data: {mw: 2, assumed: x}, tail: {mw: 1, duration: 1s, assumed: x}}
    """, "power:", "devices.w.power", "need measured_on:"),
    ("""\
      w:
        handshake: {time: 1ms, assumed: x}
        cpu_factor: {value: 2, assumed: x}
        power:
          measured_on: wifi
          levels: {handshake: {mw: 1, assumed: x}, data: {ma: 2, assumed: x}, tail: {mw: 1, duration: 1s, assumed: x}}
    """, "data:", "devices.w.power.levels.data", "needs volts:"),
    ("""\
      lg-g-watch-r:
        like: {device: nexus-4, scale: 1, derived: x}
    """, "lg-g-watch-r:", "devices.lg-g-watch-r", "is a built-in device"),
    ("""\
      W1:
        handshake: {time: 1ms, assumed: x}
        cpu_factor: {value: 2, assumed: x}
    """, "W1:", "devices.W1", "bad device name"),
    ("""\
      w:
        handshake: {time: 1ms, assumed: x}
        cpu_factor: {value: 2, assumed: x}
        cores: {value: 0, assumed: x}
    """, "cores:", "devices.w.cores.value", "must be at least 1"),
    ("""\
      w:
        handshake: {time: 1ms, assumed: x}
        resumed_handshake: {time: 1ms}
        cpu_factor: {value: 2, assumed: x}
    """, "resumed_handshake:", "devices.w.resumed_handshake", "exactly one of measured"),
])
def test_schema_problems_are_located(tmp_path, device, needle, field, message):
    text = "devices:\n" + indent(dedent(device), "  ") + NODES.replace(", device: DEVICE", "")
    topo = write(tmp_path, "topo.yaml", text)
    found = problems_of(topo)
    assert len(found) == 1, found
    [p] = found
    assert (p.file, p.field) == (str(topo), field), p
    assert p.line == line_of(text, needle), p
    assert message in p.message, p


def test_problems_in_a_devices_file_are_located_there(tmp_path):
    body = dedent("""\
    band:
      keys:
        p256: {derive: {time: 400ms, maesured: typo}}
      handshake: {time: 0ms, assumed: "a test"}
      cpu_factor: {value: 200, assumed: "a test"}
    """)
    devices = write(tmp_path, "devices.yaml", body)
    write(tmp_path, "topo.yaml", "devices: devices.yaml\n" + NODES.replace("DEVICE", "band"))
    found = problems_of(tmp_path / "topo.yaml")
    assert {p.file for p in found} == {str(devices)}
    assert all(p.line == line_of(body, "p256") for p in found), found
    assert any(p.field == "band.keys.p256.derive.maesured" and "unknown key 'maesured'" in p.message for p in found)


def test_missing_devices_file_is_located_at_the_topology(tmp_path):
    topo = write(tmp_path, "topo.yaml", "devices: nowhere.yaml\n" + NODES.replace(", device: DEVICE", ""))
    [p] = problems_of(topo)
    assert (p.file, p.line, p.field) == (str(topo), 1, "devices") and "not found" in p.message


def test_device_in_an_experiment_inline_topology_is_located_in_the_experiment(tmp_path):
    text = dedent("""\
    topology:
      devices:
        w: {handshake: {time: 1ms}, cpu_factor: {value: 2, assumed: x}}
      nodes: {watch: {role: wearable}, server: {role: server}}
      links: [{between: [watch, server], profile: wan}]
    workload: {kind: http-get, client: watch, server: server}
    """)
    exp = write(tmp_path, "exp.yaml", text)
    found = problems_of(exp, lambda p: load_experiment(p, CATALOG))
    [p] = found
    assert (p.file, p.line, p.field) == (str(exp), line_of(text, "w:"), "topology.devices.w.handshake")


def test_device_is_a_topology_setting_not_an_experiments(tmp_path):
    write(tmp_path, "topo.yaml", NODES.replace(", device: DEVICE", ""))
    text = EXPERIMENT + "nodes:\n  watch: {device: nexus-4}\n"
    exp = write(tmp_path, "exp.yaml", text)
    [p] = problems_of(exp, lambda p: load_experiment(p, CATALOG))
    assert (p.file, p.line, p.field) == (str(exp), line_of(text, "watch:"), "nodes.watch.device")


# --- the command ----------------------------------------------------------------------------


def test_wearlab_devices_lists_numbers_and_sources():
    r = wearlab("devices", env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    for name in builtin_devices():
        assert name[:15] in r.stdout
    r = wearlab("devices", "lg-g-watch-r", env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0 and "seed 000 section IV.A" in r.stdout and "405.22 mW" in r.stdout and "200 mW for 200ms" in r.stdout
    r = wearlab("devices", "lg-g-watch")
    assert r.returncode == 2 and "did you mean 'lg-g-watch-r'" in r.stderr


def test_wearlab_devices_reads_a_topologys_devices(tmp_path):
    text = dedent("""\
    devices:
      my-watch: {like: {device: lg-g-watch-r, scale: 2, assumed: "a test"}}
    """) + NODES.replace("DEVICE", "my-watch")
    topo = write(tmp_path, "topo.yaml", text)
    r = wearlab("devices", "my-watch", "--in", str(topo), env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert "a test: lg-g-watch-r's" in r.stdout


@pytest.mark.parametrize("key", sorted(f"{op}:x25519" for op in KEY_OPS if op in ("derive", "keygen")))
def test_tcpcrypts_key_exchange_is_calibrated_on_every_builtin_device(key):
    # tcpcryptd's TEP 0x23 (required by RFC 8548) pads to these; a device without them would
    # leave the daemon at this machine's speed.
    for d in builtin_devices().values():
        assert d.cost(key) is not None, d.name
