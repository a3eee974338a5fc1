"""The interference rule as data: bands declared on links and profiles, which links a node
couples, the paper's defaults, and the input errors (file, line, field)."""

from textwrap import dedent

import pytest

from wearlab.catalog import CATALOG
from wearlab.errors import InputError
from wearlab.model.media import Band
from wearlab.model.profiles import PROFILES
from wearlab.model.topology import load_topology

WATCH = """\
nodes:
  watch: {role: wearable}
  phone: {role: phone}
  ap: {role: ap}
  server: {role: server}
links:
  - {between: [watch, phone], profile: bt-classic}
"""


def load(tmp_path, text):
    f = tmp_path / "t.yaml"
    f.write_text(dedent(text))
    return load_topology(f, CATALOG)


def problems(tmp_path, text):
    with pytest.raises(InputError) as e:
        load(tmp_path, text)
    return e.value.problems


def test_profiles_declare_their_band():
    assert PROFILES["wifi-2g4-good"].band == PROFILES["wifi-2g4-fair"].band == Band.GHZ_2_4
    assert PROFILES["wifi-5g-good"].band == Band.GHZ_5
    assert all(p.band is None for p in PROFILES.values() if p.medium.value != "wifi")


def test_without_interference_written_nothing_is_coupled(tmp_path):
    # The shipped topologies' experiments were calibrated without the rule: a topology opts in.
    topo = load(tmp_path, WATCH + "  - {between: [watch, ap], profile: wifi-2g4-good}\n")
    assert topo.interference.couplings == ()


def test_bt_and_2g4_wifi_on_one_node_couple_with_the_papers_losses(tmp_path):
    topo = load(tmp_path, WATCH + "  - {between: [watch, ap], profile: wifi-2g4-good}\n"
                                  "  - {between: [ap, server], profile: wan}\ninterference: {}\n")
    rule = topo.interference
    assert [(c.node, c.bt, c.wifi) for c in rule.couplings] == [("watch", ("watch", "phone"), ("watch", "ap"))]
    # seed 003 section 5: BT -47 %, WiFi -7 % (inputs: a calibration)
    assert (rule.bt_loss_pct, rule.wifi_loss_pct) == (47.0, 7.0)
    assert rule.window_s == 0.1 and rule.active_above_bps == 50_000


def test_5ghz_is_not_coupled_and_the_link_overrides_its_profiles_band(tmp_path):
    on = "interference: {}\n"
    assert load(tmp_path, WATCH + "  - {between: [watch, ap], profile: wifi-5g-good}\n").interference.couplings == ()
    # the band is the link's own data: a 2.4 GHz profile declared 5 GHz on the link is not coupled
    topo = load(tmp_path, WATCH + "  - {between: [watch, ap], profile: wifi-2g4-good, band: 5GHz}\n" + on)
    assert topo.links[1].band == Band.GHZ_5 and topo.interference.couplings == ()
    # and an explicit link with no profile couples once it says its band
    topo = load(tmp_path, WATCH + "  - {between: [watch, ap], medium: wifi, band: 2.4GHz, rate: 1Mbit}\n" + on)
    assert len(topo.interference.couplings) == 1


def test_written_values_and_off(tmp_path):
    base = WATCH + "  - {between: [watch, ap], profile: wifi-2g4-good}\n"
    topo = load(tmp_path, base + "interference: {bt_loss: 30%, wifi_loss: 10%, active_above: 100kbit, window: 50ms}\n")
    r = topo.interference
    assert (r.bt_loss_pct, r.wifi_loss_pct, r.active_above_bps, r.window_s) == (30.0, 10.0, 100_000, 0.05)
    assert load(tmp_path, base + "interference: {coupled: false}\n").interference.couplings == ()


def test_to_document_keeps_band_and_rule(tmp_path):
    topo = load(tmp_path, WATCH + "  - {between: [watch, ap], profile: wifi-2g4-good}\ninterference: {bt_loss: 40%}\n")
    doc = topo.to_document(CATALOG)
    assert doc["links"][1]["band"] == "2.4GHz" and doc["interference"] == {"bt_loss": "40%"}


def test_band_on_a_non_wifi_link_is_an_error_at_its_line(tmp_path):
    (p,) = problems(tmp_path, WATCH.replace("profile: bt-classic}", "profile: bt-classic, band: 2.4GHz}"))
    assert (p.line, p.field) == (7, "links[0].band") and "medium is bt" in p.message


def test_unknown_band_suggests(tmp_path):
    (p,) = problems(tmp_path, WATCH + "  - {between: [watch, ap], profile: wifi-2g4-good, band: 2.4ghz5}\n")
    assert p.line == 8 and "unknown band" in p.message and "2.4GHz" in p.message


def test_coupled_true_without_a_pair_says_why(tmp_path):
    (p,) = problems(tmp_path, WATCH + "  - {between: [watch, ap], medium: wifi, rate: 1Mbit}\n"
                                      "interference:\n  coupled: true\n")
    assert (p.line, p.field) == (10, "interference.coupled")
    assert "watch-ap" in p.message and "band" in p.message


def test_loss_of_100_percent_is_refused(tmp_path):
    (p,) = problems(tmp_path, WATCH + "interference: {bt_loss: 100%}\n")
    assert p.field == "interference.bt_loss" and "below 100" in p.message


def test_a_coupled_link_needs_a_rate(tmp_path):
    (p,) = problems(tmp_path, WATCH + "  - {between: [watch, ap], medium: wifi, band: 2.4GHz, delay: 5ms}\n"
                                      "interference: {}\n")
    assert (p.line, p.field) == (8, "links[1]") and "give it a rate" in p.message
