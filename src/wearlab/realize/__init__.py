"""Turn a topology model into a live network: namespaces, veths, addresses, routes, qdiscs."""
