"""What learners run: the self-check of a notebook and its pytest plugin."""
