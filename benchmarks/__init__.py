"""ordo's benchmarks: ``make bench`` (``python -m benchmarks``) runs them side by side."""
