#!/usr/bin/env bash
# Random batches (official) against length-bucketed batches (speed option) on the real STS-B: 5 seeds each, the same
# pretrained model, everything else equal. Prints the dev Spearman of every run, mean and std per mode, and the time.
#   bash benchmarks/stsb_batching.sh [MODEL] [MAX_LENGTH]    # default: the demo checkpoint, length 64
set -euo pipefail
model=${1:-checkpoints/pretrain/demo_11081_100%.pth}
length=${2:-64}
out=${OUT:-/tmp/stsb_batching}
for bucketing in false true; do
  start=$SECONDS
  python finetune.py --config small --model "$model" --data ../shared/data/glue --tasks STS-B --runs 5 \
    --max_length "$length" --epochs 3 --task_overrides '{}' --length_bucketing "$bucketing" --predict false \
    --group "bucketing_$bucketing" --output_dir "$out" --cache_dir "$out/cache" > "$out.bucketing_$bucketing.log" 2>&1
  echo "length_bucketing $bucketing: $((SECONDS - start)) s"
done
python - "$out" <<'PY'
import sys
import pandas as pd
for mode in ('false', 'true'):
    rows = pd.read_csv(f'{sys.argv[1]}/bucketing_{mode}/results.csv')
    print(f"length_bucketing {mode}: spearman {', '.join(f'{s:.2f}' for s in rows['spearman'])}; "
          f"mean {rows['spearman'].mean():.2f}, std {rows['spearman'].std():.2f}; "
          f"train seconds per run {rows['seconds'].mean():.1f}")
PY
