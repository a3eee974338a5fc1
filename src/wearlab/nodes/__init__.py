"""Node kinds: what each role runs once the network is up (containerlab-style small types)."""
