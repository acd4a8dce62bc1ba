"""The paper's Table 2 runs on RSVQA LR (test OA/AA, three seeds: --config.seed=0,1,2).

Rows: baseline (the original RSVQA: frozen Skip-thoughts, e-mult, lr 1e-5),
skipthoughts_frozen_mutan, distilbert_frozen_mutan, skipthoughts_finetuned_mult,
distilbert_finetuned_mult.
  rsvqa-jax train --config configs/lr_table2.py:distilbert_finetuned_mult --workdir W/seed0 \
    --config.seed=0 --config.data.root=... --config.image.checkpoint=... --config.text.checkpoint=...
  rsvqa-jax evaluate --seeds 'W/seed*' --split test
"""
from rsvqa_jax import config

ROWS = {
    "baseline": ("skipthoughts", "mult", True),
    "skipthoughts_frozen_mutan": ("skipthoughts", "mutan", True),
    "distilbert_frozen_mutan": ("distilbert", "mutan", True),
    "skipthoughts_finetuned_mult": ("skipthoughts", "mult", False),
    "distilbert_finetuned_mult": ("distilbert", "mult", False),
}


def get_config(arg="distilbert_finetuned_mult"):
  if arg not in ROWS:
    raise config.argument_error("configs/lr_table2.py", arg,
                                f"choose a row among {', '.join(ROWS)}")
  return config.paper_config("lr", *ROWS[arg])
