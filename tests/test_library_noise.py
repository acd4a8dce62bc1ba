"""Lines other libraries print on a newcomer's terminal: none that reads as a failure of ours,
and their warnings in the command line's own form. Each case runs in a fresh interpreter (what
a library prints at its first import happens once per process)."""
import subprocess
import sys
import textwrap

# A Jupyter kernel as tqdm detects one (ipykernel's shell loaded), without ipywidgets, which
# neither Jupyter nor JupyterLab installs.
_JUPYTER_WITHOUT_WIDGETS = """
import sys, types
sys.modules["ipykernel"] = types.ModuleType("ipykernel")
sys.modules["ipykernel.zmqshell"] = types.ModuleType("ipykernel.zmqshell")
class ZMQInteractiveShell:
  pass
ipython = types.ModuleType("IPython")
ipython.get_ipython = ZMQInteractiveShell
sys.modules["IPython"] = ipython
sys.modules["ipywidgets"] = None
"""


def _stderr(code):
  done = subprocess.run([sys.executable, "-W", "default", "-c", textwrap.dedent(code)],
                        capture_output=True, text=True, timeout=600, check=False)
  assert done.returncode == 0, done.stderr[-2000:]
  return done.stderr


def test_transformers_gives_no_advice_that_pytorch_is_missing():
  """The README installs no PyTorch: "[transformers] PyTorch was not found. Models won't be
  available ..." came in the middle of the first study (a DistilBERT tokenizer loaded)."""
  code = """
      import sys
      sys.modules["torch"] = None  # not installed
      from rsvqa_jax.data import tokenizers
      tokenizers.hf_transformers().AutoTokenizer
      import os
      assert "TRANSFORMERS_NO_ADVISORY_WARNINGS" not in os.environ  # the user's, untouched
      """
  assert _stderr(code) == ""


def test_progress_bars_in_a_jupyter_without_widgets_import_silently():
  """tqdm.auto warned "IProgress not found. Please update jupyter and ipywidgets" at the first
  import of the library in such a notebook; its bars are text bars there, as they were."""
  plain = _stderr(_JUPYTER_WITHOUT_WIDGETS + "import tqdm.auto\n")
  assert "IProgress not found" in plain  # the case is real: tqdm warns in it
  assert _stderr(_JUPYTER_WITHOUT_WIDGETS + "import rsvqa_jax.progress\n") == ""


def test_other_libraries_warnings_on_the_command_line_take_its_form():
  """absl (imported with orbax and grain) gave the root logger `WARNING:name:message` lines,
  beside the command line's `WARNING: message`; its INFO lines stay hidden."""
  code = """
      import argparse, logging
      from rsvqa_jax import cli
      cli._logging(argparse.Namespace(verbose=False, quiet=False))
      import grain, orbax.checkpoint  # absl's basicConfig at its first message
      logging.getLogger("absl").info("routine")
      logging.getLogger("jax._src.xla_bridge").warning("An NVIDIA GPU may be present")
      logging.getLogger("rsvqa_jax.x").warning("ours")
      """
  assert _stderr(code) == ("WARNING: jax._src.xla_bridge: An NVIDIA GPU may be present\n"
                           "WARNING: ours\n")
