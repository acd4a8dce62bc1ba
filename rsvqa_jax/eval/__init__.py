"""Evaluators over a restored run, one per kind, all through the same compiled eval step."""
