"""Install rsvqa_jax: `pip install -e .` (add `[test]` for the tests, `[torch]` for parity/benchmarks)."""
from setuptools import find_packages, setup

# Versions tested together on CPU (Python 3.11); keep them pinned so installs are reproducible.
INSTALL_REQUIRES = [
    "jax==0.10.2",
    "jaxlib==0.10.2",
    "flax==0.12.8",
    "optax==0.2.8",
    "orbax-checkpoint==0.12.8",
    "grain==0.2.18",
    "tensorflow-datasets==4.9.10",
    "array-record==0.8.6",
    "transformers==5.24.0",
    "tokenizers==0.23.3",
    "safetensors==0.8.0",
    "ml-collections==1.1.0",
    "numpy==2.4.6",
    "tifffile==2026.3.3",
    "pillow==13.0.0",
    "matplotlib==3.11.2",
    "tqdm==4.70.1",
    "tensorboardX==2.6.5",
]

setup(
    name="rsvqa_jax",
    version="0.1.0",
    description="Fast JAX/Flax RSVQA training and language-bias audits.",
    packages=find_packages(include=["rsvqa_jax", "rsvqa_jax.*", "benchmarks", "benchmarks.*"]),
    python_requires=">=3.10",
    install_requires=INSTALL_REQUIRES,
    extras_require={
        "test": ["pytest==9.0.3"],
        "torch": ["torch==2.13.0"],
    },
    entry_points={"console_scripts": ["rsvqa-jax=rsvqa_jax.cli:entry"]},
)
