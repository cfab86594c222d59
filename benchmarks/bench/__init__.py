"""Benchmarks of the training steps: the project's real step against a straightforward baseline of the
same objective, timed in the same process, interleaved round by round (shared machines are noisy: medians count).

    python -m benchmarks.bench pretrain --preset small                      # CPU (bf16 if native): see BENCHMARKS.md
    python -m benchmarks.bench pretrain --preset small --device cuda --compile
    python -m benchmarks.bench finetune --preset small --device cuda --compile
    python -m benchmarks.bench scaling --preset small --procs 1,2,4,8      # data-parallel, one torchrun job per count

`pretrain` times
  - fast: the real pretraining step, i.e. the fastai Learner of `electra.pretraining.learner.pretraining_learner` with all its
    callbacks (device masking, masked-only generator head, ElectraLoss, multi-tensor ElectraAdam, clipping,
    schedule, metrics on the device, bf16 autocast on GPU and on CPUs with native bf16, optional `torch.compile`,
    optional padded vocabulary);
  - baseline: the same objective written plainly: HF `ElectraForMaskedLM` / `ElectraForPreTraining` called as-is with
    their own losses (generator logits at EVERY position), fp32, eager, a per-parameter Python-loop Adam (same
    no-bias-correction math), per-parameter clipping, and the loss read back every step;
  - with `--ablations`, in-between steps that add one item at a time (the per-item breakdown): `+masked_head`
    (the project's model and loss: generator head at the masked positions only, sync-free attention mask),
    `+fused_adam` (ElectraAdam, one fused kernel per group, and foreach clipping), `+no_sync` (no loss read per
    step), `+bf16` (autocast), then `learner_fp32` / `learner_eager` (the real Learner without mixed precision /
    without compile) and, with a `--compile_mode` other than the default, `learner_compiled` (compiled in the
    default mode).
Before timing, both compute the loss of one batch from the same weights, masks and random streams: they must agree.

`finetune` times a GLUE-style classification step (batch 32, length 128): the real step, the fastai Learner of
`electra.finetuning.learner.finetuning_learner` (layer-wise rates, ElectraAdam, schedule, clipping, bf16 where native, optional
compile), against the same classifier (HF `ElectraModel`, dropout, linear head on [CLS]) trained plainly in fp32 with
a Python-loop Adam, per-parameter clipping and the loss read every step.

FLOPs are counted from the model shapes (`pretrain_flops`, `finetune_flops`: matmuls only, backward = 2 x forward);
MFU = model FLOPs of the fast step x steps/s / peak FLOP/s of the device (`--peak_tflops`, or `PEAK_TFLOPS`).

`scaling` measures data-parallel pretraining rather than one step: for each process count k (default 1, the powers
of two up to the visible GPUs, and their count) it runs `torchrun --standalone --nproc_per_node k pretrain.py` on the
demo grammar's corpus with a vocabulary of the preset's size, a fixed batch per process (`--mode weak`; `strong`
keeps the global batch), and reads the rate the job itself writes to metrics.csv after `--warmup` steps (start-up
and the data build are outside it). It prints steps/s, examples/s, tokens/s and the efficiency, examples/s at k /
(k x examples/s at 1); `--device cpu` runs the same jobs on gloo, to check the tool where there is no GPU
(`benchmarks.bench.scaling`).
"""
