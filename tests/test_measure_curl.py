"""curl command line and write-out parsing (the real curl runs in test_measure_capture.py)."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import need_tool

from wearlab.measure.curl import (
    CURL_FIELDS,
    CURL_TIMES,
    CURL_WRITE_OUT,
    curl_argv,
    parse_write_out,
)

# What curl 7.88.1 prints for -w '%{json}' (trimmed of keys we do not use, plus a few we ignore)
SAMPLE = {
    "certs": "", "content_type": "text/html", "errormsg": None, "exitcode": 0,
    "http_code": 200, "http_version": "1.1", "local_ip": "127.0.0.1", "local_port": 44232,
    "num_connects": 1, "remote_ip": "127.0.0.1", "remote_port": 18080,
    "size_download": 2940, "size_header": 156, "size_request": 79, "size_upload": 0,
    "speed_download": 708433, "ssl_verify_result": 0, "time_appconnect": 0.0,
    "time_connect": 0.000398, "time_namelookup": 0.000018, "time_pretransfer": 0.000431,
    "time_redirect": 0.0, "time_starttransfer": 0.004047, "time_total": 0.004150,
}


def opt(argv, name):
    """Value following option ``name`` (asserting it occurs exactly once)."""
    assert argv.count(name) == 1, (name, argv)
    return argv[argv.index(name) + 1]


def test_parse_write_out_types():
    r = parse_write_out("\n" + json.dumps(SAMPLE) + "\n")
    assert list(r) == list(CURL_FIELDS)
    for k in CURL_TIMES:
        assert isinstance(r[k], float)
    for k in ("http_code", "size_download", "size_upload", "size_header", "size_request",
              "local_port", "remote_port", "num_connects", "exitcode", "ssl_verify_result"):
        assert isinstance(r[k], int) and not isinstance(r[k], bool)
    assert r["errormsg"] == "" and r["local_ip"] == "127.0.0.1" and r["time_total"] == 0.00415


def test_parse_write_out_after_body_and_bytes():
    text = b"<html>body without newline</html>" + ("\n" + json.dumps(SAMPLE) + "\n").encode()
    assert parse_write_out(text)["http_code"] == 200


def test_parse_write_out_error_transfer():
    s = dict(SAMPLE, errormsg='Failed to connect to 127.0.0.1 port 1: "refused"', exitcode=7,
             http_code=0, local_port=0, time_connect=0.0)
    r = parse_write_out(json.dumps(s))
    assert r["exitcode"] == 7 and "refused" in r["errormsg"]


@pytest.mark.parametrize("text,match", [
    ("", "empty"),
    ("   \n", "empty"),
    ("<html>oops</html>", "not a JSON object"),
    ("[1, 2]", "not a JSON object"),
    ('{"time_total": 1}', "lacks"),
    (json.dumps(dict(SAMPLE, time_total="fast")), "time_total"),
    (json.dumps(dict(SAMPLE, time_total=-1)), "time_total"),
    (json.dumps(dict(SAMPLE, http_code="200")), "http_code"),
    (json.dumps(dict(SAMPLE, size_download=1.5)), "size_download"),
    (json.dumps(dict(SAMPLE, local_port=True)), "local_port"),
    (json.dumps(dict(SAMPLE, local_ip=4)), "local_ip"),
])
def test_parse_write_out_garbage(text, match):
    with pytest.raises(ValueError, match=match):
        parse_write_out(text)


def test_argv_http():
    a = curl_argv("http://web:80/f", resolve="web:80:10.0.0.2", timeout_s=30)
    assert a[0] == "curl" and a[-1] == "http://web:80/f"
    for flag in ("--http1.1", "--silent", "--show-error"):
        assert flag in a
    assert opt(a, "-o") == "/dev/null" and opt(a, "-w") == CURL_WRITE_OUT
    assert opt(a, "--max-time") == "30" and opt(a, "--resolve") == "web:80:10.0.0.2"
    assert not any(x.startswith("--tls") or x in ("--ciphers", "--cacert", "-k", "--insecure")
                   for x in a)


@pytest.mark.parametrize("v", ["1.0", "1.1", "1.2", "1.3"])
def test_argv_pins_tls_version(v):
    a = curl_argv("https://web/f", tls_version=v, cacert="/ca.pem", timeout_s=2.5,
                  connect_to="web:443:10.0.0.2:8443")
    assert f"--tlsv{v}" in a and opt(a, "--tls-max") == v
    assert opt(a, "--cacert") == "/ca.pem" and opt(a, "--max-time") == "2.5"
    assert opt(a, "--connect-to") == "web:443:10.0.0.2:8443"
    assert "-k" not in a and "--insecure" not in a
    if v in ("1.0", "1.1"):
        assert opt(a, "--ciphers") == "DEFAULT:@SECLEVEL=0"
    else:
        assert "--ciphers" not in a and "--tls13-ciphers" not in a


def test_argv_ciphers():
    a = curl_argv("https://h/", tls_version="1.1", cipher="AES128-SHA", timeout_s=1)
    assert opt(a, "--ciphers") == "AES128-SHA:@SECLEVEL=0"
    a = curl_argv("https://h/", tls_version="1.0", cipher="AES128-SHA:@SECLEVEL=1", timeout_s=1)
    assert opt(a, "--ciphers") == "AES128-SHA:@SECLEVEL=1"
    a = curl_argv("https://h/", tls_version="1.2", cipher="ECDHE-RSA-AES128-GCM-SHA256",
                  timeout_s=1)
    assert opt(a, "--ciphers") == "ECDHE-RSA-AES128-GCM-SHA256" and "--tls13-ciphers" not in a
    a = curl_argv("https://h/", tls_version="1.3", cipher="TLS_CHACHA20_POLY1305_SHA256",
                  timeout_s=1)
    assert opt(a, "--tls13-ciphers") == "TLS_CHACHA20_POLY1305_SHA256" and "--ciphers" not in a
    a = curl_argv("https://h/", cipher="TLS_AES_128_GCM_SHA256", timeout_s=1)
    assert opt(a, "--tls13-ciphers") == "TLS_AES_128_GCM_SHA256"
    a = curl_argv("https://h/", cipher="AES128-SHA", timeout_s=1)
    assert opt(a, "--ciphers") == "AES128-SHA"


@pytest.mark.parametrize("kw,match", [
    (dict(url="ftp://h/", timeout_s=1), "http"),
    (dict(url="h/f", timeout_s=1), "http"),
    (dict(url="https://h/", timeout_s=0), "timeout_s"),
    (dict(url="https://h/", timeout_s=float("nan")), "timeout_s"),
    (dict(url="https://h/", timeout_s="x"), "timeout_s"),
    (dict(url="https://h/", tls_version="1.4", timeout_s=1), "tls_version"),
    (dict(url="https://h/", cipher=" ", timeout_s=1), "cipher"),
    (dict(url="http://h/", tls_version="1.2", timeout_s=1), "http://"),
    (dict(url="http://h/", cipher="AES128-SHA", timeout_s=1), "http://"),
])
def test_argv_rejects(kw, match):
    url = kw.pop("url")
    with pytest.raises(ValueError, match=match):
        curl_argv(url, **kw)


def test_real_curl_accepts_argv_and_write_out():
    """Port 9 on loopback (discard; nothing listens): curl must accept every option we emit and
    print a parseable write-out with the connection error."""
    need_tool("curl")
    argv = curl_argv("https://localhost:9/", resolve="localhost:9:127.0.0.1", tls_version="1.1",
                     cipher="AES128-SHA", cacert="/nonexistent-ca.pem", timeout_s=5)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    r = parse_write_out(p.stdout)
    assert r["exitcode"] == p.returncode != 0
    assert r["errormsg"] and r["http_code"] == 0
    assert p.returncode != 2, p.stderr  # 2 = bad option / init failure
