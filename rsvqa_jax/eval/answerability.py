"""An answerability workdir scored on its pools, hard examples picked by entropy, a study stage.

`evaluate` restores the best-on-validation checkpoint (or the last: eval_last/ instead of eval/
below), scores every pair of the validation and evaluated splits through one compiled step
(train/answerability.py), writes the scores as
`rsvqa-jax answerability score` reads them and scores those files with the same function
(bias/answerability.score_files), so a foreign model's files and ours get the same table:
  WORKDIR/eval/answerability/{split}_scores.csv      pool_id,image_id,score (pool file order)
  WORKDIR/eval/answerability/{split}_metrics.json    bias/answerability.KEYS, nothing else
  WORKDIR/eval/answerability/{split}_evaluation.json what was scored: split, step, files, counts
(one file per evaluated split: evaluating val once wrote over the test split's metrics).
`select` ranks unlabelled pairs by predictive entropy (ChiQA's active-learning step); it writes
a new file or over an earlier selection only (never the pool, a workdir's or a dataset's folder).
`study_stage` runs the answerability part of a study (a rsvqa_jax.study.Study passed in: eval/
never imports the study): pools on the study's dataset, reference and question-only models per
language model, Random and Majority, the Table 4 layout and the language-bias reading.
"""
import collections
import logging
import os
import time

import numpy as np

from rsvqa_jax import storage
from rsvqa_jax.bias import answerability as metrics_lib
from rsvqa_jax.bias import tables
from rsvqa_jax.data import answerability as pools_lib
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import outputs
from rsvqa_jax.train import answerability as train_lib
from rsvqa_jax.train import checkpointing

_log = logging.getLogger(__name__)

FOLDER = "answerability"
METRICS_FILE = "metrics.json"  # per evaluated split: {split}_metrics.json
EVALUATION_FILE = "evaluation.json"  # per evaluated split: {split}_evaluation.json
SUMMARY_KIND = "answerability selection"  # marks select's summary JSON (written over only if so)
TOP_UNKNOWN = 20  # the most common unknown words a summary names
SELECT_COLUMNS = ("pool_id", "question", "image_id", "score", "entropy")
ROLES = ("reference", "blind")
ROLE_LABELS = {"reference": "reference", "blind": "question-only"}


def folder(workdir, which="best"):
  return os.path.join(outputs.root(workdir, which), FOLDER)


def scores_path(workdir, split, which="best"):
  return os.path.join(folder(workdir, which), f"{split}_scores.csv")


def metrics_path(workdir, split, which="best"):
  return os.path.join(folder(workdir, which), f"{split}_{METRICS_FILE}")


def evaluation_path(workdir, split, which="best"):
  return os.path.join(folder(workdir, which), f"{split}_{EVALUATION_FILE}")


def _write_scores(path, pools, values):
  pools_lib.write(path, zip(pools.pool_ids.tolist(), pools.image_ids.tolist(),
                            map(repr, np.asarray(values, np.float64).tolist())),
                  columns=("pool_id", "image_id", "score"))


def evaluate(workdir, split="test", *, which="best", data_root=None, dataset=None, features=None,
             also=()):
  """Scores `split` (threshold from the validation split) and writes the files above; returns
  {split}_evaluation.json's record with the metrics. `also`: more splits whose scores to write."""
  config = checkpointing.read_config(workdir)
  val = config.data.val_split
  splits = list(dict.fromkeys([val, split, *also]))
  run, pools, state, step = train_lib.restore(workdir, splits, which=which, data_root=data_root,
                                              dataset=dataset, features=features)
  os.makedirs(folder(workdir, which), exist_ok=True)
  for s in splits:  # an earlier evaluation's must not vouch for the scores replaced next
    if s == split or _recorded_step(evaluation_path(workdir, s, which)) != step:
      storage.remove(metrics_path(workdir, s, which))
      storage.remove(evaluation_path(workdir, s, which))
  for s in splits:
    _write_scores(scores_path(workdir, s, which), pools[s], train_lib.scores(run, state, s))
  # The binary threshold is chosen on val: scoring val itself, it would be tuned on the pairs
  # it scores, so the binary metrics are left out.
  on_val = (scores_path(workdir, val, which), pools[val].path) if split != val else ()
  metrics = metrics_lib.score_files(scores_path(workdir, split, which), pools[split].path,
                                    *on_val)
  record = {"workdir": os.path.abspath(workdir), "split": split, "val_split": val,
            "checkpoint": which, "step": step, "labels": pools[split].path,
            "val_labels": pools[val].path, "train_labels": pools_lib.pool_file(
                os.path.dirname(pools[split].path), config.data.train_split),
            "pools": len(metrics_lib.pools(pools[split].pool_ids)),
            "pairs": len(pools[split].labels), "metrics": metrics}
  storage.write_json(evaluation_path(workdir, split, which), record)
  storage.write_json(metrics_path(workdir, split, which), metrics)  # last
  return record


def _recorded_step(path):
  """The checkpoint step an earlier SPLIT_evaluation.json records (None: none readable). Scores of
  that step are the same again, so its metrics still hold for them; another step's do not."""
  record = storage.read_json(path)
  return record.get("step") if isinstance(record, dict) else None


def baselines(record):
  """Random and Majority on the pool files of an evaluation record (evaluate's return)."""
  train, test, val = (train_lib.Pools.read(record[k])
                      for k in ("train_labels", "labels", "val_labels"))
  val_labels = None if record["split"] == record["val_split"] else val.labels
  return metrics_lib.baselines(train.labels, test.pool_ids, test.labels, val_labels)


def select(workdir, pool_csv, top, out=None, *, which="best", data_root=None, dataset=None,
           features=None):
  """Writes the `top` pairs of `pool_csv` (pool_id,question,image_id; labels ignored) with the
  highest predictive entropy of the model's score, highest first (ties in file order), to `out`
  (default WORKDIR/eval/answerability/selected.csv, eval_last/ for the last checkpoint;
  _check_select_out) with their score and entropy, and beside it summary_path(out): what was
  ranked, and the pool's words the model reads as unknown (a WARNING when there are some: their
  scores rest on the other words). A pool file of another dataset's images or folder is refused
  before any feature or model is built (train/answerability._checked). Returns the path, the
  number written and the summary."""
  if top <= 0:
    raise RSVQAError(f"--top {top}: must be positive")
  out = out or os.path.join(folder(workdir, which), "selected.csv")
  _check_select_out(out, pool_csv)
  extra = {"select": train_lib.Pools.read(pool_csv, labelled=False)}
  run, pools, state, step = train_lib.restore(workdir, [], which=which, data_root=data_root,
                                              dataset=dataset, features=features, extra=extra)
  p = pools["select"]
  unknown = unknown_words_summary(run.tokenizer, p.pool_ids, p.questions)
  if unknown["n_questions_with_unknown_words"]:
    _log.warning(f"select: {describe_unknown(unknown)} of {pool_csv} are outside the model's "
                 "vocabulary, read as its unknown token: those pairs are scored on the other words")
  values = train_lib.scores(run, state, "select")
  entropy = metrics_lib.binary_entropy(values)
  order = np.argsort(-entropy, kind="stable")[:top]
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  storage.remove(summary_path(out))  # an earlier selection's must not vouch for the CSV next
  rows = ((p.pool_ids[i], p.questions[i], p.image_ids[i], values[i], entropy[i])
          for i in order.tolist())
  pools_lib.write(out, ((pool, q, int(im), repr(float(v)), repr(float(h)))
                        for pool, q, im, v, h in rows),
                  columns=SELECT_COLUMNS)
  summary = {"kind": SUMMARY_KIND, "selection": os.path.abspath(out),
             "pool": os.path.abspath(pool_csv), "workdir": os.path.abspath(workdir),
             "checkpoint": which, "step": step, "pairs": len(p.pool_ids), "written": len(order),
             **unknown}
  storage.write_json(summary_path(out), summary)
  return out, len(order), summary


def unknown_words_summary(tokenizer, pool_ids, questions):
  """Counts of the pool file's words `tokenizer` reads as unknown (punctuation too): per question
  (each pool's once), per pair, and the TOP_UNKNOWN most common with the questions holding them."""
  first = [int(rows[0]) for rows in metrics_lib.pools(pool_ids)]
  found = {i: tokenizer.words_read_as_unknown(questions[i]) for i in first}
  counts = collections.Counter(w for words in found.values() for w in set(words))
  held = {pool_ids[i] for i, words in found.items() if words}
  return {"questions": len(first), "n_questions_with_unknown_words": len(held),
          "n_pairs_with_unknown_words": int(sum(p in held for p in pool_ids.tolist())),
          "n_distinct_unknown_words": len(counts),
          "unknown_words": [[w, n] for w, n in sorted(counts.items(),
                                                      key=lambda x: (-x[1], x[0]))[:TOP_UNKNOWN]]}


def describe_unknown(summary):
  """"N distinct word(s) (e.g. 'a' in 3 questions, ...) in Q of the T questions"."""
  shown = ", ".join(f"{w!r} in {n}" for w, n in summary["unknown_words"][:5])
  return (f"{summary['n_distinct_unknown_words']} distinct word(s) (most common: {shown}) in "
          f"{summary['n_questions_with_unknown_words']} of the {summary['questions']} questions "
          f"({summary['n_pairs_with_unknown_words']} pairs)")


def summary_path(out):
  """select's summary JSON, beside its CSV: selected.csv -> selected.json."""
  return os.path.splitext(out)[0] + ".json"


def _is_selection(path):
  """Whether `path` starts with select's exact header line (an earlier selection)."""
  try:
    with open(path, encoding="utf-8", newline="") as f:
      return f.readline().rstrip("\r\n") == ",".join(SELECT_COLUMNS)
  except (OSError, UnicodeDecodeError):
    return False


def _is_summary(path):
  """Whether `path` is a summary select wrote (its JSON names SUMMARY_KIND)."""
  found = storage.read_json(path)
  return isinstance(found, dict) and found.get("kind") == SUMMARY_KIND


def _check_select_out(out, pool_csv):
  """select writes only a new file or over an earlier selection, never over the pool it ranks
  nor into a workdir's or a dataset's own folder: nothing it did not write is lost. The same
  holds for its summary beside `out` (summary_path)."""
  if os.path.isdir(out):
    raise RSVQAError(f"--out {out}: is a folder; give the CSV file to write")
  real = os.path.realpath(out)
  if real == os.path.realpath(pool_csv) or (
      os.path.exists(out) and os.path.exists(pool_csv) and os.path.samefile(out, pool_csv)):
    raise RSVQAError(f"--out {out}: is the --pool file {pool_csv}; write the selection elsewhere")
  parent = os.path.dirname(real)
  if os.path.exists(os.path.join(parent, checkpointing.CONFIG_FILE)):
    raise RSVQAError(f"--out {out}: in a workdir's own folder ({parent} holds "
                     f"{checkpointing.CONFIG_FILE}); give a path elsewhere (default: "
                     f"WORKDIR/eval/{FOLDER}/selected.csv)")
  if pools_lib.is_dataset_folder(parent):
    raise RSVQAError(f"--out {out}: in a dataset folder ({parent}); give a path elsewhere")
  if os.path.lexists(out) and not _is_selection(out):
    raise RSVQAError(f"--out {out}: exists and is not an earlier selection (header "
                     f"{','.join(SELECT_COLUMNS)}); remove it or give another path")
  summary = summary_path(out)
  if out == summary:
    raise RSVQAError(f"--out {out}: ends in .json, the name of its summary; give a .csv name")
  if os.path.lexists(summary) and (os.path.isdir(summary) or not _is_summary(summary)):
    raise RSVQAError(f"--out {out}: its summary {summary} exists and is not an earlier "
                     "selection's; remove it or give another path")


# The study stage.

def _run(study, cfg, workdir, ds, feats, split, label, also):
  """Train (or resume) and evaluate one model of the stage; its metrics."""
  path = metrics_path(workdir, split)
  if os.path.exists(path):
    # a model of other settings (a changed override) must not stand in this report's
    checkpointing.check_or_record_config(workdir, cfg, record=False)
    study.progress(f"{label}: done before, skipped")
    return storage.read_json(path)
  started = time.time()
  summary = train_lib.train(cfg, workdir, dataset=ds, features=feats, log=study.progress)
  if not summary["finished"]:
    raise RSVQAError(f"{workdir}: training stopped before the end (train.stop_after_steps?)")
  record = evaluate(workdir, split, dataset=ds, features=feats, also=also)
  study.timings.record(f"answerability/{label}", time.time() - started)
  study.progress(f"{label}: trained and evaluated ({time.time() - started:.1f}s), NDCG@1 "
                 f"{tables.pct(record['metrics']['ndcg@1'])}")
  return record["metrics"]


def _pool_set(study, name, balance, ds, root, dsname, feats, out):
  """One pool set of the stage: its pools, models, baselines and word table."""
  cfg, split = study.config, study.s.split
  a, st = cfg.answerability, cfg.answerability.study
  pools_dir = os.path.join(out, f"pools_{name}")
  manifest, made = pools_lib.ensure(root, pools_dir, {s: ds.image_ids(s) for s in ds.splits},
                                    pool_size=a.pool_size, pools_per_image=a.pools_per_image,
                                    balance=balance, seed=a.pool_seed)
  if made:
    study.progress(f"answerability pools ({name}, balance {balance:g}): "
                   + train_lib.describe(manifest))
  train_split = cfg.data.train_split
  rows, blind_dir = [], None
  for lm in st.language_models:
    checkpoint = study.lm_checkpoint(lm, ds)
    for role in ROLES:
      runs = []
      for seed in st.seeds:
        c = study.run_config(lm, st.weights, role, seed, root, dsname, checkpoint)
        c.answerability.pools, c.answerability.balance = pools_dir, float(balance)
        if st.num_epochs:
          c.train.num_epochs = int(st.num_epochs)
        workdir = os.path.join(out, "runs", name, f"{lm}_{st.weights}_{role}", f"seed{seed}")
        label = os.path.relpath(workdir, study.dir)
        runs.append(_run(study, c, workdir, ds, feats, split, label, (train_split,)))
        blind_dir = blind_dir or (workdir if role == "blind" else None)
      rows.append({"lm": lm, "label": study.s.lm[lm].label, "role": role, "runs": runs})
  train = train_lib.Pools.read(pools_lib.pool_file(pools_dir, train_split))
  test = train_lib.Pools.read(pools_lib.pool_file(pools_dir, split))
  val = train_lib.Pools.read(pools_lib.pool_file(pools_dir, cfg.data.val_split))
  blind_scores = None
  if blind_dir:
    _, _, blind_scores = metrics_lib.aligned(scores_path(blind_dir, train_split), train.path)
  words, distance = metrics_lib.word_bias(
      train.questions, train.labels, blind_scores, min_count=st.word_min_count,
      top=st.top_words, what=f"{metrics_lib.SET_NAMES[name]} pools' {train_split} pairs")
  return {"name": name, "balance": float(balance), "pool_size": a.pool_size,
          "splits": manifest["splits"], "rows": rows,
          "baselines": metrics_lib.baselines(train.labels, test.pool_ids, test.labels, val.labels),
          "words": words, "max_distance": distance}


def study_stage(study):
  """The answerability stage of `study` (rsvqa_jax.study.Study); writes DIR/answerability/
  (pools, runs, report.md, summary.md, tables) and returns its results for study.json."""
  a = study.config.answerability
  out = os.path.join(study.dir, FOLDER)
  ds, root, dsname = study.dataset(balanced=False)
  feats = study.features(ds, root, dsname)
  sets = [("main", a.balance)] + ([("no_info", 1.0)] if a.study.no_info and a.balance != 1 else [])
  results = [_pool_set(study, name, b, ds, root, dsname, feats, out) for name, b in sets]
  named = {f"table4_{s['name']}": metrics_lib.stage_table(s, study.s.split) for s in results}
  named.update({f"words_{s['name']}": s["words"] for s in results})
  for stem, table in named.items():
    tables.write(table, os.path.join(out, "tables"), stem)
  seconds = sum(v for k, v in study.timings.values.items() if k.startswith(f"{FOLDER}/"))
  text = metrics_lib.summary(results, study.s.split, seconds)
  report = ["# Answerability ranking", "", text, ""] + [tables.to_markdown(t)
                                                        for t in named.values()]
  for name, body in (("summary.md", text + "\n"), ("report.md", "\n".join(report))):
    with storage.replacing(os.path.join(out, name)) as f:
      f.write(body)
  study.progress(f"answerability report written: {os.path.join(out, 'report.md')}")
  return {"sets": results, "split": study.s.split, "summary": text,
          "report": os.path.relpath(os.path.join(out, "report.md"), study.dir)}
