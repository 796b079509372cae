"""ACEBench's agent categories: the simulated phone and airline, episodes, and final-state scoring."""
