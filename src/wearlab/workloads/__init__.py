"""Workload kinds: what an experiment runs on the network (http-get, cbr, bulk, messages)."""
