"""The plan: an experiment resolved once - cells, node settings, link media, addresses, needs, kernel features, result columns - and checked whole before anything touches the network."""
