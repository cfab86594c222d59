#!/usr/bin/env bash
# The GPU checks and figures of BENCHMARKS.md, for a machine with one NVIDIA GPU, in parts that each end inside the
# device tool's 10 minutes on an H100:
#   bash benchmarks/gpu_session.sh PART...
# PART: tests (CUDA tests), demos (both README demos), wiki (Wikipedia pretraining, then STS-B fine-tuning of it),
# bench (the pretraining step's variants), ablations (its per-item breakdown), finetune_bench (the fine-tuning step),
# one_graph_tests (the CUDA tests and the one-graph step's tests), one_graph (the whole step as one CUDA graph beside
# the model-scope fast step), wiki_step (the small recipe's driver with the whole step as one graph), stack (10
# stacked fine-tuning runs of a Small model on the real STS-B against runs one by one), stack_compiled (the same
# 10 stacked runs on length buckets, eager against the whole step compiled as CUDA graphs), draws (the one-graph step
# with its masking and sampling noise from the run's generator beside the same step with `random_draws: counter`, its
# noise computed inside the graph, interleaved in one run; the Gumbel sampling alone by source; the CUDA test),
# scaling (data-parallel pretraining over the visible GPUs; on a machine of several);
# session: what one lent device's window measures, in one call of at most 8 minutes (the step budgets below sum to
# 460 s): the CUDA tests of the training step, the pretraining step of Small beside the HF baseline in one run, and
# ten stacked Small fine-tuning runs of the real STS-B with the step compiled, projected to the whole GLUE sweep
# (benchmarks/glue_projection.py). `DRY_RUN=1 bash benchmarks/gpu_session.sh session` runs every part of it on the
# CPU at toy sizes (the demo corpus and task, one timed step), to check that each starts and the timing logic holds;
# parts joined by + run at once (check = tests+demos+wiki), e.g. `bash benchmarks/gpu_session.sh tests+wiki bench`.
# Results go to $OUT (or ./gpu_results): summary.txt, logs.tgz (every log and metrics file) and the benchmark JSON.
#
# The GPU machine lacks fastai and friends: fetch their wheels here first, from the repository root,
#   bash ../shared/tools/device-wheels.sh      # fills .whl/ (git-ignored)
# and copy the shared corpora the check part reads into .gpu_data/ (git-ignored; ../shared does not travel):
#   mkdir -p .gpu_data/glue && cp ../shared/data/corpus/wikipedia_leads.txt .gpu_data/ \
#     && cp -r ../shared/data/glue/STS-B .gpu_data/glue/
# then run this there with `.whl` and `.gpu_data` carried along.
set -uo pipefail
out=${OUT:-gpu_results}
logs=$(mktemp -d)
work=$(mktemp -d)
data=${GPU_DATA:-.gpu_data}
mkdir -p "$out"
if compgen -G '.whl/*.whl' > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
summary="$out/summary.txt"
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  python3 -c 'import torch, transformers, fastai, datasets, pyarrow; print("python", __import__("sys").version.split()[0],
"torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__, "fastai",
fastai.__version__, "datasets", datasets.__version__, "pyarrow", pyarrow.__version__)'; } > "$summary" 2>&1

step() {  # step NAME SECONDS COMMAND...: the whole output in logs/NAME.log, its exit status and last lines in summary
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout -s INT -k 10 "$limit" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  { echo "== $name: $* (limit ${limit}s) -> exit $rc in $((SECONDS - t0))s"; tail -n 8 "$logs/$name.log"; } >> "$summary"
}

finish() {
  for f in "$work"/ck/*/metrics.csv "$work"/ck/*/eval_metrics.csv "$work"/glue/*/results.csv; do
    [ -f "$f" ] && cp "$f" "$logs/$(basename "$(dirname "$f")")_$(basename "$f")"
  done
  tar -czf "$out/logs.tgz" -C "$logs" .
  cat "$summary"
}
trap finish EXIT

tests() {  # the CUDA tests and the files of the speed and optimizer tests (the rest of the suite runs on the CPU in CI)
  step tests 200 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py tests/objective/test_model.py \
    tests/pretraining/test_callbacks.py tests/pretrained/test_export.py tests/pretraining/test_learner.py \
    tests/benchmarks tests/training/test_optim.py tests/training/test_schedule.py tests/training/test_speed.py
}

demos() {  # the README's demo commands on the GPU
  step demo_pretrain 100 python3 pretrain.py --device cuda --output_dir "$work/ck" --cache_dir "$work/cache"
  step demo_finetune 200 python3 finetune.py --device cuda --model "$work/ck/demo_11081_100%.pth" \
    --output_dir "$work/glue" --test_output_dir "$work/test_outputs" --cache_dir "$work/cache"
}

wiki() {  # real text: the demo recipe (as tests/test_pretrain.py runs it on the CPU), then the small recipe
  local corpus=(--corpus "$data/wikipedia_leads.txt" --sentence_split none --device cuda --output_dir "$work/ck"
                --cache_dir "$work/cache")
  step wiki_demo 90 python3 pretrain.py --config demo "${corpus[@]}" --run_name wiki_demo
  # the first two minutes of the small recipe (1M steps, warm-up 10k), stopped by SIGINT like an interrupted run
  step wiki_small 170 python3 pretrain.py --config small "${corpus[@]}" --run_name wiki_small --eval_examples 512 \
    --log_every 100 --checkpoint_at 0.001,0.002,0.004,0.008,0.016,0.032 --compile true \
    --compile_mode reduce-overhead --pad_vocab_multiple 64
  # real STS-B fine-tuning of that model (small recipe, 1 run of 3 epochs): seconds per run for the GLUE projection
  local latest
  latest=$(ls -t "$work"/ck/wiki_small_11081_*.pth 2>/dev/null | head -n 1)
  step stsb 100 python3 finetune.py --config small --model "$latest" --data "$data/glue" --tasks STS-B --runs 1 \
    --task_overrides '{}' --group stsb --device cuda --output_dir "$work/glue" --test_output_dir "$work/test_outputs" \
    --cache_dir "$work/cache"
}

bench() {  # the pretraining step: baseline, eager Learner, compiled (default mode), compiled with CUDA graphs
  step bench_pretrain 240 python3 -m benchmarks.bench pretrain --preset small --device cuda --compile \
    --compile_mode reduce-overhead --ablations --variants learner_eager,learner_compiled --rounds 3 --profile \
    --check_sync --json "$out/gpu_pretrain_small.json"
}

ablations() {  # the per-item breakdown
  step bench_ablations 220 python3 -m benchmarks.bench pretrain --preset small --device cuda --compile \
    --compile_mode reduce-overhead --ablations --rounds 3 --json "$out/gpu_pretrain_small_ablations.json"
}

one_graph_tests() {  # the CUDA tests, the one-graph step's tests among them
  step one_graph_tests 170 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py tests/training/test_one_graph.py tests/training/test_step.py tests/finetuning/test_compile.py -k "${TESTS_K:-not nothing}" \
    tests/training/test_optim.py
}

one_graph() {  # the whole step as one graph (compile_scope step) beside the model-scope fast step, interleaved
  step bench_one_graph 250 python3 -m benchmarks.bench pretrain --preset small --device cuda --compile \
    --compile_mode reduce-overhead --compile_scope step --ablations --variants fast_model_scope --rounds 3 \
    --json "$out/gpu_pretrain_small_one_graph.json"
}

stack() {  # stacked fine-tuning runs on the real STS-B with a Small model: 10 runs stacked against 2 runs one by one
  step stack_src 100 python3 pretrain.py --config small --corpus "$data/wikipedia_leads.txt" --sentence_split none \
    --device cuda --output_dir "$work/ck" --cache_dir "$work/cache" --run_name stack_src --steps 100 --log_every 50 \
    --checkpoint_at 1.0
  local src="$work/ck/stack_src_11081_100%.pth" one=(--config small --data "$data/glue" --tasks STS-B --predict false
    --task_overrides '{STS-B: {epochs: 1}}' --device cuda --output_dir "$work/glue" --cache_dir "$work/cache")
  step stsb_stacked 150 python3 finetune.py "${one[@]}" --model "$src" --runs 10 --stack_runs 10 --group stacked
  step stsb_alone 100 python3 finetune.py "${one[@]}" --model "$src" --runs 2 --stack_runs 1 --group alone
  step stack_cuda_test 60 python3 -m pytest -q -p no:cacheprovider tests/finetuning/test_stack.py -k cuda
}

stack_compiled() {  # the same 10 stacked STS-B runs, eager and then with the whole step compiled (CUDA graphs), on buckets
  step stack_src 100 python3 pretrain.py --config small --corpus "$data/wikipedia_leads.txt" --sentence_split none \
    --device cuda --output_dir "$work/ck" --cache_dir "$work/cache" --run_name stack_src --steps 100 --log_every 50 \
    --checkpoint_at 1.0
  local src="$work/ck/stack_src_11081_100%.pth" one=(--config small --data "$data/glue" --tasks STS-B --predict false
    --task_overrides '{STS-B: {epochs: 1}}' --device cuda --output_dir "$work/glue" --cache_dir "$work/cache"
    --length_buckets '[32, 64, 128]' --runs 10 --stack_runs 10)
  step stsb_stacked_eager 120 python3 finetune.py "${one[@]}" --model "$src" --group eager
  step stsb_stacked_compiled 240 python3 finetune.py "${one[@]}" --model "$src" --group compiled --compile true \
    --compile_mode reduce-overhead
  step compile_cuda_test 90 python3 -m pytest -q -p no:cacheprovider tests/finetuning/test_compile.py -k cuda
}

draws() {  # the two random sources side by side in one run: generator (the fast step) and counter (counter_draws)
  local dev=cuda compile=(--compile --compile_mode reduce-overhead --compile_scope step) preset=small timing=(--rounds 3)
  local noise=(--shape 128 19 30522 --rounds 20)
  if [ -n "${DRY_RUN:-}" ]; then  # on the CPU at toy size, eager (inductor's CPU compilation takes minutes)
    dev=cpu compile=() preset=demo timing=(--steps 1 --warmup 1 --rounds 1) noise=(--shape 2 19 30522 --rounds 1)
  fi
  step noise_draws 120 python3 -m benchmarks.draws_bench --device "$dev" "${noise[@]}"
  step bench_draws 240 python3 -m benchmarks.bench pretrain --preset "$preset" --device "$dev" "${compile[@]}" \
    "${timing[@]}" --ablations --variants counter_draws --json "$out/pretrain_${preset}_draws.json"
  step draws_cuda_test 90 python3 -m pytest -q -n 0 -p no:cacheprovider tests/test_cuda.py -k counter_draws
}

wiki_step() {  # the real driver, small recipe, whole step as one graph: its own steps/s in metrics.csv
  step wiki_small_step 110 python3 pretrain.py --config small --corpus "$data/wikipedia_leads.txt" --sentence_split none \
    --device cuda --output_dir "$work/ck" --cache_dir "$work/cache" --run_name wiki_small_step --eval_examples 512 \
    --log_every 100 --checkpoint_at 0.001 --compile true --compile_mode reduce-overhead --compile_scope step \
    --pad_vocab_multiple 64
}

finetune_bench() {
  step bench_finetune 130 python3 -m benchmarks.bench finetune --preset small --device cuda --compile --rounds 3 \
    --profile --json "$out/gpu_finetune_small.json"
}

scaling() {  # data-parallel pretraining over 1, 2, 4, ... of the visible GPUs (alone on the machine: it uses them all)
  step bench_scaling 420 python3 -m benchmarks.bench scaling --preset small --json "$out/gpu_scaling_small.json"
}

session() {  # one device window: CUDA tests, pretraining beside the baseline, stacked compiled GLUE fine-tuning
  local dev=cuda preset=small runs=10 buckets='[32, 64, 128]' src="$work/ck/session_src_11081_100%.pth"
  local corpus=(--corpus "$data/wikipedia_leads.txt") data_=(--data "$data/glue") timing=(--steps 50 --warmup 20 --rounds 3)
  local compile=(--compile --compile_mode reduce-overhead --compile_scope step) ft_compile=(--compile true
    --compile_mode reduce-overhead)
  if [ -n "${DRY_RUN:-}" ]; then  # the same commands on the CPU at toy sizes (the demo corpus, task and model), eager:
    # inductor's CPU compilation takes minutes; the compiled steps' CPU tests (aot_eager) run in the suite
    dev=cpu preset=demo runs=2 buckets='[32, 64]' corpus=() data_=() timing=(--steps 1 --warmup 1 --rounds 1)
    compile=() ft_compile=()
  fi
  step session_cuda_tests 110 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py tests/finetuning/test_compile.py \
    tests/finetuning/test_stack.py -k cuda
  step session_bench_pretrain 140 python3 -m benchmarks.bench pretrain --preset "$preset" "${timing[@]}" --device "$dev" \
    "${compile[@]}" --json "$out/pretrain_${preset}_session.json"
  step session_src 50 python3 pretrain.py --config "$preset" "${corpus[@]}" --sentence_split none --device "$dev" \
    --output_dir "$work/ck" --cache_dir "$work/cache" --run_name session_src --steps 50 --log_every 25 \
    --checkpoint_at 1.0 --compile false
  step session_stsb_stacked 150 python3 finetune.py --config "$preset" "${data_[@]}" --model "$src" --tasks STS-B \
    --runs "$runs" --stack_runs "$runs" --predict false --task_overrides '{STS-B: {epochs: 3}}' \
    --length_buckets "$buckets" --group session --device "$dev" "${ft_compile[@]}" \
    --output_dir "$work/glue" --cache_dir "$work/cache"
  step session_glue_projection 10 python3 -m benchmarks.glue_projection --log "$logs/session_stsb_stacked.log" \
    --results "$work/glue/session/results.csv" --json "$out/glue_projection.json"
}

parts=(session tests demos wiki bench ablations finetune_bench scaling one_graph_tests one_graph wiki_step stack
       stack_compiled draws)
for arg in "$@"; do
  [ "$arg" = check ] && arg=tests+demos+wiki
  for p in ${arg//+/ }; do   # parts joined by + run at once (the GPU has room for all); the rest one after another
    if [[ " ${parts[*]} " == *" $p "* ]]; then $p & else echo "unknown part $p" >> "$summary"; fi
  done
  wait
done
