"""`rsvqa-jax config --config configs/X.py[:arg] [--config.a.b=value ...]`: the effective config.

Prints every key the run would read, after the overrides, as JSON; an unknown key, a value of
the wrong type or one outside its key's range is the same one-line error `train` and `study`
give. Loading a config never starts JAX.
"""
from rsvqa_jax.commands import common


def add_arguments(parser):
  common.add_config_arguments(parser, example="configs/lr_table1.py:distilbert,mutan,finetuned",
                              print_flag=False)


def run(args):
  config = common.load_config(args)
  common.check_unread(args, config)
  print(common.config_text(config))
  return 0
