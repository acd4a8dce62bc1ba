"""The dataset analysis of the evaluated split (Tables 3 and 4 without a model) and Figure 7,
written to DIR/analysis/ and DIR/figures/.

The model columns of Table 3 (mean (std) over seeds and adversarial draws, as Table 6) are
the report's (bias/report.py), from the runs' own accuracy files.
"""
import os

from rsvqa_jax.bias import analysis, plots, tables


def analyse(study, ds, name, prefix=""):
  """The priors of `ds` per question type (and per LR template level); `prefix` names the
  files of a twin ("balanced_")."""
  split = study.s.split
  fit, _ = analysis.default_splits(ds)
  result = analysis.analyze(ds[fit], ds[split], templates=name == "lr")
  label = tables.dataset_label(name)
  out_dir = os.path.join(study.dir, "analysis")
  main, objects, _ = tables.write_analysis(result, label, out_dir, prefix)
  figure = os.path.join(study.dir, "figures", f"{prefix}answer_distribution.png")
  plots.answer_distribution(analysis.ordered_splits(ds), figure,
                            title=f"{label}{' (balanced)' if prefix else ''}: answers per "
                                  "question type and split")
  study.progress(f"dataset analysis{' (balanced)' if prefix else ''} written to {out_dir}")
  return {"fit_split": fit, "type_table": main, "objects_table": objects,
          "figure": os.path.relpath(figure, study.dir), **table3_inputs(result)}


def table3_inputs(result):
  """What the report's Table 3 takes of an analysis.Analysis: its type rows, its types and the
  notes on types absent from the fit split and answers outside it (tables.analysis_note, as the
  analysis table's)."""
  rows = {r.label: {"n": r.n, "n_answers": r.n_answers, "prior": r.prior,
                    "prior_acc": r.prior_acc, "uni_acc": r.uni_acc}
          for r in result.type_rows()}
  return {"rows": rows, "types": list(result.types),
          "note": tables.analysis_note(result)}
