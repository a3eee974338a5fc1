"""Run experiments: matrix cells × repetitions of a workload on a live network."""
