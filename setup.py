"""Install rsvqa_jax: `pip install -c constraints.txt -e .` (extras: `[test]` for the tests,
`[torch]` for the PyTorch parity tests and comparison benchmarks, `[gpu]` for NVIDIA GPUs,
`[docs]` for the docs site, which the tests build too).

The requirements below are ranges: the tested versions as lower bounds, the next major version
as the upper bound (for 0.x packages the next minor: their minor releases break APIs). The exact
tested set is constraints.txt, which CI and the README's commands install with `-c`.
The configs/ folder is installed as the package rsvqa_jax.configs, so `--config
configs/study_synthetic.py` finds it from any folder (rsvqa_jax/config/loading.py: `load`).
"""
import re

from setuptools import find_packages, setup

with open("rsvqa_jax/__init__.py", encoding="utf-8") as f:
  VERSION = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)

INSTALL_REQUIRES = [
    "jax>=0.10.2,<0.12",  # 0.10.2 tested on CPU, 0.11.2 on an H200
    "jaxlib>=0.10.2,<0.12",
    "flax>=0.12.8,<0.13",
    "optax>=0.2.8,<0.3",
    "orbax-checkpoint>=0.12.8,<0.13",
    "tensorstore>=0.1.86,<0.2",
    "grain>=0.2.18,<0.3",
    "tensorflow-datasets>=4.9.10,<5",
    "array-record>=0.8.6,<0.9",
    "transformers>=5.24.0,<6",
    "tokenizers>=0.23.3,<0.24",
    "safetensors>=0.8.0,<0.9",
    "ml-collections>=1.1.0,<2",
    "absl-py>=2.5.1,<3",
    "numpy>=2.4.6,<3",
    "tifffile>=2026.3.3",
    "pillow>=13.0.0,<14",
    "matplotlib>=3.11.2,<4",
    "tqdm>=4.70.1,<5",
]

# The docs site (mkdocs.yml): `pip install -e ".[docs]" && mkdocs serve`.
DOCS_REQUIRES = [
    "mkdocs>=1.6.1,<2",
    "mkdocs-material>=9.8.2,<10",
    "mkdocstrings>=1.0.8,<2",
    "mkdocstrings-python>=2.0.11,<3",
    "pymdown-extensions>=13.1.2,<14",
]

setup(
    name="rsvqa_jax",
    version=VERSION,
    description="Fast JAX/Flax RSVQA training and language-bias audits.",
    packages=find_packages(include=["rsvqa_jax", "rsvqa_jax.*"]) + ["rsvqa_jax.configs"],
    package_dir={"rsvqa_jax.configs": "configs"},
    python_requires=">=3.11",
    install_requires=INSTALL_REQUIRES,
    extras_require={
        "docs": DOCS_REQUIRES,
        # the suite builds the docs strictly, runs its files on xdist workers, and checks the
        # TensorBoard event files against tensorboardX's serialisation
        "test": ["pytest>=9.0.3,<10", "pytest-xdist>=3.8.0,<4",
                 "tensorboardX>=2.6.5,<3"] + DOCS_REQUIRES,
        "torch": ["torch>=2.13.0,<3"],
        "gpu": ["jax-cuda13-plugin[with-cuda]>=0.10.2,<0.12"],
    },
    entry_points={"console_scripts": ["rsvqa-jax=rsvqa_jax.cli:entry"]},
)
