"""The closed sets of names a user writes or a run reports, each listed once: runtimes, shapers,
live link actions, handover policies, the BT radio's states. Everything else (the CLI's choices,
the experiment schema, the exporter's labels) reads them from here."""

from __future__ import annotations

from enum import Enum


class Runtime(str, Enum):
    """Where the emulated network lives."""

    AUTO = "auto"     # host when netem works there, else uml
    HOST = "host"     # the host kernel
    UML = "uml"       # a User-Mode Linux guest running wearlab's own kernel


class Shaper(str, Enum):
    """How a link's rate is shaped."""

    NETEM = "netem"   # netem's own rate
    HTB = "htb"       # an htb class above netem


class LinkAction(str, Enum):
    """`wearlab link ACTION`: live changes of a running experiment's links."""

    SHOW = "show"
    SET = "set"
    DOWN = "down"
    UP = "up"
    RESET = "reset"


class NodeAction(str, Enum):
    """Live requests a node kind answers (`wearlab radio`, `wearlab handover`)."""

    RADIO = "radio"
    HANDOVER = "handover"


class HandoverPolicy(str, Enum):
    """How a wearable moves from BT to WiFi (seed 003 section 6)."""

    NONE = "none"
    REACTIVE = "reactive"
    WIFI_ALWAYS = "wifi-always"
    PROACTIVE = "proactive"


class RadioState(str, Enum):
    """The BT radio's power state (seed 003 section 3)."""

    ACTIVE = "active"
    SNIFF = "sniff"
    WAKING = "waking"


def values(enum: type[Enum]) -> tuple[str, ...]:
    return tuple(m.value for m in enum)
