"""A device's time for what a node computes: wearlab's devicecpu library (src/devicecpu/, built by
`make devicecpu`) for processes that use OpenSSL, and what it counted.

A process on a node with a device (`device:` in the topology) starts with the library preloaded
and the device's profile (wearlab.model.devices.Device.profile_text). The library times every
libcrypto call the process makes on the wall clock and pads it to the device's time for that
operation and size - by sleeping, so other processes of the one guest CPU keep running as they
would on separate devices - and charges a client's platform cost per TLS handshake (full or
resumed) before its second flight leaves (src/devicecpu/README.md says why this design, and what
was measured against it). It keeps its counters in a file (`DeviceProcess.stats`): per operation
the calls, bytes, time here and time on the device, and per phase (inside the TLS handshake,
outside it) the device's time, which `RunCounters` reads around each run. A child that inherits
the environment (an exec'd program, a forked worker) adds to the same counters.

A node's computation is limited to its device's cores (`Device.cores`): every process of the
node with the library, and its tcpcryptd (`--device-cores`), claims the device's time on the
node's cores file (`NodeCpu`: per core, until when it is busy, on the TSC's clock), so N threads
or processes computing at once queue onto the device's cores instead of each getting one. The
TSC's rate is measured once (`tsc_hz`) and written into each node's file and environment; a TSC
that is not invariant (/proc/cpuinfo's constant_tsc and nonstop_tsc) is refused.

The platform's cost per byte of data received (Device.per_byte: seed 000's watch moved HTTP at
2.6 and HTTPS at 2.1 Mbit/s) is charged in the application's process (`per_byte`: the fetch agent)
as it reads - plain on recv, encrypted on SSL_read's plaintext - and paid by sleeping, so the
application consumes data at the device's rate and TCP's window carries the rate to the sender
(the last receive buffer's worth arrives on the wire before the application has read it).

Who gets it: the http-get client's fetch agent (pycurl/libcurl/OpenSSL). tcpcryptd pads its own
operations from the same profile (`--device-profile`, nodes.tcpcrypt), on the node's cores file
(`--device-cores`). A phone's proxies (relay,
HAProxy, a command) get the library with the device's general CPU factor on their computation
between system calls (nodes.proxies): their user-space work slows by the factor; the kernel's
work for them (splice, the copies of recv and send) does not. Without `device:` nothing is
preloaded and nothing changes.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
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
CORES_ENV = "WEARLAB_DEVICE_CORES"      # the node's cores file (NodeCpu)
TSC_HZ_ENV = "WEARLAB_DEVICE_TSC_HZ"    # the TSC's rate, measured once (tsc_hz)
PER_BYTE_ENV = "WEARLAB_DEVICE_PER_BYTE"  # 1: the platform's cost per byte received (Device.per_byte)
PADS = ("sleep", "spin")
MECHANISM = ("devicecpu: LD_PRELOAD library timing each libcrypto call on the wall clock (TSC) and padding it "
             "to the device's table time for its operation and size, queued onto the device's cores (one "
             "cores file per node, shared by its processes and its tcpcryptd); a TLS client's platform cost "
             "per handshake (full or resumed) before its second flight, else when the handshake completes; "
             "the application's platform cost per byte received (data:plain on recv outside TLS, "
             "data:encrypted on SSL_read's plaintext) where the device has one")

# The counters file (src/devicecpu/wearlab_devicecpu.c, struct stats_file).
_MAGIC = b"WLDCPU2\0"
_HEADER = struct.Struct("<8sII64s")
_SLOT = struct.Struct("<48sQQQQ")
SLOTS = 128
STATS_SIZE = _HEADER.size + SLOTS * _SLOT.size
PHASES = ("phase:handshake", "phase:other")
OVERFLOW = "hs:overflow"   # handshakes the library's table had no room for (charged at completion)
# The platform's cost of a resumed client handshake: TLS 1.3's (and QUIC's), TLS 1.2's abbreviated one
RESUMED_PLATFORM = ("platform:resumed-handshake", "platform:abbreviated-handshake")
# A TLS handshake's key exchange and its authentication, as the library names the operations: key
# pairs, agreements, signatures (the ServerKeyExchange's or CertificateVerify's, and a client's
# own) and the certificate chain's verification (one per certificate below the trust anchor). A
# full handshake computes them; a TLS 1.3 resumption its (EC)DHE only (psk_dhe_ke); TLS 1.2's
# abbreviated handshake none. "~" marks an operation the profile lacks (host time x cpu_factor).
KEY_EXCHANGE_OPS = ("keygen", "derive", "sign", "verify")
CHAIN = "x509-chain"


def key_exchange_s(counts: dict[str, Counter]) -> float:
    """The device's time in `counts`' key-exchange operations (KEY_EXCHANGE_OPS and the chain)."""
    def kx(key: str) -> bool:
        op = key.lstrip("~")
        return op == CHAIN or op.split(":")[0] in KEY_EXCHANGE_OPS
    return sum(c.device_s for k, c in counts.items() if kx(k))
QUEUED = "cores:queued"    # device time spent waiting for a free core

# The node's cores file (struct cores_file; tcpcrypt/devicecores reads it too).
_CORES_MAGIC = b"WLCORE1\0"
_CORES_HEADER = struct.Struct("<8sIId")
MAX_CORES = 64
CORES_SIZE = _CORES_HEADER.size + MAX_CORES * 8
INVARIANT_TSC = ("constant_tsc", "nonstop_tsc")


def mechanism_facts() -> dict[str, str]:
    """How a device's time is made, for metadata.json."""
    return {"openssl_processes": MECHANISM, "pad": pad_mode(),
            "tcpcryptd": "--device-profile: X25519/P-256 derive and keygen, AEAD seal/open per byte and HKDF padded "
                         "to the profile's times in the daemon itself, on the node's cores (--device-cores)",
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


def tsc_flags_missing(cpuinfo: str) -> list[str]:
    """The flags of an invariant TSC that /proc/cpuinfo's text lacks (on any of its processors)."""
    missing: set[str] = set()
    seen = False
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            seen = True
            missing |= set(INVARIANT_TSC) - set(value.split())
    return [f for f in INVARIANT_TSC if f in missing or not seen]


def check_invariant_tsc(cpuinfo: Path = Path("/proc/cpuinfo")) -> None:
    """The library's clock is the TSC at one rate for the whole node: refuse a TSC whose rate
    changes with the CPU's frequency or that stops in idle states. Checked where the node's
    processes run: the UML guest's /proc/cpuinfo shows the host's flags (UML copies them from the
    host's), so the check there is the host's. No check off x86 (the library reads
    CLOCK_MONOTONIC there)."""
    if platform.machine() not in ("x86_64", "i386", "i686"):
        return
    try:
        text = cpuinfo.read_text()
    except OSError as e:
        raise EnvironmentProblem(f"a node with a device needs an invariant TSC, and {cpuinfo} cannot be read to "
                                 f"check it: {e}") from None
    missing = tsc_flags_missing(text)
    if missing:
        raise EnvironmentProblem(
            f"a node with a device needs an invariant TSC (the devicecpu library times every operation and "
            f"shares the node's cores on it), and this CPU's lacks {' and '.join(missing)} in {cpuinfo}: its rate "
            "would change with the CPU's frequency or stop in idle states. Run on a machine (or a VM with an "
            "invariant TSC passed through, e.g. QEMU's -cpu host,+invtsc) whose /proc/cpuinfo lists "
            f"{' and '.join(INVARIANT_TSC)}")


@functools.cache
def tsc_hz() -> float:
    """The TSC's rate, measured once per wearlab process (100 ms against CLOCK_MONOTONIC, by the
    library itself through ctypes: its own clock is what is calibrated) and handed to every node;
    0 off x86. The library is loaded RTLD_LOCAL, so it interposes nothing in this process."""
    check_invariant_tsc()
    lib = ctypes.CDLL(str(library()))
    measure = lib.wearlab_devicecpu_measure_tsc_hz
    measure.restype = ctypes.c_double
    measure.argtypes = [ctypes.c_int]
    return float(measure(100))


class NodeCpu:
    """A node's device cores: one file per node that every process of the node with the library
    (WEARLAB_DEVICE_CORES) and its tcpcryptd (--device-cores) map and claim the device's time on.
    Created and initialised once per node, here; processes only open it."""

    def __init__(self, device: Device, path: Path):
        self.device = device
        self.path = path
        self.cores = device.cores.value
        if not 1 <= self.cores <= MAX_CORES:
            raise EnvironmentProblem(f"device {device.name}: {self.cores} cores; the mechanism holds 1 to {MAX_CORES}")
        self.tsc_hz = tsc_hz()
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_in_place(path, _CORES_HEADER.pack(_CORES_MAGIC, self.cores, 0, self.tsc_hz).ljust(CORES_SIZE, b"\0"))

    def env(self) -> dict[str, str]:
        out = {CORES_ENV: str(self.path)}
        if self.tsc_hz:
            out[TSC_HZ_ENV] = repr(self.tsc_hz)
        return out

    def facts(self) -> dict[str, Any]:
        return {"cores": self.cores, "cores_basis": self.device.cores.basis, "cores_file": str(self.path),
                "tsc_hz": self.tsc_hz}


_NODES: dict[Path, NodeCpu] = {}


def node_cpu(run_dir: Path, node: str, device: Device) -> NodeCpu:
    """The cores file of `node` in the run whose work directory is `run_dir` (the network's), made
    on first use: the processes of one node share it, whichever part of wearlab starts them."""
    path = (run_dir / "devicecpu" / f"{node}.device-cores").resolve()
    cpu = _NODES.get(path)
    if cpu is None or cpu.device != device or not path.is_file():
        cpu = _NODES[path] = NodeCpu(device, path)
    return cpu


@dataclass(frozen=True)
class Counter:
    calls: int
    bytes: int
    host_s: float
    device_s: float

    def __sub__(self, other: Counter) -> Counter:
        return Counter(self.calls - other.calls, self.bytes - other.bytes, self.host_s - other.host_s,
                       self.device_s - other.device_s)

    def __add__(self, other: Counter) -> Counter:
        return Counter(self.calls + other.calls, self.bytes + other.bytes, self.host_s + other.host_s,
                       self.device_s + other.device_s)


def read_counters(path: Path) -> dict[str, Counter]:
    """The counters a process with the library keeps in `path` (empty before it wrote any)."""
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    if len(data) < STATS_SIZE or not data.startswith(_MAGIC):
        return {}
    _, used, _, _ = _HEADER.unpack_from(data)
    out: dict[str, Counter] = {}
    for i in range(min(used, SLOTS)):
        key, calls, nbytes, host, dev = _SLOT.unpack_from(data, _HEADER.size + i * _SLOT.size)
        name = key.split(b"\0")[0].decode(errors="replace")
        if not name:  # a slot being claimed by another process at this instant
            continue
        c = Counter(calls, nbytes, host / 1e9, dev / 1e9)
        # Two processes that added a key at the same instant each made it a slot: one counter.
        out[name] = out[name] + c if name in out else c
    return out


def init_counters(path: Path, device: str) -> None:
    """A zeroed counters file in the library's layout: processes open it as it is and add to it."""
    _write_in_place(path, _HEADER.pack(_MAGIC, 0, 0, device.encode()[:63]).ljust(STATS_SIZE, b"\0"))


def _write_in_place(path: Path, data: bytes) -> None:
    """Write `data` over the file's start without truncating it first: a process that still maps
    it (one of a node's, from an earlier start) sees new values, never a shorter file (SIGBUS)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        os.pwrite(fd, data, 0)
        if os.fstat(fd).st_size != len(data):
            os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


class DeviceProcess:
    """One process's use of the mechanism: its profile, its counters file, its environment."""

    def __init__(self, device: Device, workdir: Path, name: str, *, cpu_factor: bool = False,
                 node: NodeCpu | None = None, per_byte: bool = False, node_name: str | None = None):
        """`cpu_factor`: also scale the process's computation between system calls by the device's
        general CPU factor (a proxy's own work; not for a TLS client, whose platform cost already
        holds its stack's). `node`: the node's cores (node_cpu), shared with the node's other
        processes; without it the process (its threads and children) is a node of its own.
        `per_byte`: also charge the device's platform cost per byte the process receives
        (Device.per_byte: plain on recv outside TLS, encrypted on SSL_read's plaintext) - the
        application's data path (the fetch agent), not a relay's."""
        self.device = device
        self.cpu_factor = cpu_factor
        self.per_byte = per_byte and bool(device.per_byte)
        library()
        workdir.mkdir(parents=True, exist_ok=True)
        self.profile = workdir / f"{name}.device-profile"
        self.stats = workdir / f"{name}.device-counters"
        self.profile.write_text(device.profile_text())
        init_counters(self.stats, device.name)
        self.pad = pad_mode()
        self.node = node if node is not None else NodeCpu(device, workdir / f"{name}.device-cores")
        self.node_name = node_name or name

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        preload = [str(library()), *[p for p in env.get("LD_PRELOAD", "").split() if p]]
        env.update(LD_PRELOAD=" ".join(preload), WEARLAB_DEVICE_PROFILE=str(self.profile),
                   WEARLAB_DEVICE_STATS=str(self.stats), **{PAD_ENV: self.pad}, **self.node.env())
        if self.cpu_factor:
            env[CPU_FACTOR_ENV] = "1"
        if self.per_byte:
            env[PER_BYTE_ENV] = "1"
        return env

    def counters(self) -> dict[str, Counter]:
        return read_counters(self.stats)

    def facts(self) -> dict[str, Any]:
        return {"device": self.device.name, "mechanism": MECHANISM, "pad": self.pad, "library": str(LIBRARY),
                "profile": str(self.profile), **self.node.facts(),
                "cpu_factor": self.device.cpu_factor.value if self.cpu_factor else None,
                "per_byte": ({k: {"ns_per_byte": c.seconds(1) * 1e9, "basis": c.basis, "source": c.source}
                              for k, c in self.device.per_byte.items()} if self.per_byte else None)}


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

    def rows(self) -> list[dict[str, Any]]:
        """The run's counters per operation (series/devicecpu.csv): what the device computed -
        calls, bytes, the time here and on the device - so a profile's derivation can be checked
        against what a run really does (e.g. which primitives a handshake computes)."""
        node = self.proc.node_name
        return [{"node": node, "op": k, "calls": c.calls, "bytes": c.bytes, "host_s": round(c.host_s, 9),
                 "device_s": round(c.device_s, 9)} for k, c in sorted(self.delta().items())]

    def overflow(self) -> int:
        """Handshakes in the run that the library's table had no room for: charged when they
        completed rather than before the client's second flight (0 unless a process had more than
        1024 client handshakes in progress at once)."""
        return self.delta().get(OVERFLOW, Counter(0, 0, 0.0, 0.0)).calls
