"""The command line's last lines of defence: a system error on a path (a file where a folder is
needed), an exception no check caught, an option out of its range and a file torch refuses each
end in one line and exit status 2, never a traceback; -q / -v are taken before or after the
command."""
import logging
import os

import jax
import pytest

import rsvqa_jax
from rsvqa_jax import cli
from rsvqa_jax.commands import synth
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import resnet_params
from rsvqa_jax.train import checkpointing


def _run(capsys, *argv):
  status = cli.main(["-q", *argv])
  return status, capsys.readouterr().err.strip().splitlines()


def test_a_file_where_a_folder_is_needed_is_one_line(tmp_path, capsys):
  blocker = tmp_path / "f"
  blocker.write_text("x")
  status, lines = _run(capsys, "synth", "--out", str(blocker / "sub"), "--images", "4",
                       "--questions-per-image", "2")
  assert status == 2 and len(lines) == 1, lines
  assert lines[0].startswith(f"rsvqa-jax synth: error: {blocker}") and lines[0].endswith(
      "(a file stands where a folder is needed)"), lines
  # --out naming the file itself said it "holds files that are not a synthetic dataset".
  status, lines = _run(capsys, "synth", "--out", str(blocker), "--images", "4")
  assert status == 2 and lines == [f"rsvqa-jax synth: error: {blocker}: is a file, not a folder; "
                                   "give a folder for the synthetic dataset"]
  (tmp_path / "notes").mkdir()
  (tmp_path / "notes" / "mine.txt").write_text("x")
  status, lines = _run(capsys, "synth", "--out", str(tmp_path / "notes"), "--images", "4")
  assert status == 2 and lines[0].endswith("refusing to write a synthetic dataset over it")
  assert blocker.read_text() == "x" and (tmp_path / "notes" / "mine.txt").read_text() == "x"


def test_an_exception_no_check_caught_is_one_line_unless_asked(monkeypatch, capsys):
  def broken(args):
    raise ValueError("something deep\nand its second line")
  monkeypatch.setattr(synth, "run", broken)
  monkeypatch.delenv(cli.SHOW_TRACEBACK, raising=False)
  status, lines = _run(capsys, "synth", "--out", "x")
  assert status == 2 and lines == [
      "rsvqa-jax synth: error: ValueError: something deep (an input this command does not check "
      f"yet; {cli.SHOW_TRACEBACK}=1 shows where)"]
  monkeypatch.setenv(cli.SHOW_TRACEBACK, "1")
  with pytest.raises(ValueError, match="something deep"):
    cli.main(["-q", "synth", "--out", "x"])


def test_too_few_synthetic_images_are_named_as_the_config_key(tmp_path, capsys):
  """--config.data.synthetic_images=0 was refused as "--images 0", a flag train has not."""
  status, lines = _run(capsys, "train", "--config", "configs/synthetic_tiny.py", "--workdir",
                       str(tmp_path / "w"), "--config.data.synthetic_images=2")
  assert status == 2 and lines == [
      "rsvqa-jax train: error: config data.synthetic_images=2: the lr variant needs at least 3 "
      "images (one per split)"]


def test_memory_exhausted_by_a_size_is_one_line_naming_it(monkeypatch, capsys):
  """evaluate --repeats 100000000 ended as an input "this command does not check yet"."""
  def too_large(args):
    raise MemoryError("Unable to allocate 59.6 GiB for an array with shape (100000000, 80)")
  monkeypatch.setattr(synth, "run", too_large)
  status, lines = _run(capsys, "synth", "--out", "x")
  assert status == 2 and lines == [
      "rsvqa-jax synth: error: not enough memory for these sizes or counts (Unable to allocate "
      "59.6 GiB for an array with shape (100000000, 80)); give smaller ones"]


def test_memory_exhausted_on_the_device_is_the_same_line(monkeypatch, capsys):
  """XLA's out of memory (model.hidden_dim=10**9 asked for 256 GB) is no MemoryError."""
  def too_large(args):
    raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
                                     "256.00GiB.\nmore detail")
  monkeypatch.setattr(synth, "run", too_large)
  status, lines = _run(capsys, "synth", "--out", "x")
  assert status == 2 and lines == [
      "rsvqa-jax synth: error: not enough memory for these sizes or counts (RESOURCE_EXHAUSTED: "
      "Out of memory while trying to allocate 256.00GiB.); give smaller ones"]


@pytest.mark.parametrize("argv,message", [
    (["synth", "--out", "s", "--seed", "-1"],
     "argument --seed: -1: a seed is a whole number from 0 to 4294967295"),
    (["synth", "--out", "s", "--seed", str(2 ** 70)], "a seed is a whole number from 0 to"),
    (["synth", "--out", "s", "--prior-strength", "nan"],
     "argument --prior-strength: nan: must be a finite number"),
    (["synth", "--out", "s", "--prior-strength", "-2"],
     "argument --prior-strength: -2: must be a finite number >= 0"),
    (["synth", "--out", "s", "--answerability", "--pool-size", "1"],
     "argument --pool-size: 1: must be 2 or more"),
    (["synth", "--out", "s", "--answerability", "--pools-per-image", "0"],
     "argument --pools-per-image: 0: must be a finite number > 0"),
    (["synth", "--out", "s", "--answerability", "--answerability-balance", "1.5"],
     "argument --answerability-balance: 1.5: must be a number from 0 to 1"),
    (["evaluate", "--workdir", "w", "--adv-seed", "-3"], "argument --adv-seed: -3: a seed is"),
    (["analyze", "--data", "d", "--out", "o", "--top-k", "0"],
     "argument --top-k: 0: must be 1 or more"),
    (["features", "--data", "d", "--cache", "c", "--batch-size", "-1"],
     "argument --batch-size: -1: must be 1 or more"),
    (["evaluate", "--workdir", "nowhere", "--adversarial", "random", "--repeats", "100000000"],
     "argument --repeats: 100000000: must be from 1 to 1000"),  # 14 GB in 35 s, no word
    (["shortcuts", "--data", "d", "--out", "o", "--image-clusters", "0"],  # asked for --cache
     "argument --image-clusters: 0: must be 1 or more"),
    # A single-valued option given twice kept its last value in silence.
    (["evaluate", "--workdir", "w", "--split", "val", "--split", "test"],
     "--split given twice ('val' and 'test'); give it once"),
    (["evaluate", "--workdir", "a", "--workdir", "b"],
     "--workdir given twice ('a' and 'b'); give it once"),
    (["train", "--config", "c.py", "--workdir", "w", "--config.train.batch_size=8",
      "--config.train.batch_size", "16"],
     "--config.train.batch_size given twice ('8' and '16'); give it once"),
    (["train", "--config", "c.py", "--config", "d.py", "--workdir", "w"],
     "--config given twice ('c.py' and 'd.py'); give it once"),
    # An empty value read as unset (a TypeError inside) or as the current folder.
    (["evaluate", "--workdir", ""], "--workdir '' is empty: give a value"),
    (["synth", "--out", " "], "--out ' ' is empty: give a value"),
    (["features", "--data", "d", "--cache", "c", "--splits", ""],
     "--splits '' is empty: give a value"),
    # answerability's own sub-commands skipped both checks ("error: : cannot read pool file")
    (["answerability", "score", "--scores", ""], "--scores '' is empty: give a value"),
    (["answerability", "select", "--workdir", "w", "--pool", "p", "--pool", "q", "--top", "3"],
     "--pool given twice ('p' and 'q'); give it once")])
def test_options_out_of_range_are_usage_errors(capsys, argv, message):
  with pytest.raises(SystemExit) as exit_info:
    cli.main(argv)
  assert exit_info.value.code == 2
  assert message in capsys.readouterr().err


def test_seeds_given_twice_take_every_workdir(tmp_path, capsys):
  # --seeds A B --seeds C evaluated C alone (argparse kept the last list).
  assert cli.main(["evaluate", "--seeds", str(tmp_path / "a"), "--seeds",
                   str(tmp_path / "c")]) == 2
  assert f"{tmp_path / 'a'}: does not exist" in capsys.readouterr().err


def test_a_file_where_the_checkpoint_folder_belongs_is_named(tmp_path):
  (tmp_path / "best").write_text("x")
  with pytest.raises(RSVQAError, match=f"{tmp_path}/best: a file stands where the run's "
                     "checkpoint folder belongs"):
    checkpointing.Checkpoints(str(tmp_path / "best"), 1)


def test_a_file_torch_refuses_is_one_line_without_its_unpickling_advice(tmp_path):
  path = tmp_path / "weights.pth"
  path.write_bytes(b"\x80\x02not a pickle\n")  # a pickle's first bytes, then nonsense
  with pytest.raises(RSVQAError) as error:
    resnet_params.read_state_dict(str(path))
  text = str(error.value)
  assert "\n" not in text and "weights_only" not in text, text
  assert text.startswith(f"{path}: not a weights-only PyTorch file (") and text.endswith(
      "this tool never unpickles other objects: save the weights as .safetensors"), text
  path.write_text("a text file\n")
  with pytest.raises(RSVQAError, match=f"^{path}: not a PyTorch weights file \\(neither a zip "
                                       "archive nor a pickle\\)$"):
    resnet_params.read_state_dict(str(path))


@pytest.mark.parametrize("argv,message", [
    (["synth", "--out", "OUT", "--images", "4", "--questions-per-image", "100000000"],
     "--questions-per-image 100000000: must be from 1 to 1000 (RSVQA's sets have about 100"),
    (["synth", "--out", "OUT", "--questions-per-image", "0"],  # named Python's keyword
     "synth: error: --questions-per-image 0: must be from 1 to 1000"),
    (["config", "--config", "configs/synthetic_tiny.py", "--config.seed=-1"],
     "config seed=-1: must be an integer in [0, 2**32)"),
    (["train", "--config", "configs/synthetic_tiny.py", "--config.model.dropout=1.0",
      "--print-config"],
     "config model.dropout=1.0: must be a number in [0, 1)")])
def test_values_out_of_range_are_refused_before_any_work(tmp_path, capsys, argv, message):
  """A typo'd size is refused before the generator fills the memory; a config is checked when
  shown, as when run."""
  out = tmp_path / "out"
  status, lines = _run(capsys, *[str(out) if a == "OUT" else a for a in argv])
  assert status == 2 and len(lines) == 1 and message in lines[0], lines
  assert not out.exists()


@pytest.mark.parametrize("argv,message", [
    (["config", "--config", "configs/answerability_synthetic.py",
      "--config.answerability.pool_size=1"],
     "config answerability.pool_size=1: must be a whole number >= 2"),
    (["config", "--config", "configs/answerability_synthetic.py",
      "--config.answerability.balance=1.5"], "config answerability.balance=1.5: must be a number "
     "in [0, 1]"),
    (["study", "--config", "configs/study_synthetic.py", "--print-config",
      "--config.study.adversarial=('purple',)"], "config study.adversarial=('purple',): 'purple' "
     "is not one of random"),
    (["config", "--config", "configs/study_synthetic.py", "--config.study.seeds=()"],
     "config study.seeds is empty"),
    # Trained as one run, it ignored its study section and asked for data.root.
    (["train", "--config", "configs/study_synthetic.py", "--workdir", "w", "--print-config"],
     "--config: a study config (it has a `study` section); run it with rsvqa-jax study"),
    # Trained as one run, a plain VQA classifier: its ranking head and pools never read.
    (["train", "--config", "configs/answerability_synthetic.py:skipthoughts,listnet", "--workdir",
      "w", "--print-config"], "--config: an answerability config (it has an `answerability` "
     "section); run it with rsvqa-jax answerability train"),
    # Given on a study's command line, replaced for every run without a word.
    (["study", "--config", "configs/study_synthetic.py", "--workdir", "w",
      "--config.model.fusion=mutan"], "--config.model.fusion: a study sets it for each run; give "
     "study.fusion (or study.table2_rows) instead"),
    (["config", "--config", "configs/study_synthetic.py", "--config.seed=5"],
     "--config.seed: a study sets it for each run; give study.seeds instead"),
    (["config", "--config", "configs/study_synthetic.py", "--config.data.synthetic_images=9"],
     "--config.data.synthetic_images: a study sets it for each run; give study.images instead"),
    (["study", "--config", "configs/study_synthetic.py", "--workdir", "w",
      "--config.model.blind=true"], "--config.model.blind: a study trains a reference and a "
     "visual-blind model of every cell itself"),
    # A misspelt key: the nearest is named among the section's keys.
    (["config", "--config", "configs/synthetic_tiny.py", "--config.train.batchsize=4"],
     "--config.train.batchsize: no key 'batchsize' in train; did you mean train.batch_size? (it "
     "has: batch_size, "),
    (["config", "--config", "configs/synthetic_tiny.py", "--config.train.batch_size.x=4"],
     "--config.train.batch_size.x: train.batch_size is a value, not a section"),
    # Refused only once the pretraining data was drawn (a ValueError), or by train alone.
    (["config", "--config", "configs/synthetic_tiny.py", "--config.image.pretrain.depth=7"],
     "config image.pretrain.depth=7: choose one of 18, 34, 50, 101, 152"),
    # Refused by the generator in its synth flags' names (--images 0, --prior-strength -1.0).
    (["config", "--config", "configs/study_synthetic.py", "--config.study.prior_strength=-1"],
     "config study.prior_strength=-1.0: must be a number >= 0"),
    (["config", "--config", "configs/study_synthetic.py", "--config.study.questions_per_image=0"],
     "config study.questions_per_image=0: must be a whole number from 1 to 1000"),
    (["config", "--config", "configs/synthetic_tiny.py", "--config.data.synthetic_variant=xx"],
     "config data.synthetic_variant='xx': choose one of lr, hr, xben"),
    (["config", "--config", "configs/synthetic_tiny.py",
      "--config.data.augment_variants=hflip,foo"],
     "config data.augment_variants=('hflip', 'foo'): 'foo' is not one of them; choose one of "
     "none, hflip, vflip"),
    (["config", "--config", "configs/answerability_synthetic.py",
      "--config.answerability.loss=foo"],
     "config answerability.loss='foo': choose one of bce, listnet"),
    (["config", "--config", "configs/answerability_synthetic.py",
      "--config.answerability.select_metric=ndcg@0"],
     "config answerability.select_metric='ndcg@0': choose one of ndcg@1, ndcg@3"),
    (["config", "--config", "configs/synthetic_tiny.py", "--config.image.arch=resnet7"],
     "config image.arch='resnet7': choose one of synthetic_resnet, resnet18, resnet34"),
    # An empty or unknown grid trained nothing (or failed after the pretraining) and its summary
    # read as a result: "Every reference model beats its question-only twin".
    (["config", "--config", "configs/study_synthetic.py", "--config.study.language_models="],
     "config study.language_models is empty: give one or more keys of study.lm"),
    (["config", "--config", "configs/study_synthetic.py", "--config.study.lm_weights="],
     "config study.lm_weights is empty: give one or more frozen or finetuned"),
    (["config", "--config", "configs/answerability_study.py",
      "--config.answerability.study.language_models="],
     "config answerability.study.language_models is empty"),
    (["config", "--config", "configs/answerability_study.py",
      "--config.answerability.study.language_models=gpt"],
     "config answerability.study.language_models names 'gpt', study.lm has"),
    (["config", "--config", "configs/answerability_study.py",
      "--config.answerability.study.weights=foo"],
     "config answerability.study.weights: 'foo' is not one of"),
    (["config", "--config", "configs/study_paper.py", "--config.text.checkpoint=/m/st"],
     "config text.checkpoint='/m/st': a study does not read it; give each language model's as "
     "--config.study.lm.NAME.checkpoint=PATH"),
    # Accepted, then ignored: the study draws its own pools; seeds run twice, counted twice.
    (["config", "--config", "configs/answerability_study.py",
      "--config.answerability.pools=/nonexist"],
     "config answerability.pools='/nonexist': the study draws its own pools from its dataset"),
    (["config", "--config", "configs/answerability_study.py",
      "--config.answerability.study.seeds=0,0"],
     "config answerability.study.seeds=(0, 0): 0 is given twice"),
    (["config", "--config", "configs/answerability_study.py",
      "--config.answerability.study.num_epochs=-1"],
     "config answerability.study.num_epochs=-1: must be a whole number >= 0"),
    (["config", "--config", "configs/answerability_study.py",
      "--config.answerability.study.top_words=0"],
     "config answerability.study.top_words=0: must be a whole number >= 1")])
def test_configs_are_checked_whole_when_only_shown(argv, message, capsys):
  assert cli.main(argv) == 2
  assert message in capsys.readouterr().err


def test_a_paper_study_config_is_shown_without_its_paths(capsys):
  assert cli.main(["config", "--config", "configs/study_paper.py"]) == 0
  assert '"require_real": true' in capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [
    (["evaluate", "--workdir", "w", "--repeats", "3"], "--repeats applies to --adversarial only"),
    (["evaluate", "--workdir", "w", "--adv-seed", "5"],
     "--adv-seed applies to --adversarial and --counterfactual only"),
    (["convert", "--kind", "bert", "--src", "s", "--out", "o.safetensors", "--depth", "50"],
     "--depth applies to --kind resnet only"),
    (["convert", "--kind", "resnet", "--src", "s", "--out", "o.safetensors", "--allow-pickle"],
     "--allow-pickle applies to --kind skipthoughts only"),
    (["study", "--config", "configs/synthetic_tiny.py", "--print-config"],
     "config has no `study` section"),
    (["study", "--config", "configs/study_synthetic.py", "--print-config",
      "--config.study.images=-5"], "config study.images=-5: must be a whole number >= 3")])
def test_options_that_do_not_apply_are_refused(argv, message, capsys):
  assert cli.main(argv) == 2
  assert message in capsys.readouterr().err


def test_an_unknown_dataset_lists_every_layout_read():
  from rsvqa_jax.data import other_datasets  # pylint: disable=g-import-not-at-top
  with pytest.raises(RSVQAError, match="unknown dataset 'bogus': expected one of lr, hr, xben, "
                                       "floodnet, rsivqa$"):
    other_datasets.read_any("d", "bogus")


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1.5", ""])
def test_a_simulated_device_count_that_is_no_whole_number_is_one_line(monkeypatch, capsys,
                                                                      value):
  """XLA answered 0 with "Could not determine process_index" and "abc" with its flag list and an
  abort of the process."""
  monkeypatch.setenv("XLA_FLAGS", f"--xla_cpu_foo=1 --xla_force_host_platform_device_count={value}")
  status, lines = _run(capsys, "config", "--config", "configs/synthetic_tiny.py")
  assert status == 2 and lines == [
      f"rsvqa-jax config: error: environment XLA_FLAGS: --xla_force_host_platform_device_count="
      f"{value}: the number of simulated CPU devices must be a whole number >= 1"]
  monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
  assert _run(capsys, "config", "--config", "configs/synthetic_tiny.py")[0] == 0
  # Given twice, XLA takes the last value: a bad first one was refused though it is not used.
  monkeypatch.setenv("XLA_FLAGS", f"--xla_force_host_platform_device_count={value} "
                                  "--xla_force_host_platform_device_count=3")
  assert _run(capsys, "config", "--config", "configs/synthetic_tiny.py")[0] == 0
  monkeypatch.setenv("XLA_FLAGS", f"--xla_force_host_platform_device_count={value}")
  with pytest.raises(RSVQAError, match=f"device_count={value}: the number of simulated CPU"):
    rsvqa_jax.load_run("no such workdir")  # the Python API checks it too, first


@pytest.mark.parametrize("argv,dest", [
    (["synth", "--out=~/d"], "out"),
    (["validate", "--data=~/d"], "data"),
    (["features", "--data=~/d", "--cache=~/c"], "cache"),
    (["train", "--config=~/c.py", "--workdir=~/w"], "workdir"),
    (["evaluate", "--workdir=~/w", "--data-root=~/d"], "data_root"),
    (["evaluate", "--seeds=~/w"], "seeds"),
    (["analyze", "--data=~/d", "--out=~/o", "--predictions=~/p.csv"], "predictions"),
    (["tables", "--runs=~/r", "--out=~/t"], "runs"),
    (["shortcuts", "--data=~/d", "--out=~/o"], "out"),
    (["grounding", "--workdir=~/w", "--out=~/o"], "out"),
    (["answerability", "score", "--scores=~/s", "--labels=~/l", "--out=~/o"], "scores"),
    (["convert", "--kind", "resnet", "--src=~/s.pth", "--out=~/o.safetensors"], "src"),
    (["config", "--config=~/c.py"], "config"),
    (["study", "--config=~/c.py", "--workdir=~/w"], "workdir"),
])
def test_a_tilde_the_shell_left_in_a_path_is_the_home_folder(monkeypatch, argv, dest):
  # `--out=~/d` is one word: the shell expands no ~ in it, and the command wrote ./~/d.
  monkeypatch.setenv("HOME", "/home/someone")
  args = cli.build_parser(argv).parse_args(argv)
  value = getattr(args, dest)
  assert (value[0] if isinstance(value, list) else value).startswith("/home/someone/"), value
  if argv[0] == "evaluate":  # choices are no paths
    assert args.checkpoint == "best"



def test_evaluate_into_a_workdir_it_cannot_write_says_so_before_predicting(tmp_path, capsys,
                                                                         monkeypatch):
  """A read-only workdir (a shared run, a mounted copy): every prediction was computed, then the
  first write failed."""
  from rsvqa_jax import storage  # pylint: disable=g-import-not-at-top
  workdir = tmp_path / "run"
  workdir.mkdir()
  monkeypatch.setattr(storage.os, "access", lambda path, mode: False)
  assert cli.main(["evaluate", "--workdir", str(workdir)]) == 2
  err = capsys.readouterr().err.strip()
  assert err in (f"rsvqa-jax evaluate: error: {workdir}: permission denied",
                 f"rsvqa-jax evaluate: error: {workdir}: read-only file system"), err


@pytest.mark.parametrize("argv,quiet,verbose", [
    (["-q", "synth", "--out", "d"], True, False),
    (["synth", "--out", "d", "-q"], True, False),  # was "unrecognized arguments: -q"
    (["synth", "--quiet", "--out", "d"], True, False),
    (["--verbose", "synth", "--out", "d"], False, True),
    (["synth", "--out", "d", "-v"], False, True),
    (["synth", "--out", "d"], False, False),
    (["answerability", "score", "--scores", "s", "--labels", "l", "--out", "o", "-q"], True,
     False),
    (["-q", "answerability", "score", "--scores", "s", "--labels", "l", "--out", "o"], True,
     False)])
def test_quiet_and_verbose_go_before_or_after_the_command(argv, quiet, verbose):
  args = cli.build_parser(argv).parse_args(argv)
  assert (args.quiet, args.verbose) == (quiet, verbose)


@pytest.mark.parametrize("argv", [["-q", "synth", "--out", "d", "-v"],
                                  ["synth", "--out", "d", "-v", "--quiet"]])
def test_quiet_and_verbose_together_are_refused_wherever_given(argv, capsys):
  with pytest.raises(SystemExit) as exit_info:
    cli.main(argv)
  assert exit_info.value.code == 2
  assert "not allowed with argument" in capsys.readouterr().err


def test_quiet_after_the_command_quiets_it(tmp_path, capsys):
  logger = logging.getLogger("rsvqa_jax")
  level = logger.level
  try:
    assert cli.main(["synth", "--out", str(tmp_path / "d"), "--images", "4",
                     "--questions-per-image", "2", "-q"]) == 0
    assert logger.level == logging.WARNING
  finally:
    logger.setLevel(level)
  assert "wrote 4 images" in capsys.readouterr().out


def test_features_without_a_cache_says_which_folder_train_uses(tmp_path, capsys):
  """The help said --cache defaults to the --config's data.cache_dir, which no shipped config sets:
  `features --config configs/synthetic_tiny.py` ended in "--cache is required" alone."""
  from rsvqa_jax import config as config_lib  # pylint: disable=g-import-not-at-top
  data = str(tmp_path / "lr")
  assert cli.main(["-q", "synth", "--out", data, "--images", "4", "--questions-per-image",
                   "2"]) == 0
  status, lines = _run(capsys, "features", "--data", data, "--config", "configs/synthetic_tiny.py")
  assert status == 2 and lines == [
      "rsvqa-jax features: error: --cache is required (--config configs/synthetic_tiny.py sets no "
      "data.cache_dir): give the folder training keeps its caches in, rsvqa_cache beside its "
      "--workdir unless the config sets data.cache_dir (--cache runs/rsvqa_cache for train "
      "--workdir runs/tiny)"], lines
  config = config_lib.load("configs/synthetic_tiny.py")  # what the line says train does
  assert config_lib.cache_dir(config, "runs/tiny") == os.path.abspath("runs/rsvqa_cache")
