"""The closed sets of names a user writes or a run reports, each listed once: runtimes, shapers,
live link actions, how an interface policy's choice is carried out, the BT radio's states, a claim's evidence, statistic and
verdict. Everything else (the CLI's choices, the experiment schema, the exporter's labels,
`wearlab top`, `wearlab check`) reads them from here, so a producer and its readers cannot drift
apart. StrEnums: each is written as its plain value."""

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


class PolicyTransport(StrEnum):
    """How a wearable's interface policy (`interface_policy:`) carries its choice out
    (wearlab.nodes.interface_policies): the wearable's `policy_transport`."""

    AUTO = "auto"         # the policy's own first choice
    ROUTE = "route"       # the app's connection routed through the chosen interface's neighbour
    MPTCP = "mptcp"       # the kernel's MPTCP subflows, moved by priority
    CHUNKED = "chunked"   # wearlab's chunked multipath transport (seed 003 section 5)


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


class Evidence(StrEnum):
    """What kind of evidence a claim of an experiment's `expect:` is (docs/claims.md)."""

    INPUT = "input"                  # a number the model takes from the paper: shown, never scored
    CALIBRATION = "calibration"      # holds by construction once the inputs are right: checks the mechanism
    PREDICTION = "prediction"        # the model was not tuned to it


class Statistic(StrEnum):
    """What a claim takes of the runs of its cells (numpy's definitions; p95 interpolates linearly)."""

    MEDIAN = "median"
    MEAN = "mean"
    P95 = "p95"
    MAX = "max"


class Verdict(StrEnum):
    """`wearlab check`'s verdict on a claim, written as its value into claims.json."""

    REPRODUCED = "reproduced"            # the 95 % interval of ours lies inside the paper's band
    NOT_REPRODUCED = "not reproduced"    # ... wholly outside it
    INCONCLUSIVE = "inconclusive"        # ... across its edge, too few runs, or nothing to measure
    NOT_SCORED = "not scored"            # an input: shown beside ours, never scored


def values(enum: type[Enum]) -> tuple[str, ...]:
    return tuple(m.value for m in enum)
