"""What a wearlab run is made of: topologies (hosts, shaped links, media), profiles, experiments,
and the declarations of node kinds and workloads.

Everything here is pure data and validation - no namespaces, no tc - and imports nothing of
wearlab above it. Loaders raise `wearlab.errors.InputError` carrying one located Problem per
mistake in the YAML.
"""
