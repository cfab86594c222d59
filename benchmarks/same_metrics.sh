#!/usr/bin/env bash
# A tiny pretraining with every numeric setting given and one thread, to check that a change leaves training
# unchanged: run it before the change, keep its metrics.csv, and run it after with that copy as BASELINE: every column
# but steps_per_s (wall-clock speed, which no two runs share) must match byte for byte, and eval_metrics.csv beside it.
#   bash benchmarks/same_metrics.sh [OUT_DIR [BASELINE [OPTION ...]]]  # default /tmp/electra_same_metrics; prints
# metrics.csv's path. OPTIONs (e.g. --grad_accum_steps 2) come after the settings below and replace them: the cases of
# benchmarks/same_metrics_cases.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/electra_same_metrics}
baseline=${2:-}
mkdir -p "$(dirname "$out")"
shift $(( $# < 2 ? $# : 2 ))
python pretrain.py --config demo --run_name same_metrics --output_dir "$out" --cache_dir "$out/cache" \
  --overwrite true --device cpu --precision fp32 --threads 1 --num_workers 0 --num_proc 1 --seed 11081 \
  --corpus demo --vocab_size 2000 --max_length 64 --hidden_size 64 --num_hidden_layers 2 --num_attention_heads 2 \
  --intermediate_size 256 --embedding_size 64 --generator_size 0.5 --max_position_embeddings 512 --dropout 0.1 \
  --mask_prob 0.15 --mask_token_prob 0.85 --random_token_prob 0.0 --temperature 1.0 --objective electra \
  --two_stage 0.0 --gen_loss_weight 1.0 --disc_loss_weight 50.0 --steps 40 --batch_size 16 --lr 1.0e-3 \
  --warmup_steps 8 --decay_power 1.0 --weight_decay 0.01 --adam_beta1 0.9 --adam_beta2 0.999 --adam_eps 1.0e-6 \
  --clip_grad 1.0 --grad_accum_steps 1 --log_every 5 --eval_examples 64 --checkpoint_at 1.0 \
  --min_line_chars 0 --max_sentence_chars 10000 --pad_vocab_multiple 0 "$@" > "$out.log" 2>&1 \
  || { tail -20 "$out.log"; exit 1; }
metrics="$out/same_metrics_11081/metrics.csv"
echo "$metrics"
if [ -n "$baseline" ]; then
  # drop the steps_per_s column by name, then compare the rest of both files, and the held-out metrics whole
  untimed() { awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "steps_per_s") t = i }
                                 { out = ""; for (i = 1; i <= NF; i++) if (i != t) out = out (out == "" ? "" : OFS) $i; print out }' "$1"; }
  cmp <(untimed "$baseline") <(untimed "$metrics")
  cmp "$(dirname "$baseline")/eval_metrics.csv" "$(dirname "$metrics")/eval_metrics.csv"
  echo "same metrics as $baseline (steps_per_s aside) and the same eval_metrics.csv"
fi
