"""Devices: what a node's hardware costs - the time of each cryptographic operation, the platform's
own cost per TLS handshake, a general CPU factor for other work, and power figures per state and
per radio medium - each number with where it comes from.

Why per operation: a wearable-class core is not uniformly slower than the machine that emulates
it. RSA, elliptic curves, hashes and ciphers slow down by very different factors (x86 has AES-NI,
PCLMUL and SHA instructions a 2015 watch lacked), so one CPU share cannot emulate a device. And
the primitives alone do not explain a device: seed 000's watch spent ~128 ms of its 147 ms TLS
handshake in the client, far more than its primitives' sum; the rest is the platform (a Java TLS
stack, the browser, frequency scaling), which a device states as its `handshake` cost (and
`resumed_handshake`, what a resumed one costs the platform). `cores` says how many cores the
device computes on: a node's processes share them (wearlab.nodes.devicecpu).

Built-in devices are data (`devices/builtin.yaml`, beside this module); a topology's `devices:`
section (a mapping, or a path to a YAML file with one) adds its own in the same schema. Every
number says whether it was `measured` (and where), `derived` (and how) or `assumed` (and why). A
device may be `like` another, scaled: every operation it does not list is the other's times
`scale`, marked derived with the reason given.

What uses a device: wearlab.nodes.devicecpu turns it into the profile (`profile_text`) that the
mechanism pads each operation to (the LD_PRELOAD library for OpenSSL users, tcpcryptd's
`--device-profile`), and the energy model reads its power figures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from wearlab.errors import InputError, Problem
from wearlab.model.choices import PowerState, values
from wearlab.model.media import MEDIA, Medium
from wearlab.model.quantities import format_duration
from wearlab.model.unit_input import parse_duration
from wearlab.model.yamlsrc import (
    LineMap,
    YamlPath,
    did_you_mean,
    dotted,
    line_of,
    load_yaml,
    problems_from_validation,
    sort_problems,
)

BUILTIN_FILE = Path(__file__).with_name("devices") / "builtin.yaml"

# Names as the mechanism sees OpenSSL's objects (wearlab's devicecpu library and tcpcryptd): key
# types and sizes, digests and ciphers by their OpenSSL names in lower case.
KEY_NAME = re.compile(r"^(rsa|dh)(512|1024|2048|3072|4096|8192)$|^(p256|p384|p521|x25519|x448|ed25519|ed448)$")
KEY_RULE = "rsaBITS or dhBITS (e.g. rsa2048), p256, p384, p521, x25519, x448, ed25519 or ed448"
KEY_OPS = ("sign", "verify", "derive", "keygen")
DIGESTS = ("md5", "sha1", "sha224", "sha256", "sha384", "sha512", "sha512-224", "sha512-256", "sha3-256",
           "sha3-512", "ripemd160", "sm3")
CIPHERS = ("aes-128-cbc", "aes-192-cbc", "aes-256-cbc", "aes-128-gcm", "aes-192-gcm", "aes-256-gcm",
           "aes-128-ccm", "aes-256-ccm", "aes-128-ctr", "aes-256-ctr", "chacha20-poly1305", "chacha20",
           "des-ede3-cbc", "camellia-128-cbc", "camellia-256-cbc", "rc4")
DEVICE_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{0,63}$")
DEVICE_NAME_RULE = "device names are 1-64 lowercase letters, digits, '.' or '-', starting with a letter or digit"
# measured: a paper's number (where); derived: computed from measured ones (how); fitted: chosen
# so the model reproduces a paper's figure (which figure: the claims it decides are calibrations,
# not predictions); assumed: taken without a measurement (why).
BASES = ("measured", "derived", "fitted", "assumed")


# ---------------------------------------------------------------------------------------------
# The YAML schema


class Sourced(BaseModel):
    """A number's provenance: exactly one of measured / derived / fitted / assumed, each saying
    where from, how, to what, or why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    measured: str | None = None
    derived: str | None = None
    fitted: str | None = None
    assumed: str | None = None

    @model_validator(mode="after")
    def _one_basis(self):
        given = [b for b in BASES if getattr(self, b) is not None]
        if len(given) != 1:
            what = "none" if not given else " and ".join(given)
            raise ValueError(f"say where the number comes from with exactly one of measured: / derived: / "
                             f"fitted: / assumed: (a paper, table and line; how it was derived; which paper "
                             f"figure it was fitted to; or why it is assumed); got {what}")
        text = getattr(self, given[0])
        if not text.strip():
            raise ValueError(f"{given[0]}: needs its source as text, not an empty value")
        return self

    @property
    def basis(self) -> str:
        return next(b for b in BASES if getattr(self, b) is not None)

    @property
    def source(self) -> str:
        return getattr(self, self.basis)


def _duration(value: Any) -> float:
    return parse_duration(value, bare_unit="ms")


class OpTime(Sourced):
    """One operation's time: `time: 35ms`, or `per_s: 23.1` (operations per second, as
    `openssl speed` prints them)."""

    time: Annotated[float, BeforeValidator(_duration)] | None = None
    per_s: Annotated[float, Field(gt=0)] | None = None

    @model_validator(mode="after")
    def _one_value(self):
        if (self.time is None) == (self.per_s is None):
            raise ValueError("give the operation's time (time: 35ms) or its rate (per_s: 23.1), exactly one")
        return self

    @property
    def seconds(self) -> float:
        return self.time if self.time is not None else 1.0 / self.per_s


class Residual(BaseModel):
    """A platform cost that is what a paper's measured time leaves once the primitives are taken
    away: `share` x `of` minus each primitive's time on this device (after `like:`) times its count.
    The primitives are those the runs compute (series/devicecpu.csv of a run lists them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    of: Annotated[float, BeforeValidator(_duration)]
    share: Annotated[float, Field(gt=0, le=1)] = 1.0
    minus: dict[str, Annotated[int, Field(ge=1)]] = Field(default_factory=dict)


class OtherDevice(BaseModel):
    """Another device's same figure, times `scale`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str
    scale: Annotated[float, Field(gt=0)] = 1.0


class PlatformCost(Sourced):
    """The platform's cost per TLS handshake (or resumed handshake) beyond its primitives, one of:
    `time: 35ms` / `per_s:`; `residual: {of: 147ms, share: 0.87, minus: {"verify:rsa2048": 4}}`
    (what a paper's time leaves after this device's primitives); `like: {device: D, scale: k}` (D's
    same figure x k); for a resumed handshake also `share_of_handshake: {"keygen:x25519": 1, ...}`
    (the full handshake's platform cost x the time of these primitives / the time of the full
    handshake's `minus` primitives: the stack's own work taken to shrink with what it computes)."""

    time: Annotated[float, BeforeValidator(_duration)] | None = None
    per_s: Annotated[float, Field(gt=0)] | None = None
    residual: Residual | None = None
    like: OtherDevice | None = None
    share_of_handshake: dict[str, Annotated[int, Field(ge=1)]] | None = None

    @model_validator(mode="after")
    def _one_value(self):
        given = [k for k in ("time", "per_s", "residual", "like", "share_of_handshake") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give the cost one way: time: (35ms), per_s:, residual: {of:, share:, minus:}, "
                             "like: {device:, scale:} or share_of_handshake: {...}; got "
                             + (" and ".join(given) if given else "none"))
        return self


class PaperRate(BaseModel):
    """A data rate a paper measured on the wire: `mbit_s` over `wire_bytes` (the frames of the
    data phase) that carried `payload_bytes` of application data."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mbit_s: Annotated[float, Field(gt=0)]
    wire_bytes: Annotated[int, Field(gt=0)]
    payload_bytes: Annotated[int, Field(gt=0)]

    @property
    def seconds_per_byte(self) -> float:
        return self.wire_bytes * 8 / (self.mbit_s * 1e6) / self.payload_bytes


class DataCost(Sourced):
    """The platform's cost per byte of data the application receives: `time: 3.2us` (per byte), or
    `rate: {mbit_s:, wire_bytes:, payload_bytes:}` (the time per payload byte at a paper's rate),
    `less:` the per-byte primitives this device's tables already charge per call (a TLS record's
    cipher and MAC, at `record` bytes a call), so they are not paid twice."""

    time: Annotated[float, BeforeValidator(lambda v: parse_duration(v, bare_unit="us"))] | None = None
    rate: PaperRate | None = None
    less: tuple[str, ...] = ()
    record: Annotated[int, Field(gt=0)] = 16384

    @model_validator(mode="after")
    def _one_value(self):
        if (self.time is None) == (self.rate is None):
            raise ValueError("give the cost per byte as time: (e.g. 3.2us) or rate: {mbit_s:, wire_bytes:, "
                             "payload_bytes:}, exactly one")
        return self


DATA_KINDS = ("plain", "encrypted")


class Volts(Sourced):
    """A battery voltage, with where it comes from (a current is a power only at a voltage)."""

    value: Annotated[float, Field(gt=0)]


class KeyOps(BaseModel):
    """A key type's operations (verify also stands for encrypting to the key, sign for decrypting
    with it: the public and the private operation)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sign: OpTime | None = None
    verify: OpTime | None = None
    derive: OpTime | None = None
    keygen: OpTime | None = None


class Throughput(Sourced):
    """Bytes through a digest or cipher, as `openssl speed` tables them: block size (bytes) ->
    1000s of bytes per second. Between block sizes the time is interpolated, beyond the largest
    the last step's rate continues."""

    kbytes_per_s: dict[int, Annotated[float, Field(gt=0)]]

    @field_validator("kbytes_per_s")
    @classmethod
    def _sizes(cls, v: dict[int, float]) -> dict[int, float]:
        if not v:
            raise ValueError("give at least one block size: rate, e.g. {8192: 34417.32}")
        bad = [s for s in v if s <= 0]
        if bad:
            raise ValueError(f"block sizes are bytes, more than 0; got {bad[0]}")
        # Not required to grow with the block size: the papers' tables are what was measured (seed
        # 002's MD5 did 64 bytes faster than 16), and interpolating between them is still defined.
        return dict(sorted(v.items()))


class Factor(Sourced):
    value: Annotated[float, Field(ge=1)]


class Cores(Sourced):
    """How many cores the device computes on: a node's processes (and its tcpcryptd) share them."""

    value: Annotated[int, Field(ge=1, le=64)]


class Hardware(Sourced):
    cpu: str
    memory: str | None = None
    os: str | None = None


class Like(Sourced):
    """Every operation (and the handshakes and CPU factor, unless given) of another device, its
    times multiplied by `scale`, and its cores (unless given); derived: or assumed: says why that
    device and that scale. A device that gives its own `handshake` but no `resumed_handshake`
    pays a full handshake's platform cost for a resumed one too (assumed)."""

    device: str
    scale: Annotated[float, Field(gt=0)]


def _volts(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ValueError(f"say where the voltage comes from: volts: {{value: {value:g}, measured: / derived: / "
                         "assumed: ...}")
    return value


class PowerFigure(Sourced):
    """A power level: `mw: 405`, or `ma: 64` with `volts: {value: 3.8, assumed: ...}` (a
    power_profile.xml current at the battery's voltage, itself sourced); `duration:` for a state
    that lasts a fixed time (the tail)."""

    mw: Annotated[float, Field(ge=0)] | None = None
    ma: Annotated[float, Field(ge=0)] | None = None
    volts: Annotated[Volts, BeforeValidator(_volts)] | None = None
    duration: Annotated[float, BeforeValidator(_duration)] | None = None

    @model_validator(mode="after")
    def _one_value(self):
        if (self.mw is None) == (self.ma is None):
            raise ValueError("give the power as mw: (milliwatts) or ma: with volts: (a current at a voltage), "
                             "exactly one")
        if self.ma is not None and self.volts is None:
            raise ValueError("ma: needs volts: (the battery's voltage) to be a power")
        if self.volts is not None and self.ma is None:
            raise ValueError("volts: goes with ma:")
        return self

    @property
    def watts(self) -> float:
        return self.mw / 1e3 if self.mw is not None else self.ma * self.volts.value / 1e3

    @property
    def assumptions(self) -> tuple[str, ...]:
        """Every assumption inside the figure: its own, and its voltage's."""
        out = (f"{self.describe()}: {self.assumed}",) if self.assumed else ()
        if self.volts is not None and self.volts.assumed:
            out += (f"{self.volts.value:g} V: {self.volts.assumed}",)
        return out

    @property
    def overall_basis(self) -> str:
        """The figure's basis with its voltage's: an assumption anywhere makes it one."""
        return "assumed" if self.assumptions else self.basis

    def describe(self) -> str:
        v = f"{self.mw:g} mW" if self.mw is not None else f"{self.ma:g} mA at {self.volts.value:g} V"
        return v + (f" for {format_duration(self.duration)}" if self.duration else "")


class Battery(Sourced):
    mah: Annotated[float, Field(gt=0)]


class RadioPower(BaseModel):
    """A radio's own power. `active`: while it carries data - what the energy model adds for a
    medium the device's levels were not measured on, and takes away for the one they were. `on`
    (optional): its base power, while it is on (WiFi associated, BT connected) but carrying
    nothing (power_profile.xml's wifi.on / bluetooth.on) - what a policy that switches the radio
    off saves; the model charges it for the time the radio is on outside its data state and its
    tail (whose levels hold the radio's whole draw, as power_profile.xml's states exclude each
    other: wifi.on is WiFi "on but not receiving, transmitting, or scanning")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    active: PowerFigure
    on: PowerFigure | None = None


def _known_media(names: Any) -> None:
    for name in names:
        if name not in MEDIA:
            raise ValueError(f"unknown medium '{name}'{did_you_mean(str(name), MEDIA)} (media: {', '.join(MEDIA)})")


class Power(BaseModel):
    """A device's power figures. `levels` are the whole device's power above its idle baseline per
    phase state (seed 000 measured its watch's so, on WiFi), over the medium `measured_on`, whose
    radio is inside them - or the media, a list, whose radios all are (seed 003's phone relaying
    over BT and WiFi at once: `[bt, wifi]`); `radios` give each radio's own active power, so the
    model can move a level to other media (measure.energy)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    battery: Battery | None = None
    measured_on: Medium | tuple[Medium, ...] | None = None
    levels: dict[PowerState, PowerFigure] = Field(default_factory=dict)
    radios: dict[Medium, RadioPower] = Field(default_factory=dict)

    @field_validator("radios", mode="before")
    @classmethod
    def _media(cls, v: Any) -> Any:
        if isinstance(v, dict):
            _known_media(v)
        return v

    @field_validator("measured_on", mode="before")
    @classmethod
    def _measured_media(cls, v: Any) -> Any:
        if isinstance(v, list):
            _known_media(v)
            if not v or len(set(v)) != len(v):
                raise ValueError("measured_on: a medium, or a list of different media")
            return tuple(v)
        return v

    @property
    def measured_media(self) -> tuple[Medium, ...]:
        """The media whose radios the levels hold (measured_on, one or several)."""
        m = self.measured_on
        return () if m is None else (m,) if isinstance(m, Medium) else tuple(m)

    @field_validator("levels", mode="before")
    @classmethod
    def _states(cls, v: Any) -> Any:
        states = values(PowerState)
        if isinstance(v, dict):
            for key in v:
                if key not in states:
                    raise ValueError(f"unknown state '{key}'{did_you_mean(key, states)} (states: {', '.join(states)})")
        return v

    @model_validator(mode="after")
    def _complete(self):
        if not self.levels:
            if self.measured_on is not None:
                raise ValueError("measured_on: goes with levels:")
            return self
        missing = [s.value for s in REQUIRED_LEVELS if s not in self.levels]
        if missing:
            raise ValueError(f"levels: needs {', '.join(missing)} (the energy model's states; connect and "
                             f"data_encrypted default to handshake and data)")
        if self.measured_on is None:
            raise ValueError("levels: need measured_on: (the medium whose radio is inside them)")
        if self.levels[PowerState.TAIL].duration is None:
            raise ValueError("levels.tail needs duration: (how long the device stays in high-power idle)")
        return self


# The states a device's levels must give; the others are taken from them, marked assumed with the
# reason (connect -> handshake, data_encrypted -> data: _complete_power).
REQUIRED_LEVELS = (PowerState.HANDSHAKE, PowerState.DATA, PowerState.TAIL)
ACTIVE_STATES = (PowerState.CONNECT, PowerState.HANDSHAKE, PowerState.DATA, PowerState.DATA_ENCRYPTED)


def radio_swaps(power: Power, radios: tuple[Medium, ...]) -> list[tuple[float, Medium, PowerFigure]]:
    """How a level measured on `power.measured_on` moves to a node whose radios are `radios`: each
    measured medium's radio taken away (if the node does not use it), each other radio's added -
    (sign, medium, that radio's active power). KeyError(medium) where the device lacks a radio."""
    out: list[tuple[float, Medium, PowerFigure]] = []
    measured = power.measured_media
    for m in measured:
        if m not in radios:
            if m not in power.radios:
                raise KeyError(m)
            out.append((-1.0, m, power.radios[m].active))
    for m in radios:
        if m not in measured:
            if m not in power.radios:
                raise KeyError(m)
            out.append((1.0, m, power.radios[m].active))
    return out


def negative_levels(device: Device, radios: tuple[Medium, ...]) -> list[str]:
    """The active levels that moving to `radios` would make negative (an input error: the level
    and the radio currents contradict each other), each said with its arithmetic."""
    p = device.power
    if p is None or not p.levels:
        return []
    try:
        swaps = radio_swaps(p, radios)
    except KeyError:
        return []   # no radio for a medium: the energy model says so at run time (no energy)
    out = []
    for s in ACTIVE_STATES:
        f = p.levels.get(s)
        if f is None:
            continue
        w = f.watts + sum(sign * r.watts for sign, _, r in swaps)
        if w < 0:
            out.append(f"{s.value}: {f.describe()} " + " ".join(
                f"{'-' if sign < 0 else '+'} {m.value} radio {r.watts * 1e3:.4g} mW" for sign, m, r in swaps)
                + f" = {w * 1e3:.4g} mW")
    return out


class DeviceSpec(BaseModel):
    """A device as written."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = ""
    hardware: Hardware | None = None
    like: Like | None = None
    keys: dict[str, KeyOps] = Field(default_factory=dict)
    digests: dict[str, Throughput] = Field(default_factory=dict)
    ciphers: dict[str, Throughput] = Field(default_factory=dict)
    handshake: PlatformCost | None = None
    resumed_handshake: PlatformCost | None = None
    abbreviated_handshake: PlatformCost | None = None
    per_byte: dict[str, DataCost] = Field(default_factory=dict)
    cpu_factor: Factor | None = None
    cores: Cores | None = None
    power: Power | None = None

    @field_validator("per_byte", mode="before")
    @classmethod
    def _data_kinds(cls, v: Any) -> Any:
        for name in v if isinstance(v, dict) else ():
            if name not in DATA_KINDS:
                raise ValueError(f"unknown data kind '{name}'{did_you_mean(name, DATA_KINDS)} "
                                 f"(per_byte: {' and '.join(DATA_KINDS)})")
        return v

    @field_validator("keys", mode="before")
    @classmethod
    def _keys(cls, v: Any) -> Any:
        for name in v if isinstance(v, dict) else ():
            if not isinstance(name, str) or not KEY_NAME.match(name):
                raise ValueError(f"unknown key type '{name}': {KEY_RULE}")
        return v

    @field_validator("digests", mode="before")
    @classmethod
    def _digests(cls, v: Any) -> Any:
        for name in v if isinstance(v, dict) else ():
            if name not in DIGESTS:
                raise ValueError(f"unknown digest '{name}'{did_you_mean(name, DIGESTS)} (digests: {', '.join(DIGESTS)})")
        return v

    @field_validator("ciphers", mode="before")
    @classmethod
    def _ciphers(cls, v: Any) -> Any:
        for name in v if isinstance(v, dict) else ():
            if name not in CIPHERS:
                raise ValueError(f"unknown cipher '{name}'{did_you_mean(name, CIPHERS)} (ciphers: {', '.join(CIPHERS)})")
        return v


# ---------------------------------------------------------------------------------------------
# Resolved devices


@dataclass(frozen=True)
class Cost:
    """One operation on a device: `points` are (bytes, seconds) - a single (0, s) for a public-key
    operation - with where they come from."""

    key: str                                  # "verify:rsa2048", "digest:sha256", "cipher:aes-128-gcm"
    points: tuple[tuple[int, float], ...]
    basis: str                                # measured | derived | assumed
    source: str

    @property
    def per_byte(self) -> bool:
        return self.points[0][0] > 0

    def seconds(self, nbytes: int = 0) -> float:
        """The device's time for one call of `nbytes` (the mechanism's interpolation)."""
        pts = self.points
        if not self.per_byte:
            return pts[0][1]
        if len(pts) == 1 or nbytes <= pts[0][0]:
            return pts[0][1] * nbytes / pts[0][0]
        for (s0, t0), (s1, t1) in zip(pts, pts[1:]):
            if nbytes <= s1:
                return t0 + (t1 - t0) * (nbytes - s0) / (s1 - s0)
        (s0, t0), (s1, t1) = pts[-2], pts[-1]
        return t1 + (t1 - t0) * (nbytes - s1) / (s1 - s0)

    def scaled(self, k: float, basis: str, source: str) -> Cost:
        return Cost(self.key, tuple((s, t * k) for s, t in self.points), basis, source)

    def shown(self) -> str:
        if not self.per_byte:
            t = self.points[0][1]
            return f"{t * 1e3:.3g} ms ({1 / t:.4g}/s)" if t > 0 else "0 ms"
        s, t = self.points[-1]
        return f"{s / t / 1e6:.3g} MB/s at {s} B"


@dataclass(frozen=True)
class Figure:
    value: float
    basis: str
    source: str


@dataclass(frozen=True)
class Device:
    name: str
    description: str
    defined_in: str                           # "built-in" or the file that defines it
    costs: dict[str, Cost]
    handshake: Cost                           # the platform's cost per TLS handshake (key "handshake")
    cpu_factor: Figure
    hardware: Hardware | None = None
    power: Power | None = None
    like: str | None = None
    notes: tuple[str, ...] = field(default=())
    # ... per resumed TLS handshake (key "resumed_handshake"; None: the full one's)
    resumed_handshake: Cost | None = None
    # ... per TLS 1.2 abbreviated handshake (RFC 5246 7.3: a session resumed, no key exchange, no
    # certificate; key "abbreviated_handshake"; None: the resumed one's)
    abbreviated_handshake: Cost | None = None
    cores: Figure = Figure(1, "assumed", "not given: one core")
    # The platform's cost per byte of data the application receives, beyond the cipher's and the
    # MAC's (keys "plain", "encrypted"; empty: none)
    per_byte: dict[str, Cost] = field(default_factory=dict)

    @property
    def resumed(self) -> Cost:
        """The platform's cost per resumed TLS handshake."""
        return self.resumed_handshake or self.handshake

    @property
    def abbreviated(self) -> Cost:
        """The platform's cost per TLS 1.2 abbreviated handshake."""
        return self.abbreviated_handshake or self.resumed

    def cost(self, key: str) -> Cost | None:
        return self.costs.get(key)

    def profile_text(self) -> str:
        """The profile the mechanism reads (wearlab's devicecpu library, tcpcryptd
        --device-profile): one line per operation, times in nanoseconds."""
        lines = [f"# wearlab device profile: {self.name} ({self.defined_in}); generated, do not edit",
                 f"device {self.name}", f"cpu_factor {self.cpu_factor.value:.6g}",
                 f"handshake_ns {round(self.handshake.seconds() * 1e9)}",
                 f"resumed_handshake_ns {round(self.resumed.seconds() * 1e9)}",
                 f"abbreviated_handshake_ns {round(self.abbreviated.seconds() * 1e9)}"]
        for key in sorted(self.costs):
            c = self.costs[key]
            if c.per_byte:
                lines.append(f"bytes {key} " + " ".join(f"{s}:{round(t * 1e9)}" for s, t in c.points))
            else:
                lines.append(f"op {key} {round(c.points[0][1] * 1e9)}")
        # The platform's cost per byte received (the devicecpu library charges it where the
        # process asks: WEARLAB_DEVICE_PER_BYTE; tcpcryptd reads the line and never uses it).
        for kind in sorted(self.per_byte):
            c = self.per_byte[kind]
            lines.append(f"bytes {c.key} " + " ".join(f"{s}:{round(t * 1e9)}" for s, t in c.points))
        return "\n".join(lines) + "\n"

    def summary(self) -> dict[str, Any]:
        """What results record of the device (metadata.json, plan.json)."""
        return {"device": self.name, "defined_in": self.defined_in, "like": self.like,
                "handshake_s": self.handshake.seconds(), "resumed_handshake_s": self.resumed.seconds(),
                "abbreviated_handshake_s": self.abbreviated.seconds(),
                "cpu_factor": self.cpu_factor.value, "cores": self.cores.value,
                "per_byte_s": {k: {"s_per_byte": c.seconds(1), "basis": c.basis, "source": c.source}
                               for k, c in sorted(self.per_byte.items())},
                "handshake_basis": self.handshake.basis, "handshake_source": self.handshake.source,
                "costs": {k: {"points": [[s, t] for s, t in c.points], "basis": c.basis} for k, c in sorted(self.costs.items())}}


# ---------------------------------------------------------------------------------------------
# Loading


def _costs_of(spec: DeviceSpec) -> dict[str, Cost]:
    out: dict[str, Cost] = {}
    for algo, ops in spec.keys.items():
        for op in KEY_OPS:
            t: OpTime | None = getattr(ops, op)
            if t is not None:
                out[f"{op}:{algo}"] = Cost(f"{op}:{algo}", ((0, t.seconds),), t.basis, t.source)
    for group, table in (("digest", spec.digests), ("cipher", spec.ciphers)):
        for name, tp in table.items():
            pts = tuple((s, s / (r * 1000)) for s, r in tp.kbytes_per_s.items())
            out[f"{group}:{name}"] = Cost(f"{group}:{name}", pts, tp.basis, tp.source)
    return out


def resolve_devices(specs: dict[str, DeviceSpec], known: dict[str, Device], file: str, lines: LineMap,
                    at: YamlPath = ()) -> dict[str, Device]:
    """Resolve `specs`, which sit at `at` in `file` (their `like:` may name one another or a device
    of `known`). Raises InputError with every problem."""
    problems: list[Problem] = []
    out: dict[str, Device] = {}
    failed: set[str] = set()   # reported once, not again for each device that is like it

    def problem(path: YamlPath, message: str) -> None:
        full = (*at, *path)
        problems.append(Problem(file, line_of(lines, full), dotted(full), message))

    def resolve(name: str, chain: tuple[str, ...]) -> Device | None:
        if name in out or name in failed:
            return out.get(name)
        device = _resolve(name, chain)
        if device is None:
            failed.add(name)
        return device

    def _resolve(name: str, chain: tuple[str, ...]) -> Device | None:
        spec = specs[name]
        base: Device | None = None
        if spec.like is not None:
            other = spec.like.device
            if other in chain:
                problem((name, "like", "device"), f"'{name}' is like '{other}', which is like '{name}': a device "
                                                  f"cannot be derived from itself ({' -> '.join((*chain, other))})")
                return None
            if other in specs:
                base = resolve(other, (*chain, other))
                if base is None:
                    return None
            elif other in known:
                base = known[other]
            else:
                names = sorted({*specs, *known} - {name})
                problem((name, "like", "device"), f"unknown device '{other}'{did_you_mean(other, names)} "
                                                  f"(devices: {', '.join(names)})")
                return None
        own = _costs_of(spec)
        costs: dict[str, Cost] = {}
        if base is not None:
            k, basis, why = spec.like.scale, spec.like.basis, spec.like.source
            for key, c in base.costs.items():
                # An assumption anywhere down the chain makes the result one.
                b = "assumed" if "assumed" in (basis, c.basis) else "derived"
                costs[key] = c.scaled(k, b, f"{why}: {base.name}'s {key} x {k:g} ({c.basis}: {c.source})")
        costs.update(own)

        def inherited(c: Cost, what: str) -> Cost:
            b = "assumed" if "assumed" in (spec.like.basis, c.basis) else "derived"
            return c.scaled(spec.like.scale, b, f"{spec.like.source}: {base.name}'s {what} x {spec.like.scale:g} "
                                                f"({c.basis}: {c.source})")

        if spec.handshake is not None:
            hs = platform(name, chain, "handshake", spec.handshake, costs, None)
            if hs is None:
                return None
        elif base is not None:
            hs = inherited(base.handshake, "handshake")
        else:
            problem((name,), "missing 'handshake:' - the platform's cost per TLS handshake beyond its primitives "
                             "(0ms with assumed: why, if there is none), or like: a device that has one")
            return None
        if spec.resumed_handshake is not None:
            resumed = platform(name, chain, "resumed_handshake", spec.resumed_handshake, costs,
                               (hs, spec.handshake))
            if resumed is None:
                return None
        elif spec.handshake is None and base is not None:
            resumed = Cost("resumed_handshake", *_rest(inherited(base.resumed, "resumed handshake")))
        else:  # its own full handshake and no resumed one: a resumption is taken to cost as much
            resumed = Cost("resumed_handshake", hs.points, "assumed",
                           "not given: a resumed handshake taken to cost the platform a full one's "
                           f"({hs.basis}: {hs.source})")
        if spec.abbreviated_handshake is not None:
            abbreviated = platform(name, chain, "abbreviated_handshake", spec.abbreviated_handshake, costs,
                                   (hs, spec.handshake))
            if abbreviated is None:
                return None
        elif spec.handshake is None and spec.resumed_handshake is None and base is not None:
            abbreviated = Cost("abbreviated_handshake", *_rest(inherited(base.abbreviated, "abbreviated handshake")))
        else:  # not given: a TLS 1.2 abbreviated handshake taken to cost what a resumed one does
            abbreviated = Cost("abbreviated_handshake", resumed.points, "assumed",
                               "not given: a TLS 1.2 abbreviated handshake taken to cost the platform a resumed "
                               f"one's ({resumed.basis}: {resumed.source})")
        per_byte: dict[str, Cost] = {}
        if base is not None:
            per_byte = {k: inherited(c, f"per-byte {k} cost") for k, c in base.per_byte.items()}
        for kind, dc in spec.per_byte.items():
            c = data_cost(name, kind, dc, costs)
            if c is None:
                return None
            per_byte[kind] = c
        if spec.cores is not None:
            ncores = Figure(spec.cores.value, spec.cores.basis, spec.cores.source)
        elif base is not None:
            b = "assumed" if "assumed" in (spec.like.basis, base.cores.basis) else "derived"
            ncores = Figure(base.cores.value, b, f"{spec.like.source}: {base.name}'s cores "
                                                 f"({base.cores.basis}: {base.cores.source})")
        else:
            ncores = Figure(1, "assumed", "not given: one core, the least parallelism")
        if spec.cpu_factor is not None:
            factor = Figure(spec.cpu_factor.value, spec.cpu_factor.basis, spec.cpu_factor.source)
        elif base is not None:
            b = "assumed" if "assumed" in (spec.like.basis, base.cpu_factor.basis) else "derived"
            factor = Figure(max(1.0, base.cpu_factor.value * spec.like.scale), b,
                            f"{spec.like.source}: {base.name}'s {base.cpu_factor.value:g} x {spec.like.scale:g} "
                            f"({base.cpu_factor.basis}: {base.cpu_factor.source})")
        else:
            problem((name,), "missing 'cpu_factor:' - how much slower than this machine the device does other "
                             "work (value: 5 with measured/derived/assumed), or like: a device that has one")
            return None
        out[name] = Device(name=name, description=spec.description, defined_in=file, costs=costs, handshake=hs,
                           cpu_factor=factor, hardware=spec.hardware or (base.hardware if base else None),
                           power=_complete_power(spec.power), like=spec.like.device if spec.like else None,
                           resumed_handshake=resumed, abbreviated_handshake=abbreviated, cores=ncores,
                           per_byte=per_byte)
        return out[name]

    def other_device(name: str, chain: tuple[str, ...], at: YamlPath, other: str) -> Device | None:
        if other in chain:
            problem(at, f"'{name}' takes a figure of '{other}', which depends on '{name}': a device cannot be "
                        f"derived from itself ({' -> '.join((*chain, other))})")
            return None
        if other in specs:
            return resolve(other, (*chain, other))
        if other in known:
            return known[other]
        names = sorted({*specs, *known} - {name})
        problem(at, f"unknown device '{other}'{did_you_mean(other, names)} (devices: {', '.join(names)})")
        return None

    def primitives(name: str, at: YamlPath, counts: dict[str, int], costs: dict[str, Cost]) -> tuple[float, str] | None:
        """The time of `counts` primitives on this device, and how it adds up."""
        missing = [k for k in counts if k not in costs]
        if missing:
            problem(at, f"'{missing[0]}' is not an operation of {name} (it has: {', '.join(sorted(costs))})")
            return None
        total = sum(n * costs[k].seconds() for k, n in counts.items())
        terms = " + ".join(f"{f'{n} x ' if n != 1 else ''}{k} {_ms(costs[k].seconds())} ({costs[k].basis})"
                           for k, n in counts.items())
        return total, terms

    def platform(name: str, chain: tuple[str, ...], which: str, pc: PlatformCost, costs: dict[str, Cost],
                 full: tuple[Cost, PlatformCost | None] | None) -> Cost | None:
        at = (name, which)
        basis, why = pc.basis, pc.source
        if pc.time is not None or pc.per_s is not None:
            t = pc.time if pc.time is not None else 1.0 / pc.per_s
            return Cost(which, ((0, t),), basis, why)
        if pc.like is not None:
            other = other_device(name, chain, (*at, "like", "device"), pc.like.device)
            if other is None:
                return None
            c = {"handshake": other.handshake, "resumed_handshake": other.resumed,
                 "abbreviated_handshake": other.abbreviated}[which]
            b = "assumed" if "assumed" in (basis, c.basis) else basis
            return Cost(which, tuple((sz, t * pc.like.scale) for sz, t in c.points), b,
                        f"{why} [{other.name}'s {which} {_ms(c.seconds())} x {pc.like.scale:g} = "
                        f"{_ms(c.seconds() * pc.like.scale)}; {c.basis}: {c.source}]")
        if pc.residual is not None:
            r = pc.residual
            got = primitives(name, (*at, "residual", "minus"), r.minus, costs)
            if got is None:
                return None
            sub, terms = got
            t = r.share * r.of - sub
            arithmetic = (f"{r.share:g} x {_ms(r.of)} = {_ms(r.share * r.of)}"
                          + (f" minus {terms} = {_ms(sub)}" if r.minus else "") + f" -> {_ms(t)}")
            if t < 0:
                problem((*at, "residual"), f"the primitives take longer than the time they are taken from: {arithmetic}")
                return None
            return Cost(which, ((0, t),), basis, f"{why} [{arithmetic}]")
        # share_of_handshake: the full handshake's platform cost in proportion to what it computes
        hs, hs_spec = full if full is not None else (None, None)
        if which == "handshake" or hs_spec is None or hs_spec.residual is None or not hs_spec.residual.minus:
            problem((*at, "share_of_handshake"), "share_of_handshake: goes on resumed_handshake or "
                                                 "abbreviated_handshake, with a handshake: given as residual: "
                                                 "{..., minus: ...} (whose primitives it shares)")
            return None
        keep = primitives(name, (*at, "share_of_handshake"), pc.share_of_handshake, costs)
        whole = primitives(name, (name, "handshake", "residual", "minus"), hs_spec.residual.minus, costs)
        if keep is None or whole is None:
            return None
        k = keep[0] / whole[0]
        # {}: none of the full handshake's primitives (TLS 1.2's abbreviated handshake): no share
        return Cost(which, ((0, hs.seconds() * k),), basis,
                    f"{why} [the handshake's {_ms(hs.seconds())} x ({keep[1] or 'none of them'}) / "
                    f"({_ms(whole[0])} of its primitives) = {_ms(hs.seconds())} x {k:.4g} -> {_ms(hs.seconds() * k)}]")

    def data_cost(name: str, kind: str, dc: DataCost, costs: dict[str, Cost]) -> Cost | None:
        at = (name, "per_byte", kind)
        if dc.time is not None:
            t, how = dc.time, ""
        else:
            r = dc.rate
            t = r.seconds_per_byte
            how = (f"{r.wire_bytes:,} B on the wire at {r.mbit_s:g} Mbit/s = {r.wire_bytes * 8 / r.mbit_s / 1e6:.4g} s "
                   f"for {r.payload_bytes:,} B of data: {t * 1e9:.1f} ns/B")
        missing = [k for k in dc.less if k not in costs or not costs[k].per_byte]
        if missing:
            problem((*at, "less"), f"'{missing[0]}' is not a per-byte operation of {name} "
                                   f"(it has: {', '.join(sorted(k for k, c in costs.items() if c.per_byte))})")
            return None
        prim = sum(costs[k].seconds(dc.record) for k in dc.less) / dc.record
        if dc.less:
            how += (f"{'; ' if how else ''}minus " + " + ".join(
                f"{k} {costs[k].seconds(dc.record) / dc.record * 1e9:.1f} ns/B" for k in dc.less)
                + f" (at {dc.record} B a record, charged per call) -> {(t - prim) * 1e9:.1f} ns/B")
        if t - prim <= 0:
            problem(at, f"the primitives take longer than the time per byte they are taken from: {how}")
            return None
        return Cost(f"data:{kind}", ((1_000_000, (t - prim) * 1e6),), dc.basis,
                    dc.source + (f" [{how}]" if how else ""))

    for name in specs:
        resolve(name, (name,))
    if problems:
        raise InputError(sort_problems(problems))
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g} ms"


def _rest(c: Cost) -> tuple:
    return c.points, c.basis, c.source


def _complete_power(p: Power | None) -> Power | None:
    """The levels the model uses, every one given: a level the device does not give is another's,
    marked assumed with the reason (never taken silently)."""
    if p is None or not p.levels:
        return p
    levels = dict(p.levels)
    for state, like in ((PowerState.CONNECT, PowerState.HANDSHAKE), (PowerState.DATA_ENCRYPTED, PowerState.DATA)):
        if state not in levels:
            f = levels[like]
            why = {PowerState.CONNECT: "the TCP handshake's few packets",
                   PowerState.DATA_ENCRYPTED: "encrypted data exchange"}[state]
            levels[state] = PowerFigure(mw=f.watts * 1e3, assumed=(
                f"not given: {why} taken at the {like.value} level ({f.describe()}, {f.overall_basis}: "
                f"{f.source})"))
    return p.model_copy(update={"levels": levels})


def specs_from_mapping(data: Any, file: str, lines: LineMap, at: YamlPath = ()) -> dict[str, DeviceSpec]:
    """Validate a mapping of device name -> spec sitting at `at` in `file`. InputError with every
    problem, each at its line and field."""
    if not isinstance(data, dict):
        raise InputError([Problem(file, line_of(lines, at), dotted(at) or None,
                                  "devices are a mapping of name -> device (see `wearlab devices`)")])
    problems: list[Problem] = []
    out: dict[str, DeviceSpec] = {}
    for name, raw in data.items():
        here = (*at, name)
        if not isinstance(name, str) or not DEVICE_NAME.match(name):
            problems.append(Problem(file, line_of(lines, here), dotted(here), f"bad device name '{name}': {DEVICE_NAME_RULE}"))
            continue
        try:
            out[name] = DeviceSpec.model_validate(raw if raw is not None else {})
        except ValidationError as e:
            problems += problems_from_validation(e, lines, file, DeviceSpec, here)
    if problems:
        raise InputError(sort_problems(problems))
    return out


def load_device_file(path: str | Path, known: dict[str, Device]) -> dict[str, Device]:
    """A YAML file whose top level maps device names to devices."""
    src = load_yaml(path)
    if src.data is None:
        raise InputError([Problem(src.file, None, None, "file is empty; a devices file maps names to devices")])
    specs = specs_from_mapping(src.data, src.file, src.lines)
    clash = [n for n in specs if n in known]
    if clash:
        raise InputError([Problem(src.file, src.line((n,)), n, f"'{n}' is a built-in device; give yours another "
                                  f"name (like: {{device: {n}, scale: 1, derived: ...}} starts from it)") for n in clash])
    return resolve_devices(specs, known, src.file, src.lines)


_BUILTIN: dict[str, Device] | None = None


def builtin_devices() -> dict[str, Device]:
    """The devices wearlab ships (devices/builtin.yaml), loaded once."""
    global _BUILTIN
    if _BUILTIN is None:
        src = load_yaml(BUILTIN_FILE)
        specs = specs_from_mapping(src.data, src.file, src.lines)
        resolved = resolve_devices(specs, {}, src.file, src.lines)
        _BUILTIN = {n: Device(**{**d.__dict__, "defined_in": "built-in"}) for n, d in resolved.items()}
    return _BUILTIN

