"""rsvqa_jax: train remote-sensing VQA models in JAX/Flax and audit them for language bias."""

__version__ = "0.1.0"
