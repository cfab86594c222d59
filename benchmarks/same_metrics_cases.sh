#!/usr/bin/env bash
# benchmarks/same_metrics.sh for the demo and for each option that changes the step's shape: micro-batches, two-stage
# training, every objective and the uniform generator. fast_electra samples from an existing masked LM: the generator
# the demo case exported (BASELINE_DIR's when given, so that both runs sample from the very same weights), with its
# temperature annealed. Run it before a change, then after it with the first run's folder as BASELINE_DIR: every case
# must give the same metrics, byte for byte. Every case runs; the cases that differ are named at the end.
#   bash benchmarks/same_metrics_cases.sh OUT_DIR [BASELINE_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: same_metrics_cases.sh OUT_DIR [BASELINE_DIR]}
base=${2:-}
cases=(
  'demo'
  'grad_accum_2 --grad_accum_steps 2'
  'two_stage --two_stage 0.5 --generator_size 1.0 --tie_weights none'
  'electra_15 --objective electra_15'
  'mlm --objective mlm'
  'replace_mlm --objective replace_mlm'
  'all_tokens_mlm --objective all_tokens_mlm'
  'uniform_generator --uniform_generator true'
  'electric --objective electric'
  'fast_electra --objective fast_electra --tie_weights none --temperature_start 2.0 --generator GENERATOR'
)
generator=${base:-$out}/demo/same_metrics_11081/generator  # written by the demo case, the first
differ=()
for case in "${cases[@]}"; do
  read -r name options <<< "$case"
  options=${options/GENERATOR/$generator}
  baseline=${base:+$base/$name/same_metrics_11081/metrics.csv}
  echo "== $name ${options}"
  # shellcheck disable=SC2086  # the options are words
  bash benchmarks/same_metrics.sh "$out/$name" "${baseline:-}" $options || differ+=("$name")
done
if [ ${#differ[@]} -gt 0 ]; then echo "differ: ${differ[*]}"; exit 1; fi
