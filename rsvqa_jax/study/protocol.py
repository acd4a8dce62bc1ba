"""The protocol, stage by stage, in the paper's order: `Study.run` is its table of contents.

Each stage is a module of this package (its inputs the study and the earlier stages' outputs,
its output a part of study.json); the grounding and answerability stages are their evaluators'
(eval/grounding.py, eval/answerability.py), which take a Study without importing this package.
"""
import contextlib
import logging
import os

from rsvqa_jax import config as config_lib
from rsvqa_jax import storage
from rsvqa_jax.data import split_files
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.study import (balanced_twin, checks, dataset_analysis, grid, journal,
                             language_models, preparation, recorded, report, runs, shortcuts,
                             table2)
from rsvqa_jax.study import settings as settings_lib
from rsvqa_jax.train import checkpointing, loop, run_record

_log = logging.getLogger(__name__)


def _check_folder(workdir):
  """A training run's workdir or a dataset folder is refused: the study's report, cache and
  runs would land among (and could replace) their files."""
  run_record.refuse_run(workdir, "--workdir", "the study")
  if not os.path.exists(os.path.join(workdir, recorded.FILE)):  # not a study's folder yet
    for run in _runs_within(workdir, depth=2):
      raise RSVQAError(f"--workdir {workdir} holds training runs ({run}); give the study a folder "
                       "of its own")
  split_files.refuse_dataset(workdir, "--workdir", "the study")


def _runs_within(folder, depth):
  """Training workdirs (folders with config.json) up to `depth` levels below `folder`."""
  if depth == 0 or not os.path.isdir(folder):
    return
  for name in sorted(os.listdir(folder)):
    sub = os.path.join(folder, name)
    if os.path.isfile(os.path.join(sub, checkpointing.CONFIG_FILE)):
      yield sub
    else:
      yield from _runs_within(sub, depth - 1)


class Study:
  """A study config bound to its folder: what every stage shares.

  Read: `config`, `s` (its study section), `dir`, `cache` (DIR/cache). Written as stages go:
  `progress` (one log line per stage or run), `timings` (DIR/timings.json), `warnings`
  (DIR/warnings.json) and `trained` (runs trained, not merely found finished, by this
  invocation).
  """

  def __init__(self, config, workdir, log=_log.info):
    checks.check(config)  # before anything is created
    _check_folder(workdir)
    self.config = config
    self.s = config.study
    self.dir = os.path.abspath(workdir)
    self.cache = os.path.join(self.dir, "cache")  # made once the datasets are checked (_stages)
    self.progress = journal.Progress(log)
    self.timings = journal.Timings(os.path.join(self.dir, "timings.json"))
    self.warnings = journal.Warnings(os.path.join(self.dir, "warnings.json"))
    self.trained = 0

  def runs_grounding(self):
    return checks.runs_grounding(self.s)

  def runs_shortcuts(self):
    return checks.runs_shortcuts(self.s)

  # Shared steps, as eval/grounding.py's and eval/answerability.py's stages call them.

  def dataset(self, balanced):
    return preparation.dataset(self, balanced)

  def features(self, ds, root, name):
    return preparation.features(self, ds, root, name)

  def lm_checkpoint(self, lm, dataset):
    return language_models.checkpoint(lm, self.s.lm[lm], dataset, self.cache)

  def run_config(self, lm, weights, role, seed, root, name, checkpoint, fusion=None,
                 overrides=()):
    return runs.config_for(self.config, self.cache, lm, weights, role, seed, root, name,
                           checkpoint, fusion, overrides)

  def settings(self, root):
    """The report's Settings rows for the dataset in folder `root`."""
    return settings_lib.rows(self.config, self.cache, root)

  # The protocol.

  def run(self, named=None):
    """Runs (or resumes) every stage; the study's results, also in DIR/study.json, whose
    report lists the WARNINGs logged meanwhile (journal.Warnings). `named`: the keys the command
    line set, whose config keys the study's mode does not read are judged here
    (config.check_unread), so that the report lists those WARNINGs too; None: not judged."""
    with self.locked(), self.warnings.caught():
      if named is not None:
        config_lib.check_unread(self.config, named=named)
      return self._stages()

  @contextlib.contextmanager
  def locked(self):
    """The study folder's lock, held while a command works in it: two studies started together
    on one folder regenerated its dataset under each other and wrote one report of both. A study
    refused before the folder records one leaves the folder as it was, lock file included."""
    lock = os.path.join(self.dir, storage.LOCK)
    had_lock, held = os.path.exists(lock), False
    try:
      with loop.run_lock(self.dir, "study"):
        held = True
        yield
    except RSVQAError:  # refused at the lock (not held): the lock file is the holder's
      if held and not had_lock and not os.path.exists(os.path.join(self.dir, recorded.FILE)):
        storage.remove(lock)
      raise

  def _stages(self):
    s = self.s
    recorded.check(s, self.dir)  # a changed data size is refused before regenerating
    self.progress(f"study in {self.dir}")
    # The datasets first: a real one is read (a wrong data.root or data.name refused) before
    # anything is written, a generated one checked before the folder records its study.
    ds, root, name = self.dataset(balanced=False)
    self.progress(f"dataset {root}: {preparation.sizes(ds)}")
    if s.synthetic and s.balanced.enabled:
      self.dataset(balanced=True)  # generated now: one too small is refused before runs train
    if s.split not in ds.splits:
      raise RSVQAError(f"config study.split={s.split}: the dataset has {sorted(ds.splits)}")
    checks.check_split(s, ds, self.config.train.eval_batch_size)
    os.makedirs(self.cache, exist_ok=True)  # and the study folder, which a real dataset's lacks
    recorded.record(s, self.dir)
    self.warnings.keep(folder_made=True)  # those logged while the datasets were read
    if self.config.data.cache_dir:  # every run of the study is given DIR/cache (runs.config_for)
      _log.warning(f"config data.cache_dir={self.config.data.cache_dir} is not read by a study: "
                   f"its caches live in {self.cache}")
    if s.compilation_cache:
      preparation.use_compilation_cache(self.cache)
    feats = self.features(ds, root, name)
    runs_dir = os.path.join(self.dir, "runs")
    grid_cells = [(lm, w) for lm in s.language_models for w in s.lm_weights]
    cells = grid.train(self, runs_dir, grid_cells, s.seeds, ds, root, name, feats)
    rows = table2.train(self, runs_dir, cells, ds, root, name, feats)
    priors = dataset_analysis.analyse(self, ds, name)
    twin = balanced_twin.stage(self) if s.synthetic and s.balanced.enabled else None
    planted = shortcuts.stage(self) if self.runs_shortcuts() else None
    study = report.results(self, ds, root, name, cells=cells, table2=rows, analysis=priors,
                           balanced=twin, shortcuts=planted)
    if self.runs_grounding():
      from rsvqa_jax.eval import grounding  # pylint: disable=g-import-not-at-top
      study["grounding"] = grounding.study_stage(self, cells, ds, feats)
    if "answerability" in self.config and self.config.answerability.study.enabled:
      from rsvqa_jax.eval import answerability  # pylint: disable=g-import-not-at-top
      study["answerability"] = answerability.study_stage(self)  # DIR/answerability/
    study["warnings"] = self.warnings.listed()
    path = report.write(self.dir, study)
    self.progress(f"report written: {path}")
    return study


def run_study(config, workdir, log=_log.info, named=None):
  """Runs (or resumes) the study of `config` in `workdir`; returns its results (`named`: see
  Study.run)."""
  return Study(config, workdir, log).run(named)
