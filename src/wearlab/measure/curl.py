"""Run-time metrics from curl: the command line to run and the parser of its ``-w`` output.

The write-out format is curl's ``%{json}`` (curl >= 7.70; 7.88 includes every variable used
here, local_port included, and escapes ``errormsg`` properly). It is printed on its own line
(preceded by a newline), so :func:`parse_write_out` also works when the body goes to stdout.

Times are seconds since the start of the transfer, cumulative (curl semantics):
time_namelookup <= time_connect <= time_appconnect (0 for plain HTTP) <= time_pretransfer <=
time_starttransfer <= time_total.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from wearlab.model.tls import TLS_VERSIONS

CURL_TIMES = ("time_namelookup", "time_connect", "time_appconnect", "time_pretransfer",
              "time_starttransfer", "time_total")
CURL_INTS = ("http_code", "size_download", "size_upload", "size_header", "size_request",
             "speed_download", "local_port", "remote_port", "ssl_verify_result", "num_connects",
             "exitcode")
CURL_STRS = ("local_ip", "remote_ip", "errormsg")
# Every key of the dict returned by parse_write_out, in a stable (column) order.
CURL_FIELDS = CURL_TIMES + CURL_INTS + CURL_STRS

CURL_WRITE_OUT = "\n%{json}\n"

# OpenSSL 3.0's default TLS 1.3 groups. The pycurl wheel bundles a newer OpenSSL whose default
# adds a post-quantum hybrid key share (+1.2 KB in every ClientHello); pinning the classic list
# keeps the handshake the one the system's curl and nginx (OpenSSL 3.0) negotiate.
CLASSIC_GROUPS = "X25519:P-256:X448:P-521:P-384"


@dataclass(frozen=True)
class TlsOptions:
    """What a client is told about TLS for one request, the one mapping from wearlab's
    parameters (version, cipher) to what OpenSSL understands. Both the fetch agent (libcurl
    options) and the curl command line (flags) are built from it."""

    version: str | None          # pin min = max = this version
    cipher_list: str | None      # TLS 1.2-and-older cipher list (OpenSSL syntax)
    tls13_ciphers: str | None    # TLS 1.3 suites
    groups: str = CLASSIC_GROUPS
    cacert: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def tls_options(tls_version: str | None, cipher: str | None, cacert: str | None) -> TlsOptions:
    """TLS 1.0/1.1 need OpenSSL 3's security level 0; a TLS 1.3 suite name goes to the 1.3 list."""
    version = _tls_version(tls_version)
    if cipher is not None and not str(cipher).strip():
        raise ValueError("cipher must be a non-empty cipher (suite) name or list")
    cipher_list = tls13 = None
    if version in ("1.0", "1.1"):
        base = cipher or "DEFAULT"
        cipher_list = base if "@SECLEVEL=" in base else f"{base}:@SECLEVEL=0"
    elif cipher is not None:
        if version == "1.3" or (version is None and cipher.startswith("TLS_")):
            tls13 = cipher
        else:
            cipher_list = cipher
    return TlsOptions(version, cipher_list, tls13, CLASSIC_GROUPS, cacert)


def parse_write_out(text: str | bytes) -> dict[str, Any]:
    """Parse the output of ``curl -w CURL_WRITE_OUT`` into a dict with exactly CURL_FIELDS:
    floats (seconds) for the times, ints for sizes/codes/ports/speed (bytes per second), strings
    for local_ip/remote_ip/errormsg ("" when curl reports none). If stdout also holds the body,
    the write-out is taken from its last non-empty line. Raises ValueError on anything else."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise ValueError(f"curl write-out must be str or bytes, got {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise ValueError("curl write-out is empty (was curl run with -w CURL_WRITE_OUT?)")
    candidates = [stripped]
    last_line = stripped.rsplit("\n", 1)[-1].strip()
    if last_line != stripped:
        candidates.append(last_line)
    obj: Any = None
    for cand in candidates:
        try:
            obj = json.loads(cand)
            break
        except json.JSONDecodeError:
            continue
    if not isinstance(obj, dict):
        shown = last_line if len(last_line) <= 80 else last_line[:77] + "..."
        raise ValueError(f"curl write-out is not a JSON object: {shown!r}")

    missing = [k for k in CURL_FIELDS if k not in obj]
    if missing:
        raise ValueError(f"curl write-out lacks {', '.join(missing)} (curl too old, or not "
                         "produced by CURL_WRITE_OUT?)")
    out: dict[str, Any] = {}
    for k in CURL_TIMES:
        v = obj[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"curl write-out: {k} must be a non-negative number of seconds, "
                             f"got {v!r}")
        out[k] = float(v)
    for k in CURL_INTS:
        v = obj[k]
        if isinstance(v, float) and math.isfinite(v) and v == int(v):
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"curl write-out: {k} must be an integer, got {v!r}")
        out[k] = v
    for k in CURL_STRS:
        v = obj[k]
        if v is None:
            v = ""
        if not isinstance(v, str):
            raise ValueError(f"curl write-out: {k} must be a string, got {v!r}")
        out[k] = v
    return out


def _tls_version(v: str | None) -> str | None:
    if v is None:
        return None
    s = str(v).strip().lower().removeprefix("tlsv").removeprefix("tls")
    if s not in TLS_VERSIONS:
        raise ValueError(f"tls_version must be None or one of {', '.join(TLS_VERSIONS)}; "
                         f"got {v!r}")
    return s


def curl_argv(url: str, *, resolve: str | None = None, connect_to: str | None = None,
              tls_version: str | None = None, cipher: str | None = None,
              cacert: str | None = None, timeout_s: float,
              output: str = "/dev/null") -> list[str]:
    """The curl command line (argv, no shell) for one measured HTTP/1.1 GET.

    * always ``--http1.1 --silent --show-error -o OUTPUT -w CURL_WRITE_OUT --max-time T``;
    * ``resolve`` -> ``--resolve HOST:PORT:ADDR``, ``connect_to`` -> ``--connect-to H1:P1:H2:P2``;
    * https only, from :func:`tls_options`: ``tls_version`` "1.X" pins the version with
      ``--tlsv1.X --tls-max 1.X``; TLS 1.0/1.1 get ``--ciphers '<cipher or DEFAULT>:@SECLEVEL=0'``;
      a cipher goes to ``--tls13-ciphers`` for "1.3" (or, with no version, when it is a TLS 1.3
      suite name "TLS_*") and to ``--ciphers`` otherwise; ``--curves`` pins the key-share groups
      the fetch agent uses; ``cacert`` -> ``--cacert`` (really verified; ``-k`` is never used).

    TLS options (tls_version, cipher) with an http:// URL raise ValueError; ``cacert`` is ignored
    for http://.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"URL must be http:// or https:// with a host, got {url!r}")
    try:
        t = float(timeout_s)
    except (TypeError, ValueError):
        raise ValueError(f"timeout_s must be a number of seconds, got {timeout_s!r}") from None
    if not (math.isfinite(t) and t > 0):
        raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
    tls = tls_options(tls_version, cipher, cacert)
    if scheme == "http" and (tls.version is not None or cipher is not None):
        raise ValueError(f"tls_version/cipher given for a plain http:// URL: {url!r}")
    if not output:
        raise ValueError("output must be a path ('/dev/null' to discard the body)")

    argv = ["curl", "--http1.1", "--silent", "--show-error", "-o", output,
            "-w", CURL_WRITE_OUT, "--max-time", f"{t:g}"]
    if resolve:
        argv += ["--resolve", resolve]
    if connect_to:
        argv += ["--connect-to", connect_to]
    if scheme == "https":
        if tls.version is not None:
            argv += [f"--tlsv{tls.version}", "--tls-max", tls.version]
        if tls.cipher_list is not None:
            argv += ["--ciphers", tls.cipher_list]
        if tls.tls13_ciphers is not None:
            argv += ["--tls13-ciphers", tls.tls13_ciphers]
        argv += ["--curves", tls.groups]
        if tls.cacert:
            argv += ["--cacert", tls.cacert]
    argv.append(url)
    return argv
