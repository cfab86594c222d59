#!/usr/bin/env bash
# Every GPU figure of BENCHMARKS.md in one command, for a machine with one NVIDIA GPU (meant to end well inside the
# device tool's 10 minutes on an H100). Logs and JSON go to $OUT, or to ./gpu_results when $OUT is unset, 8 files
# at most: summary.txt, 4 logs and 3 JSON files.
#
# Where the GPU machine lacks fastai and friends, fetch their wheels here first, from the repository root:
#   bash ../shared/tools/device-wheels.sh      # fills .whl/ (git-ignored)
# then run `bash benchmarks/gpu_session.sh` there with `.whl` carried along. Not yet run on a GPU.
set -uo pipefail
out=${OUT:-gpu_results}
mkdir -p "$out"
if compgen -G '.whl/*.whl' > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
{ nvidia-smi; python3 -c 'import torch, transformers, fastai; print(torch.__version__, transformers.__version__, fastai.__version__)'; } \
  > "$out/summary.txt" 2>&1

step() {  # step NAME SECONDS COMMAND...: the command's whole output in NAME.log, its last lines in summary.txt
  local name=$1 limit=$2; shift 2
  echo "== $* (limit ${limit}s)" >> "$out/summary.txt"
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "exit $?" >> "$out/summary.txt"
  tail -n 6 "$out/$name.log" >> "$out/summary.txt"
}

step tests 90 python3 -m pytest -q -x tests/test_speed.py
step pretrain 200 python3 -m electra.bench pretrain --preset small --device cuda --compile --check_sync \
  --json "$out/gpu_pretrain_small.json"
step ablations 120 python3 -m electra.bench pretrain --preset small --device cuda --ablations \
  --json "$out/gpu_pretrain_small_ablations.json"
step finetune 120 python3 -m electra.bench finetune --preset small --device cuda --compile \
  --json "$out/gpu_finetune_small.json"
cat "$out/summary.txt"
