"""Compute-once-and-cache: image features, question vectors, the synthetic ResNet pretraining."""
