"""The interference controller's decisions, fed counter samples (no network, no sleeps): when a
coupled pair both carry traffic each link loses its configured fraction, when one stops both get
their rate back; changes go through LinkControl.apply as `set rate` and are logged."""

from types import SimpleNamespace

from wearlab.model.interference import Coupling, Interference
from wearlab.model.media import Medium
from wearlab.model.shape import Shape
from wearlab.realize.changelog import ChangeLog
from wearlab.realize.coupling import CouplingRule, InterferenceController
from wearlab.realize.linkctl import Applied

BT, WIFI = ("watch", "phone"), ("watch", "ap")
RULE = Interference(couplings=(Coupling(node="watch", bt=BT, wifi=WIFI),))   # defaults: 47 %, 7 %, 50 kbit/s, 100 ms
LINKS = [SimpleNamespace(a="watch", b="phone", medium=Medium.BT), SimpleNamespace(a="watch", b="ap", medium=Medium.WIFI),
         SimpleNamespace(a="ap", b="server", medium=Medium.WIRED)]


class Counters:
    """Byte counters of the four coupled directions, advanced by a rate (bit/s) per link."""

    def __init__(self):
        self.b = {"watch->phone": 0, "phone->watch": 0, "watch->ap": 0, "ap->watch": 0}

    def run(self, dt, bt_bps=0.0, wifi_bps=0.0):
        self.b["watch->phone"] += int(bt_bps * dt / 8)
        self.b["watch->ap"] += int(wifi_bps * dt / 8)
        return dict(self.b)


def test_both_active_reduces_both_and_one_stopping_restores_both():
    rule, c = CouplingRule.of(RULE, LINKS), Counters()
    assert rule.step(0.0, c.run(0)) == []                                # origin only
    assert rule.step(0.1, c.run(0.1, bt_bps=1e6)) == []                  # BT alone: no coupling
    d = rule.step(0.2, c.run(0.1, bt_bps=1e6, wifi_bps=1e6))
    assert {(x.link, x.reduce) for x in d} == {(BT, True), (WIFI, True)}
    # reduced rates still carry traffic: it stays reduced (no flapping)
    assert rule.step(0.3, c.run(0.1, bt_bps=0.53e6, wifi_bps=0.93e6)) == []
    d = rule.step(0.4, c.run(0.1, bt_bps=0.53e6, wifi_bps=0))            # WiFi stops
    assert {(x.link, x.reduce) for x in d} == {(BT, False), (WIFI, False)}
    assert "watch-ap 0 kbit/s" in d[0].why


def test_threshold_is_both_directions_together_and_strict():
    rule, c = CouplingRule.of(RULE, LINKS), Counters()
    rule.step(0.0, c.run(0))
    # 50 kbit/s exactly is not above the threshold; ACK-only trickles of 20 kbit/s neither
    assert rule.step(0.1, c.run(0.1, bt_bps=50_000, wifi_bps=1e6)) == []
    c.b["phone->watch"] += int(30_000 * 0.1 / 8)                          # + 30 kbit/s the other way
    assert len(rule.step(0.2, c.run(0.1, bt_bps=30_000, wifi_bps=1e6))) == 2


def test_counter_reset_counts_from_zero():
    rule, c = CouplingRule.of(RULE, LINKS), Counters()
    rule.step(0.0, c.run(0, bt_bps=0))
    c.b = {k: 10**6 for k in c.b}
    assert len(rule.step(0.1, c.b)) == 2                                 # both active: reduced
    d = rule.step(0.2, {k: 0 for k in c.b})                              # qdiscs made anew: 0, not negative
    assert rule.rates[BT] == rule.rates[WIFI] == 0 and {x.reduce for x in d} == {False}


class FakeLinks:
    """LinkControl's surface the controller uses: current shapes and apply()."""

    def __init__(self):
        self.current = {d: Shape(rate_bps=1_000_000, delay_s=0.01) for d in
                        (("watch", "phone"), ("phone", "watch"), ("watch", "ap"), ("ap", "watch"))}
        self.applied = []

    def apply(self, change):
        for d in change.directions:
            self.current[d] = change.spec.over(self.current[d])
        self.applied.append(change)
        return Applied(0, 0.1, change, {})


def test_controller_sets_the_configured_fractions_and_restores_the_base_rate():
    links, log, c = FakeLinks(), ChangeLog(), Counters()
    ctl = InterferenceController(links, log, RULE, LINKS)
    ctl.tick(0.0, c.run(0))
    ctl.tick(0.1, c.run(0.1, bt_bps=1e6, wifi_bps=1e6))
    assert links.current[("watch", "phone")].rate_bps == links.current[("phone", "watch")].rate_bps == 530_000
    assert links.current[("watch", "ap")].rate_bps == links.current[("ap", "watch")].rate_bps == 930_000
    assert links.current[("watch", "phone")].delay_s == 0.01       # only the rate changes
    ctl.tick(0.2, c.run(0.1, bt_bps=0, wifi_bps=0.93e6))
    assert all(s.rate_bps == 1_000_000 for s in links.current.values())
    rows = log.take()
    assert len(rows) == 8 and {r["source"] for r in rows} == {"interference"}
    assert "-47 %" in rows[0]["origin"] and rows[0]["change"] == "watch->phone set rate=530000"
    assert ctl.record()["changes"] == 8


def test_someone_elses_change_is_respected():
    links, c = FakeLinks(), Counters()
    ctl = InterferenceController(links, ChangeLog(), RULE, LINKS)
    ctl.tick(0.0, c.run(0))
    ctl.tick(0.1, c.run(0.1, bt_bps=1e6, wifi_bps=1e6))
    # a timeline sets BT to 2 Mbit/s while reduced: the next window reduces from 2 Mbit/s
    links.current[("watch", "phone")] = links.current[("phone", "watch")] = Shape(rate_bps=2_000_000)
    ctl.tick(0.2, c.run(0.1, bt_bps=1e6, wifi_bps=1e6))
    assert links.current[("watch", "phone")].rate_bps == 1_060_000
    assert links.current[("watch", "ap")].rate_bps == 930_000       # untouched: still reduced
