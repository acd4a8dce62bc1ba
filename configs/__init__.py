"""The config files, installed as the package rsvqa_jax.configs (config.load finds them by name).

Each other file here defines get_config(arg=None) from rsvqa_jax.config; this one only makes the
folder a package, so a plain `pip install .` ships the configs with the code.
"""
