"""run.hold on the host, no network: a hold records no run, so what its node kinds and live
changes record is dropped every SERIES_DROP_S (an interface policy's 50 samples a second would
otherwise grow a held deployment by ~100 MB an hour), and a kind whose take fails never ends the
hold."""

from __future__ import annotations

from types import SimpleNamespace

from wearlab.realize.changelog import ChangeLog
from wearlab.run import hold


class _Kind:
    def __init__(self, fails: bool = False):
        self.fails, self.taken_at = fails, []

    def take_series(self, t0_ns: int):
        self.taken_at.append(t0_ns)
        if self.fails:
            raise OSError("its agent's series file is gone")
        return {"interface": [{"t_s": 0.02}]}


def test_a_hold_drops_what_its_kinds_and_changes_recorded():
    changes = ChangeLog()
    changes.note("watch-phone", "radio sleep", "wearlab radio")
    kinds = {"watch": _Kind(), "phone": _Kind(fails=True), "server": _Kind()}
    state = SimpleNamespace(nodes=kinds, wctx=SimpleNamespace(run_start_ns=5_000), changes=changes)
    hold.drop_series(state)
    assert [k.taken_at for k in kinds.values()] == [[5_000]] * 3    # every kind, the failing one's neighbours too
    assert changes.take() == []                                      # the live note: dropped with them
    assert 1 <= hold.SERIES_DROP_S <= 60                            # bounded: <= 60 s x 50 rows of ~650 B kept
