"""The figures the notebooks draw: plots, architecture diagrams and attention maps."""
