"""The one catalog: every node kind and workload kind wearlab has, listed once, and each role's
default kind (containerlab's nodes/all). The CLI and the tests import this module; everything
below it gets the catalog handed to it (`load_experiment(path, CATALOG)`, `plan(exp)`), so the
model never imports what runs.

Adding a kind: write its module (nodes/ or workloads/), then add its class here. The same for a
multipath scheduler (nodes/multipath_schedulers.py's `Scheduler`) and for a wearable's interface
policy (nodes/interface_policies.py's `InterfacePolicy`).
"""

from __future__ import annotations

from wearlab.model.declarations import Catalog
from wearlab.model.roles import Role
from wearlab.nodes.caddy import Caddy
from wearlab.nodes.interface_policies import Adaptive, Proactive, Reactive, StaticBt, StaticWifi, WifiAlways
from wearlab.nodes.multipath_schedulers import Blest, Ecf, MinRtt, Redundant, RoundRobin
from wearlab.nodes.host import Host
from wearlab.nodes.nginx import Nginx
from wearlab.nodes.proxies import CommandProxy, HaproxyProxy, RelayProxy
from wearlab.nodes.wearable import Wearable
from wearlab.workloads.characterizer import Characterizer
from wearlab.workloads.crypto_ops import CryptoOps
from wearlab.workloads.http_get import HttpGet
from wearlab.workloads.page_load import PageLoad
from wearlab.workloads.streams import Messages, Stream

CATALOG = Catalog.of(
    node_kinds=[Host, Nginx, Caddy, RelayProxy, HaproxyProxy, CommandProxy, Wearable],
    workloads=[HttpGet, PageLoad, Stream, Messages, CryptoOps, Characterizer],
    default_kinds={Role.WEARABLE: "wearable", Role.PHONE: "relay", Role.AP: "host", Role.ROUTER: "host",
                   Role.SERVER: "nginx"},
    schedulers=[MinRtt, RoundRobin, Redundant, Ecf, Blest],
    interface_policies=[StaticBt, StaticWifi, Adaptive, Reactive, WifiAlways, Proactive],
)
