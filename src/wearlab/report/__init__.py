"""Results on disk (runs, metadata, summaries) and their presentation."""
