"""The client's fetch agent: a long-lived process in the client's namespace that performs one
HTTP(S) GET per request with libcurl (pycurl) and answers with curl's own phase timers.

Why a long-lived process and not the curl CLI: in a UML guest every exec of curl costs ~130 ms
of dynamic linking and page faults before curl's clock even starts, which would dominate short
runs' wall time. A persistent client is also what a wearable app is. Each request still gets a
new easy handle: a fresh DNS cache, TCP connection and TLS session (no reuse, no resumption),
so every HTTPS run pays a full handshake, as in seed 000.

Protocol: one JSON object per line on stdin (see `request`; `tls` is a
wearlab.measure.curl.TlsOptions as a dict, the same options the equivalent curl command line is
built from), one JSON object per line on stdout with the keys of
wearlab.measure.curl.CURL_FIELDS (what curl's -w '%{json}' names).
"""

from __future__ import annotations

import sys
from typing import Any

import pycurl

from wearlab.measure.agent_loop import serve

# CURLOPT_SSLVERSION pinning min and max to one TLS version (the page agent pins with it too)
SSL_VERSIONS = {
    "1.0": (pycurl.SSLVERSION_TLSv1_0, pycurl.SSLVERSION_MAX_TLSv1_0),
    "1.1": (pycurl.SSLVERSION_TLSv1_1, pycurl.SSLVERSION_MAX_TLSv1_1),
    "1.2": (pycurl.SSLVERSION_TLSv1_2, pycurl.SSLVERSION_MAX_TLSv1_2),
    "1.3": (pycurl.SSLVERSION_TLSv1_3, pycurl.SSLVERSION_MAX_TLSv1_3),
}


def request(url: str, *, resolve: str | None = None, connect_to: str | None = None,
            tls: dict[str, Any] | None = None, timeout_s: float = 60.0) -> dict[str, Any]:
    """Perform one GET; return curl's metrics (exitcode != 0 and errormsg on failure)."""
    c = pycurl.Curl()
    received = 0

    def sink(chunk: bytes) -> None:
        nonlocal received
        received += len(chunk)

    c.setopt(pycurl.URL, url)
    c.setopt(pycurl.WRITEFUNCTION, sink)
    c.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
    c.setopt(pycurl.TIMEOUT_MS, int(timeout_s * 1000))
    c.setopt(pycurl.FRESH_CONNECT, 1)
    c.setopt(pycurl.FORBID_REUSE, 1)
    c.setopt(pycurl.NOSIGNAL, 1)
    if resolve:
        c.setopt(pycurl.RESOLVE, [resolve])
    if connect_to:
        c.setopt(pycurl.CONNECT_TO, [connect_to])
    if url.startswith("https:") and tls is not None:
        c.setopt(pycurl.SSL_SESSIONID_CACHE, 0)
        c.setopt(pycurl.SSL_EC_CURVES, tls["groups"])
        if tls["cacert"]:
            c.setopt(pycurl.CAINFO, tls["cacert"])
            c.setopt(pycurl.CAPATH, "")
        if tls["version"]:
            lo, hi = SSL_VERSIONS[tls["version"]]
            c.setopt(pycurl.SSLVERSION, lo | hi)
        if tls["cipher_list"]:
            c.setopt(pycurl.SSL_CIPHER_LIST, tls["cipher_list"])
        if tls["tls13_ciphers"]:
            c.setopt(pycurl.TLS13_CIPHERS, tls["tls13_ciphers"])
    exitcode, errormsg = 0, ""
    try:
        c.perform()
    except pycurl.error as e:
        exitcode, errormsg = e.args[0], e.args[1] if len(e.args) > 1 else str(e)
    out = {
        "time_namelookup": c.getinfo(pycurl.NAMELOOKUP_TIME),
        "time_connect": c.getinfo(pycurl.CONNECT_TIME),
        "time_appconnect": c.getinfo(pycurl.APPCONNECT_TIME),
        "time_pretransfer": c.getinfo(pycurl.PRETRANSFER_TIME),
        "time_starttransfer": c.getinfo(pycurl.STARTTRANSFER_TIME),
        "time_total": c.getinfo(pycurl.TOTAL_TIME),
        "http_code": c.getinfo(pycurl.RESPONSE_CODE),
        "size_download": received,
        "speed_download": c.getinfo(pycurl.SPEED_DOWNLOAD),
        "local_ip": c.getinfo(pycurl.LOCAL_IP),
        "local_port": c.getinfo(pycurl.LOCAL_PORT),
        "remote_ip": c.getinfo(pycurl.PRIMARY_IP),
        "remote_port": c.getinfo(pycurl.PRIMARY_PORT),
        "ssl_verify_result": c.getinfo(pycurl.SSL_VERIFYRESULT),
        "num_connects": c.getinfo(pycurl.NUM_CONNECTS),
        "errormsg": errormsg,
        "exitcode": exitcode,
    }
    c.close()
    return out


def main() -> int:
    return serve(request, lambda reason: {"exitcode": -1, "errormsg": reason})


if __name__ == "__main__":
    sys.exit(main())
