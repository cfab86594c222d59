#!/usr/bin/env bash
# The batch loss summed over the examples (official run_finetuning.py, the default) against averaged, on the real
# STS-B: the ELECTRA models of the stsb_cpu comparison (both pretraining seeds), 4 fine-tuning seeds each, everything
# else as that comparison fine-tunes. Writes runs.csv (one row per run) beside this script and prints mean and std.
#   bash benchmarks/finetune_loss_stsb_cpu/run.sh [COMPARISON_DIR]   # default: checkpoints/compare/stsb_cpu
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
pretrain=${1:-checkpoints/compare/stsb_cpu}/pretrain
out=${OUT:-/tmp/finetune_loss_stsb_cpu}
for reduction in sum mean; do
  for seed in 1 2; do
    python finetune.py --config small --data ../shared/data/glue --runs 4 --epochs 3 --task_overrides '{}' --lr 0.001 \
      --length_bucketing true --predict false --device cpu --model "$pretrain/stsb_cpu_electra_${seed}/discriminator" \
      --tasks STS-B --group "${reduction}_${seed}" --output_dir "$out" --test_output_dir "$out/predictions" \
      --loss_reduction "$reduction" > "$out.${reduction}_${seed}.log" 2>&1
  done
done
python - "$out" "$here/runs.csv" <<'PY'
import sys
import pandas as pd
parts = [pd.read_csv(f'{sys.argv[1]}/{r}_{s}/results.csv').assign(loss_reduction=r, pretrain_seed=s)
         for r in ('sum', 'mean') for s in (1, 2)]
runs = pd.concat(parts)[['loss_reduction', 'pretrain_seed', 'task', 'run', 'seed', 'spearman', 'pearson', 'train_loss',
                         'steps', 'seconds']]
runs.to_csv(sys.argv[2], index=False, float_format='%.4f')
print(runs.groupby('loss_reduction')[['spearman', 'pearson', 'train_loss']].agg(['mean', 'std']).round(3))
wide = runs.pivot_table(index=['pretrain_seed', 'run'], columns='loss_reduction', values='spearman')
diff = wide['sum'] - wide['mean']
print(f'sum - mean, paired by model and seed: {diff.mean():.2f} (standard error {diff.std() / len(diff) ** 0.5:.2f})')
PY
