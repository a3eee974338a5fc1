"""What a wearlab run is made of: topologies (hosts, shaped links), profiles, experiments.

Everything here is pure data and validation - no namespaces, no tc. Loaders raise
`wearlab.errors.InputError` carrying one located Problem per mistake in the YAML.
"""

from wearlab.model.experiment import Experiment, load_experiment
from wearlab.model.profiles import PROFILES, Profile
from wearlab.model.roles import Role
from wearlab.model.shape import Loss, Shape
from wearlab.model.topology import Link, Node, Topology, load_topology, topology_from_mapping
from wearlab.model.units import (
    format_duration,
    format_percent,
    format_rate,
    format_size,
    parse_duration,
    parse_percent,
    parse_rate,
    parse_size,
)

__all__ = [
    "PROFILES", "Experiment", "Link", "Loss", "Node", "Profile", "Role", "Shape",
    "Topology", "format_duration", "format_percent", "format_rate", "format_size", "load_experiment",
    "load_topology", "parse_duration", "parse_percent", "parse_rate", "parse_size", "topology_from_mapping",
]
