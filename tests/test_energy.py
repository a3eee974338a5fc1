"""The energy model (measure.energy_model, docs/devices.md): power per state from the device's levels
and radios by the link's medium, energy = the model applied to a run's phase times exactly, and a
real run's columns and series are that model on its own measured phases."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from wearlab.measure.energy_model import (
    NoPowerModel,
    activity_phases,
    energy,
    node_power,
    relay_phases,
    transaction_phases,
)
from wearlab.model.choices import PowerState as S
from wearlab.model.devices import builtin_devices
from wearlab.model.media import Medium

ROOT = Path(__file__).resolve().parents[1]
WATCH, PHONE = builtin_devices()["lg-g-watch-r"], builtin_devices()["nexus-4"]
# The sources' numbers, written out so the test does not read them back from the code under test.
WIFI_RADIO_W = 0.0732 * 4.0       # Nexus 5 wifi.active 73.2 mA at 4.0 V
WATCH_BT_W = 0.064 * 3.8          # LG G Watch bluetooth.active 64 mA at 3.8 V
PHONE_BT_W = 0.0516 * 4.0         # Nexus 5 bluetooth.active


def test_watch_on_wifi_has_seed_000s_levels():
    p = node_power("watch", WATCH, [Medium.WIFI])
    assert p.watts[S.HANDSHAKE] == pytest.approx(0.40522)
    assert p.watts[S.DATA] == pytest.approx(0.53412)
    assert p.watts[S.DATA_ENCRYPTED] == pytest.approx(0.51638)
    assert p.watts[S.CONNECT] == pytest.approx(0.40522)
    assert (p.watts[S.TAIL], p.tail_s) == (pytest.approx(0.2), pytest.approx(0.2))


def test_a_level_moves_to_another_medium_by_swapping_the_radio():
    bt = node_power("watch", WATCH, [Medium.BT])
    assert bt.watts[S.DATA] == pytest.approx(0.53412 - WIFI_RADIO_W + WATCH_BT_W)
    assert bt.watts[S.TAIL] == pytest.approx(0.2)          # the tail as measured, whatever the medium
    # the relaying phone uses both radios: its WiFi level plus its BT radio; wired adds nothing
    phone = node_power("phone", PHONE, [Medium.BT, Medium.WIFI, Medium.WIRED])
    assert phone.watts[S.DATA] == pytest.approx(0.128 / 0.110 + PHONE_BT_W, rel=1e-3)
    assert phone.media == (Medium.BT, Medium.WIFI)


def test_devices_without_power_say_why():
    with pytest.raises(NoPowerModel, match="no power levels"):
        node_power("glass", builtin_devices()["google-glass-explorer"], [Medium.WIFI])
    with pytest.raises(NoPowerModel, match="no radios.ble"):
        node_power("watch", WATCH, [Medium.BLE])


def test_energy_is_the_model_applied_to_the_phase_times():
    p = node_power("watch", WATCH, [Medium.WIFI])
    phases = transaction_phases(connect_s=0.012, handshake_s=0.147, total_s=1.159, encrypted=True, tail_s=p.tail_s)
    assert phases == [(S.CONNECT, 0.012), (S.HANDSHAKE, 0.147), (S.DATA_ENCRYPTED, pytest.approx(1.0)), (S.TAIL, 0.2)]
    e = energy(p, phases)
    assert e[S.HANDSHAKE] == pytest.approx(0.40522 * 0.147, rel=1e-12)
    assert sum(e.values()) == pytest.approx(0.40522 * 0.159 + 0.51638 * 1.0 + 0.2 * 0.2, rel=1e-12)
    plain = energy(p, transaction_phases(0.012, None, 0.612, False, p.tail_s))
    assert S.HANDSHAKE not in plain   # plain HTTP has no handshake phase (its column stays empty)
    assert sum(plain.values()) == pytest.approx(0.40522 * 0.012 + 0.53412 * 0.6 + 0.04, rel=1e-12)
    assert energy(p, relay_phases(1.0, False, 0.2)) == {S.DATA: pytest.approx(0.53412), S.TAIL: pytest.approx(0.04)}


def test_activity_is_the_union_of_flights_with_tails_cut_by_the_next():
    ms = 1_000_000
    flights = [(0, 10 * ms), (5 * ms, 20 * ms), (100 * ms, 110 * ms), (1000 * ms, 1001 * ms)]
    phases = activity_phases(flights, False, 0.2)
    # busy: 0-20, 100-110, 1000-1001 = 31 ms; tails: 80 ms (cut at 100), 200 ms, 200 ms
    assert phases == [(S.DATA, pytest.approx(0.031)), (S.TAIL, pytest.approx(0.48))]
    assert activity_phases([], True, 0.2) == [(S.DATA_ENCRYPTED, 0), (S.TAIL, 0)]


EXPERIMENT = """\
name: energy
topology:
  name: energy
  nodes:
    watch:  {{role: wearable, device: lg-g-watch-r}}
    phone:  {{role: phone, device: nexus-4}}
    ap:     {{role: ap}}
    server: {{role: server}}
    other:  {{role: wearable}}
  links:
    - {{between: [watch, phone], profile: bt-classic}}
    - {{between: [watch, ap], profile: wifi-2g4-good}}
    - {{between: [phone, ap], profile: wifi-5g-good}}
    - {{between: [ap, server], profile: wan, delay: 1ms}}
    - {{between: [other, ap], profile: wifi-2g4-good}}
repetitions: 2
workload:
  kind: http-get
  client: {client}
  server: server
  size: 20KB
matrix:
  protocol: [http, https]
  path: {paths}
"""


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def _run(tmp_path: Path, client: str, paths: str) -> Path:
    (tmp_path / "exp.yaml").write_text(EXPERIMENT.format(client=client, paths=paths))
    r = subprocess.run([sys.executable, "-m", "wearlab", "run", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "r")],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return tmp_path / "r" / "energy" / "latest"


@pytest.mark.netem
def test_a_runs_energy_columns_are_the_model_on_its_measured_phases(tmp_path):
    d = _run(tmp_path, "watch", "[ap, phone]")
    rows = _rows(d / "runs.csv")
    series = _rows(d / "series" / "energy.csv")
    assert len(rows) == 8 and all(row["status"] == "ok" for row in rows)
    for row in rows:
        media = [Medium.WIFI] if row["path"] == "ap" else [Medium.BT]
        watch = node_power("watch", WATCH, media)
        phases = transaction_phases(float(row["wire_connect_s"]), float(row["wire_tls_handshake_s"] or 0),
                                    float(row["wire_total_s"]), row["protocol"] == "https", watch.tail_s)
        # runs.csv rounds to its unit's resolution; the model is exact on what it was given
        assert float(row["energy_j"]) == pytest.approx(sum(energy(watch, phases).values()), abs=2e-6)
        mine = [s for s in series if s["run"] == row["run"]]
        assert sum(float(s["joules"]) for s in mine if s["node"] == "watch") == pytest.approx(float(row["energy_j"]), abs=2e-6)
        if row["path"] == "phone":
            phone = node_power("phone", PHONE, [Medium.BT, Medium.WIFI])
            want = sum(energy(phone, relay_phases(float(row["wire_total_s"]), row["protocol"] == "https", phone.tail_s)).values())
            assert float(row["energy_relay_j"]) == pytest.approx(want, abs=2e-6)
        else:
            assert row["energy_relay_j"] == ""
        # physics: at least the tail and at most the data level for the whole transaction plus it
        total = float(row["wire_total_s"])
        assert 0.2 * 0.2 < float(row["energy_j"]) <= max(watch.watts.values()) * total + 0.2 * 0.2 + 1e-6


@pytest.mark.netem
def test_without_a_device_no_energy_and_no_slowdown(tmp_path):
    d = _run(tmp_path, "other", "[ap]")
    rows = _rows(d / "runs.csv")
    assert rows and all(row["energy_j"] == "" and row["energy_relay_j"] == "" for row in rows)
    assert not (d / "series" / "energy.csv").exists() or len(_rows(d / "series" / "energy.csv")) == 0
    # this machine's TLS 1.3 handshake: one round trip (wifi-2g4-good 10 ms + wan 2 x 1 ms) and a few
    # ms of computing - not a watch's 147 ms, nor its 116 ms platform cost
    hs = [float(row["wire_tls_handshake_s"]) for row in rows if row["protocol"] == "https"]
    assert hs and all(0.012 <= h <= 0.012 + 0.03 for h in hs), hs


STREAM = """\
name: energy-stream
topology:
  name: energy-stream
  nodes:
    watch:  {role: wearable, device: lg-g-watch-r}
    ap:     {role: ap}
    server: {role: server}
  links:
    - {between: [watch, ap], profile: wifi-2g4-good}
    - {between: [ap, server], profile: wan, delay: 1ms}
repetitions: 1
workload: {kind: stream, client: watch, server: server, path: ap, direction: down, pattern: cbr,
           rate: 40kbit, message_size: 1000, duration: 3s}
"""


@pytest.mark.netem
def test_a_streams_energy_is_the_model_on_its_messages_flights(tmp_path):
    (tmp_path / "exp.yaml").write_text(STREAM)
    r = subprocess.run([sys.executable, "-m", "wearlab", "run", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "r")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    d = tmp_path / "r" / "energy-stream" / "latest"
    [row] = _rows(d / "runs.csv")
    owd = _rows(d / "series" / "owd.csv")
    # 40 kbit/s of 1000-byte messages: 5 a second for 3 s
    assert 14 <= len(owd) <= 16
    flights = [(round(float(m["t_send_s"]) * 1e9), round((float(m["t_send_s"]) + float(m["owd_s"])) * 1e9)) for m in owd]
    watch = node_power("watch", WATCH, [Medium.WIFI])
    phases = activity_phases(flights, False, watch.tail_s)
    assert float(row["energy_j"]) == pytest.approx(sum(energy(watch, phases).values()), abs=2e-6)
    # physics: each message is in flight at least its one-way delay (5 ms + 1 ms + 1000 B at 10 and
    # 50 Mbit/s) and the radio idles high after each for up to 200 ms of the 200 ms between them
    busy = phases[0][1]
    assert len(owd) * 0.0068 <= busy <= len(owd) * 0.0068 + 0.005 * len(owd)
    assert float(row["energy_j"]) <= 0.53412 * busy + 0.2 * (len(owd) * 0.2 + 0.2) + 1e-6
    assert row["energy_relay_j"] == ""
