"""Benchmarks: measurement scripts, run by hand (not tests); results in bench/results/."""
