"""The TCP ports wearlab's own software uses inside nodes (and the exporter's on the host), in
one table: the plan checks that no two uses collide on one node."""

from __future__ import annotations

HTTP = 80                   # nginx, plain HTTP
HTTP_TCPCRYPT = 8080        # nginx again: the port a server's tcpcryptd intercepts
ORIGIN_APP = 9080           # caddy's application stand-in (nodes.origin_app), on the node's loopback only
# nginx, one port per certificate chain (nodes.certs.CERT_CHAINS)
HTTPS = {"rsa2048": 443, "ecdsa-p256": 4443, "rsa2048/rsa2048": 4444, "rsa2048/rsa2048/rsa2048/rsa2048": 4445,
         "rsa2048/ecdsa-p256": 4446, "ecdsa-p256/ecdsa-p256": 4447}
STREAM = 5001               # the stream agent's server
STREAM_TCPCRYPT = 5002      # the same agent on the port tcpcryptd intercepts
TCPCRYPTD_OUT = 7001        # tcpcryptd's listeners for intercepted outbound / inbound connections
TCPCRYPTD_IN = 7002
MULTIPATH_LOCAL = 7100      # the multipath transport's watch agent (the app's connections, REDIRECTed)
MULTIPATH_AGENT = 7101      # its server agent (the path connections)
PROXY_LISTEN_BASE = 20000   # a phone proxy's port for its i-th upstream: base + i
EXPORTER = 9469             # `wearlab exporter` on the host (Prometheus's default-port registry)
