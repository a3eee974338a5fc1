"""wearlab: a network emulation testbed for wearable networking."""

__version__ = "0.1.0"
