"""A device's time for what a node computes: wearlab's devicecpu library (src/devicecpu/, built by
`make devicecpu`) for processes that use OpenSSL, and what it counted.

A process on a node with a device (`device:` in the topology) starts with the library preloaded
and the device's profile (wearlab.model.devices.Device.profile_text). The library times every
libcrypto call the process makes on the wall clock and pads it to the device's time for that
operation and size - by sleeping, so other processes of the one guest CPU keep running as they
would on separate devices - and charges the platform's per-handshake cost before the client's
second flight leaves (src/devicecpu/README.md says why this design, and what was measured against
it). It keeps its counters in a file: per operation the calls, bytes, time here and time on the
device, and per phase (inside the TLS handshake, outside it) the device's time, which `Counters`
reads around each run.

Who gets it: the http-get client's fetch agent (pycurl/libcurl/OpenSSL). tcpcryptd pads its own
operations from the same profile (`--device-profile`, nodes.tcpcrypt). A phone's proxies (relay,
HAProxy, a command) get the library with the device's general CPU factor on their computation
between system calls (nodes.proxies): their user-space work slows by the factor; the kernel's
work for them (splice, the copies of recv and send) does not. Without `device:` nothing is
preloaded and nothing changes.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wearlab.errors import EnvironmentProblem
from wearlab.model.devices import Device

ROOT = Path(__file__).resolve().parents[3]
LIBRARY = ROOT / "build" / "devicecpu" / "libwearlab-devicecpu.so"
PAD_ENV = "WEARLAB_DEVICE_PAD"          # sleep (default) or spin; crosses into the UML guest
CPU_FACTOR_ENV = "WEARLAB_DEVICE_CPU_FACTOR"  # 1: the general CPU factor between system calls
PADS = ("sleep", "spin")
MECHANISM = ("devicecpu: LD_PRELOAD library timing each libcrypto call on the wall clock (TSC) and padding it "
             "to the device's table time for its operation and size; the platform's per-handshake cost before "
             "the client's second flight")

# The counters file (src/devicecpu/wearlab_devicecpu.c, struct stats_file).
_MAGIC = b"WLDCPU1\0"
_HEADER = struct.Struct("<8sII64s")
_SLOT = struct.Struct("<48sQQQQ")
SLOTS = 128
PHASES = ("phase:handshake", "phase:other")


def mechanism_facts() -> dict[str, str]:
    """How a device's time is made, for metadata.json."""
    return {"openssl_processes": MECHANISM, "pad": pad_mode(),
            "tcpcryptd": "--device-profile: X25519/P-256 derive and keygen, AEAD seal/open per byte and HKDF padded "
                         "to the profile's times in the daemon itself",
            "proxies": "the device's general CPU factor on the proxy's own computation between system calls "
                       "(devicecpu library, WEARLAB_DEVICE_CPU_FACTOR)",
            "other": "everything else on the node computes at this machine's speed"}


def library() -> Path:
    if not LIBRARY.is_file():
        raise EnvironmentProblem(f"a node with a device needs wearlab's devicecpu library at {LIBRARY}: build it "
                                 "with `make devicecpu` (make setup does)")
    return LIBRARY


def pad_mode() -> str:
    mode = os.environ.get(PAD_ENV, "sleep")
    if mode not in PADS:
        raise EnvironmentProblem(f"{PAD_ENV}={mode}: the device's time is padded by {' or '.join(PADS)}")
    return mode


@dataclass(frozen=True)
class Counter:
    calls: int
    bytes: int
    host_s: float
    device_s: float

    def __sub__(self, other: Counter) -> Counter:
        return Counter(self.calls - other.calls, self.bytes - other.bytes, self.host_s - other.host_s,
                       self.device_s - other.device_s)


def read_counters(path: Path) -> dict[str, Counter]:
    """The counters a process with the library keeps in `path` (empty before it wrote any)."""
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    if len(data) < _HEADER.size or not data.startswith(_MAGIC):
        return {}
    _, used, _, _ = _HEADER.unpack_from(data)
    out = {}
    for i in range(min(used, SLOTS)):
        key, calls, nbytes, host, dev = _SLOT.unpack_from(data, _HEADER.size + i * _SLOT.size)
        out[key.split(b"\0")[0].decode()] = Counter(calls, nbytes, host / 1e9, dev / 1e9)
    return out


class DeviceProcess:
    """One process's use of the mechanism: its profile, its counters file, its environment."""

    def __init__(self, device: Device, workdir: Path, name: str, *, cpu_factor: bool = False):
        """`cpu_factor`: also scale the process's computation between system calls by the device's
        general CPU factor (a proxy's own work; not for a TLS client, whose platform cost already
        holds its stack's)."""
        self.device = device
        self.cpu_factor = cpu_factor
        workdir.mkdir(parents=True, exist_ok=True)
        self.profile = workdir / f"{name}.device-profile"
        self.stats = workdir / f"{name}.device-counters"
        self.profile.write_text(device.profile_text())
        self.pad = pad_mode()
        library()

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        preload = [str(library()), *[p for p in env.get("LD_PRELOAD", "").split() if p]]
        env.update(LD_PRELOAD=" ".join(preload), WEARLAB_DEVICE_PROFILE=str(self.profile),
                   WEARLAB_DEVICE_STATS=str(self.stats), **{PAD_ENV: self.pad})
        if self.cpu_factor:
            env[CPU_FACTOR_ENV] = "1"
        return env

    def counters(self) -> dict[str, Counter]:
        return read_counters(self.stats)

    def facts(self) -> dict[str, Any]:
        return {"device": self.device.name, "mechanism": MECHANISM, "pad": self.pad, "library": str(LIBRARY),
                "profile": str(self.profile),
                "cpu_factor": self.device.cpu_factor.value if self.cpu_factor else None}


class RunCounters:
    """What the device computed in one run: counters read before it and compared after."""

    def __init__(self, proc: DeviceProcess):
        self.proc = proc
        self.before = proc.counters()

    def delta(self) -> dict[str, Counter]:
        after = self.proc.counters()
        zero = Counter(0, 0, 0.0, 0.0)
        return {k: c - self.before.get(k, zero) for k, c in after.items() if c != self.before.get(k, zero)}

    def metrics(self) -> dict[str, float]:
        """The device's CPU time in the run's TLS handshake and outside it (crypto and the
        platform's handshake cost; seconds on the device), for the energy model."""
        d = self.delta()
        zero = Counter(0, 0, 0.0, 0.0)
        return {"device_cpu_handshake_s": round(d.get(PHASES[0], zero).device_s, 6),
                "device_cpu_other_s": round(d.get(PHASES[1], zero).device_s, 6)}
