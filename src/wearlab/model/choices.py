"""The closed sets of names a user writes or a run reports, each listed once: runtimes, shapers,
live link actions, handover policies, the BT radio's states. Everything else (the CLI's choices,
the experiment schema, the exporter's labels, `wearlab top`) reads them from here, so a producer
and its readers cannot drift apart. StrEnums: each is written as its plain value."""

from __future__ import annotations

from enum import Enum, StrEnum


class Runtime(StrEnum):
    """Where the emulated network lives."""

    AUTO = "auto"     # host when netem works there, else uml
    HOST = "host"     # the host kernel
    UML = "uml"       # a User-Mode Linux guest running wearlab's own kernel


class Shaper(StrEnum):
    """How a link's rate is shaped."""

    NETEM = "netem"   # netem's own rate
    HTB = "htb"       # an htb class above netem


class LinkAction(StrEnum):
    """`wearlab link ACTION`: live changes of a running experiment's links."""

    SHOW = "show"
    SET = "set"
    DOWN = "down"
    UP = "up"
    RESET = "reset"


class NodeAction(StrEnum):
    """Live requests a node kind answers (`wearlab radio`, `wearlab handover`)."""

    RADIO = "radio"
    HANDOVER = "handover"


class HandoverPolicy(StrEnum):
    """How a wearable moves from BT to WiFi (seed 003 section 6)."""

    NONE = "none"
    REACTIVE = "reactive"
    WIFI_ALWAYS = "wifi-always"
    PROACTIVE = "proactive"


class RadioState(StrEnum):
    """A wearable's Bluetooth radio (nodes.radio: seed 003 section 3), written as its value into
    series CSVs and live.json."""

    ACTIVE = "active"
    SNIFF = "sniff"
    WAKING = "waking"


class PowerState(StrEnum):
    """What a device does during a phase, for the energy model (measure.energy): seed 000's power
    trace has these phases (section IV.A, Fig. 2)."""

    CONNECT = "connect"                  # the TCP handshake
    HANDSHAKE = "handshake"              # the TLS (or tcpcrypt) handshake: the client computes
    DATA = "data"                        # data exchange, plaintext
    DATA_ENCRYPTED = "data_encrypted"    # data exchange, encrypted (seed 000: lower power, longer)
    TAIL = "tail"                        # high-power idle after the last byte, before the radio sleeps


def values(enum: type[Enum]) -> tuple[str, ...]:
    return tuple(m.value for m in enum)
