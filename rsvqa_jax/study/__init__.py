"""The whole language-bias protocol of the paper in one call (Sections 3.2-3.4 and 6.2).

For every configured language model, frozen and fine-tuned, a reference model (image + question,
e-mult fusion) and its visual-blind twin are trained over seeds and evaluated on the test split;
every reference model is tested adversarially (a random image of the dataset, K times; white /
black / noise when configured); Table 2's other rows (study.table2_rows: other fusions, the
original RSVQA baseline) are trained and evaluated as reference models; the dataset is analysed
(priors per type and per LR template level); a balanced twin of a synthetic dataset gets a
reference / blind pair of its own, where the blind model should fall to the most common answer,
which the balancing makes the uniform guess; then DIR/report.md gathers the tables and figures,
Table 3 with the same mean (std) over seeds and adversarial draws as Table 6 (bias/report.py),
and the settings every model was trained with.

Layout of DIR:
  data/{main,balanced}/        generated synthetic datasets (official LR / HR layout)
  cache/                       feature cache, pretrained synthetic ResNet, random-init language
                               model folders, XLA compilation cache
  runs/<lm>_<frozen|finetuned>_<reference|blind>/seed<k>/   training workdirs, with eval/<split>/
  runs/<lm>_<weights>_<fusion>_reference/, runs/baseline_reference/   other Table 2 rows
  balanced/runs/...            the balanced pair, same layout
  data/shortcuts/, shortcuts/  the shortcuts stage (study.shortcuts.enabled): a synthetic set
                               with a planted shortcut, its benchmark (shortcuts/benchmark/, as
                               `rsvqa-jax shortcuts` writes it) and runs (shortcuts/runs/...)
  runs/.../eval/<split>/grounding_<method>/   the grounding stage (study.grounding.enabled,
                               synthetic only): each grid run's relevance maps, scored
  analysis/, figures/          tables (CSV / Markdown / LaTeX) and PNGs
  study.json, timings.json, report.md
  warnings.json                WARNINGs logged while the study ran, counted (report.md lists them;
                               written at the first one)
  study_config.json            the study section, recorded at the folder's first study
An interrupted study resumes: a run whose evaluation files record the study's settings is
skipped (reuse.py: files of another K, pool, seed or checkpoint are evaluated again), a finished
run is only evaluated, an unfinished one resumes from its last checkpoint (train/loop.py). A
rerun changing what the folder's data or runs were made with is refused first (recorded.py).

The stages are the library's own steps, composed, one module each, in protocol.py's order:
  checks.py             the config, checked whole before anything is created
  recorded.py           the folder's study section: a rerun of other data or runs refused
  preparation.py        datasets, the image encoder's pretraining (train/prepare.py), features
  language_models.py    each language model's checkpoint, or its random-init stand-in folder
  runs.py               one run: config, training (train/loop.py), evaluation (eval/accuracy.py)
  adversarial_tests.py  one reference run's adversarial tests (eval/adversarial.py)
  reuse.py              whether an evaluation file found stands for the study's settings
  grid.py, table2.py    the reference / blind cells over seeds; Table 2's other rows
  dataset_analysis.py   priors, tables and Figure 7 (bias/)
  balanced_twin.py      the balanced twin's pair and analysis
  shortcuts.py          the shortcut OOD benchmark and its pair (eval/shortcuts.py)
  settings.py, report.py  the settings table; study.json and report.md (bias/report.py)
with names.py (weights, roles, run names) and journal.py (log lines, timings, warnings) shared
by all;
the grounding and answerability stages are eval/grounding.py's and eval/answerability.py's.
"""
from rsvqa_jax.study.language_models import random_distilbert, random_skipthoughts
from rsvqa_jax.study.protocol import Study, run_study

__all__ = ["Study", "random_distilbert", "random_skipthoughts", "run_study"]
