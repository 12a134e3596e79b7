"""Side-by-side benchmarks of a tuned kernel against what users could run instead."""
