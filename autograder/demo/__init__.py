"""``make demo``: the sample class, the mutants it is built from, and the demo run itself."""
