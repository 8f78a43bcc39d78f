"""Training the models: the loop, the loss, the learning-rate schedule, checkpoints, devices,
presets, evaluation metrics and the language model's training.

``python -m transformer_ref.train`` runs it from the command line.
"""
