#!/usr/bin/env bash
# Run on the device tool's GPU machine, in the repository root, with carry=[".gpu"] (made here
# by benchmarks/device/prepare.sh):
#   bash benchmarks/device/run.sh accelerator          # issue 18's GPU train-step targets
#   bash benchmarks/device/run.sh pipeline             # the original pipeline on the GPU
# (further arguments go to benchmarks.run: --toy checks the harness in seconds).
# Installs the carried wheels beside the image's packages, then runs benchmarks.run with those
# families; results land in $OUT/FAMILY/results.{json,md}, the whole log in $OUT/FAMILY.log.
# A family per call keeps each under the tool's 10-minute limit.
set -uo pipefail
cd "$(dirname "$0")/../.."
families="${1:?families, comma-separated: accelerator and/or pipeline}"
shift
out="${OUT:?the device tool sets OUT}/${families//,/_}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .gpu/whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 RSVQA_BENCH_TOKENIZER="$PWD/.gpu/tokenizer"
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.6  # PyTorch shares the GPU in the same process
nvidia-smi -L
python3 -m benchmarks.run --only "$families" --out "$out" "$@" 2>&1 | tee "$out.log"
