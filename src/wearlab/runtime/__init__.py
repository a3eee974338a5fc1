"""Where an experiment's network lives: the host kernel, or a User-Mode Linux guest."""
