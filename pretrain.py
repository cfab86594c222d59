# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---
# exported from notebooks/Pretrain.ipynb by `python -m electra.tools.notebooks export` (edit the notebook, not this file): sha256 e92044612420761ae5b262eff0d40f0e2fee7dee73b49beb91df31e4b0a09188

# %% [markdown]
# # Pretraining ELECTRA
# A small generator fills in masked tokens; a discriminator learns to tell which tokens were replaced
# (replaced-token detection, Clark et al. 2020). Both train together; afterwards the discriminator is the model
# to fine-tune. Run as a script, this takes its config from the command line (`python pretrain.py --help`);
# in Jupyter, edit `overrides` in the cell below. This script is exported from `notebooks/Pretrain.ipynb`
# (`python -m electra.tools.notebooks export`): edit the notebook, not the script.
# The paper's other objectives (BERT, ELECTRA 15%, Replace MLM, All-Tokens MLM, two-stage training, the uniform
# generator) are presets layered over a size, e.g. `--config small,bert` (docs/objectives.md).

# %%
import os
import sys

if 'ipykernel' in sys.modules and not os.path.isdir('electra') and os.path.isdir(os.path.join('..', 'electra')):
    os.chdir('..')  # Jupyter starts the kernel in notebooks/; the job runs from the repository root, as the script does

# %% tags=["parameters"]
overrides = {}  # in a notebook: e.g. {'config': 'demo', 'steps': 200}

# %%
from electra.config.cli import load_config
from electra.config.pretrain import PretrainConfig
from electra.config.values import config_to_dict
from electra.runtime.errors import friendly_errors
from electra.runtime.processes import cli_args, end_with_parent
from electra.training.distributed import check_batch_split
from electra.training.trackers import check_trackers

friendly_errors()
end_with_parent()  # a job the comparison command or torchrun started ends when they do, kill -9 included
cfg = load_config(PretrainConfig, cli_args(), preset_dir='configs/pretrain', default_preset='demo',
                  prog='pretrain.py', overrides=overrides)
check_batch_split(cfg.batch_size, cfg.grad_accum_steps, cfg.resume)  # under torchrun: equal rows for every process
check_trackers(cfg.logger)  # each tracker's package installed, MLflow's store (a server, a local store) answering
cfg

# %% [markdown]
# ## Run directory, device, and where we start
# Checkpoints `<run_name>_<seed>_<percent>.pth` go to `output_dir`; the run's tokenizer, metrics and exported
# models go to `output_dir/<run_name>_<seed>/`. With `--resume` the run continues from its latest checkpoint.

# %%
import torch

from electra.training.checkpoint import check_resume_compatible, check_resume_corpus, load_checkpoint
from electra.pretraining.callbacks import resume_note, resume_threads
from electra.pretraining.learner import compile_description, existing_run_guard, prepare_run_dir
from electra.training.device import resolve_device, resolve_precision, use_cpu_threads
from electra.training.distributed import init_distributed, main_process_first, print_main

device = resolve_device(cfg.device)
procs = init_distributed(device, cfg.dist_timeout)  # under torchrun: this process's rank among procs.size
run_dir = prepare_run_dir(cfg)
precision = resolve_precision(cfg.precision, device)
with main_process_first('the run directory', cfg.dist_timeout):
    resume_path = existing_run_guard(cfg)
ckpt = load_checkpoint(resume_path) if resume_path else None
threads = use_cpu_threads(cfg.threads, resumed=resume_threads(ckpt))  # auto: the cores left free
start_step = ckpt['step'] if ckpt else 0
print_main(f'run {run_dir} on {device} ({precision}, {threads}{compile_description(cfg, precision)}) x {procs.size} '
           f'process(es), starting at step {start_step} of {cfg.steps}{resume_note(ckpt)}')

# %% [markdown]
# ## Corpus and tokenizer
# Each `corpus` entry is one corpus: text files in the official layout (one sentence per line, a blank line
# between documents), raw documents (one per file, or one per line: split into sentences by spaCy), local
# .parquet/.jsonl tables or a hub dataset `hub:<name>[:<config>]` (see `--corpus_format`, `--sentence_split`).
# Without a `--tokenizer`, a WordPiece vocabulary is trained on the corpus and saved with the run. A run that continues
# from existing weights (`--init_from`: released models, a converted TensorFlow checkpoint, an earlier run) uses their
# tokenizer, and its config must have their sizes.

# %%
from pathlib import Path

from electra.data.corpus import corpus_text_files, resolve_corpus
from electra.data.corpus import BuildSettings
from electra.data.tokenizer import applied_case, get_tokenizer, tokenizer_state

from electra.pretrained.generator import check_generator, load_generator
from electra.pretraining.init_from import check_init_config, init_tokenizer, load_init
from electra.pretraining.learner import end_if_finished

with main_process_first('the weights to start from', cfg.dist_timeout):  # (a hub download, once)
    init = load_init(cfg.init_from) if cfg.init_from and not ckpt else None  # resumed: the checkpoint has them
    frozen = load_generator(cfg.generator) if cfg.generator else None  # an existing generator, frozen
if init: check_init_config(cfg, init)  # their sizes and tokenizer against this run's config
settings = BuildSettings.from_config(cfg)
with main_process_first('the corpus and the tokenizer', cfg.dist_timeout):  # made once, by the main process
    sources = resolve_corpus(cfg.corpus, Path(cfg.cache_dir), settings)
    files = corpus_text_files(sources)
    tokenizer = (init_tokenizer(init, ckpt) if cfg.init_from else
                 frozen.tokenizer if frozen and not cfg.tokenizer else  # the generator's vocabulary is the run's
                 get_tokenizer(cfg.tokenizer, files, cfg.vocab_size, cfg.lowercase, run_dir, sources,
                               cfg.strip_accents))
if frozen: check_generator(cfg, frozen, tokenizer)  # its vocabulary and length against the run's
own = (f'the tokenizer of init_from {cfg.init_from}' if cfg.init_from else
       f'the tokenizer of the generator {cfg.generator}' if frozen and not cfg.tokenizer else
       f'the tokenizer {cfg.tokenizer}' if cfg.tokenizer else '')
tok_state = tokenizer_state(tokenizer)
if ckpt: check_resume_compatible(ckpt, config_to_dict(cfg), tok_state, resume_path)  # (first: its refusal names the fix)
if own: cfg.follow_tokenizer(applied_case(tokenizer), own, len(tokenizer))  # what it does to its input, its size
print_main(f'{len(sources)} corpus(es), {len(files)} text file(s), vocabulary of {len(tokenizer)}')

# %% [markdown]
# ## Examples
# The official example builder packs consecutive sentences of a document into `[CLS] A [SEP] B [SEP]` examples
# of up to `max_length` tokens (10% single-segment, 5% shorter); built once per corpus, in `num_proc` processes,
# and cached as memory-mapped Arrow. `eval_examples` of them are held out for evaluation; several corpora are
# concatenated, or mixed by `corpus_weights`.

# %%
import datasets

from electra.data.cache import (build_corpus, build_summary, drop_repeated_across, examples_digest, format_duplicates,
                                format_summary)
from electra.data.batches import held_out_split, mixing_line, pretraining_dataloader

with main_process_first('the pretraining data cache', cfg.dist_timeout):  # built once; the others read it
    parts = [build_corpus(source, tokenizer, settings, Path(cfg.cache_dir), cfg.seed, cfg.num_proc, say=print_main)
             for source in sources]  # each says whether its cache is reused or built
# each corpus is de-duplicated alone when built; a document an earlier corpus holds is dropped here
parts, across = drop_repeated_across(parts) if cfg.deduplicate else (parts, [0] * len(parts))
corpus_digest = examples_digest(parts, across)  # the examples by content, recorded in checkpoints
for source, part, n in zip(sources, parts, across):  # what was read, then the text read twice and dropped
    print_main(format_summary(build_summary(part)))
    print_main(format_duplicates(source, build_summary(part), n))
if ckpt: check_resume_corpus(ckpt, cfg.corpus, corpus_digest, resume_path)
# a run at its last step ends here, once its corpus is known to be the checkpoint's (a changed one is refused above)
end_if_finished(cfg, ckpt, resume_path, tokenizer, run_dir, frozen and frozen.net)
weights = cfg.corpus_weights or None
train_parts, held_out = held_out_split(parts, cfg.eval_examples, cfg.seed, weights, [s.entry for s in sources])
dataset = datasets.concatenate_datasets(train_parts) if len(train_parts) > 1 else train_parts[0]
train_dl = pretraining_dataloader(dataset, cfg.batch_size, cfg.max_length, tokenizer.pad_token_id, cfg.seed,
                                  cfg.steps, start_step, cfg.num_workers, [len(p) for p in train_parts], weights,
                                  procs.rank, procs.size)  # this process's rows of each global batch
print_main(f'{len(dataset)} training examples, {len(held_out) if held_out else 0} held out; {len(train_dl)} steps to run')
if weights:  # each corpus's share of the rows, and how often its examples are seen
    print_main(mixing_line([len(p) for p in train_parts], weights, [s.entry for s in sources], cfg.steps, cfg.batch_size))

# %% [markdown]
# The first examples, decoded: `A:` segment A with token type 0 (`[CLS] A [SEP]`), `B:` segment B with token type 1
# (`B [SEP]`), absent in a single-segment example.

# %%
from electra.objective.masking import MaskingSettings
from electra.tools.data_views import examples_frame, mask_batch, masked_frame
from electra.tools.walkthrough import example_batch, show

show(examples_frame(dataset, tokenizer, n=3), 'the first examples')

# %% [markdown]
# A batch of them masked as the training step masks every batch on the device: about 15% of the real tokens are
# chosen, 85% of those replaced by `[MASK]` (marked «token→[MASK]»), the others kept (marked «token»).

# %%
batch_ids, batch_types = example_batch(dataset, tokenizer, n=4, max_length=cfg.max_length)
masked = mask_batch(batch_ids, MaskingSettings.from_config(cfg, tokenizer), seed=cfg.seed)
show(masked_frame(batch_ids, batch_types, masked, tokenizer, n=2), 'a batch before and after masking')

# %% [markdown]
# ## Generator and discriminator
# HF `ElectraForMaskedLM` and `ElectraForPreTraining`, sharing one embedding module; the generator's output
# projection is the word-embedding matrix.
# With `--init_from` they start from the source's weights (the shared embeddings checked equal there); the
# optimizer and the step start fresh, with the run's own warm-up.

# %%
from electra.objective.model import build_pretraining_model, parameter_line

torch.manual_seed(cfg.seed)
model = build_pretraining_model(cfg, MaskingSettings.from_config(cfg, tokenizer),  # the tokenizer's size and ids
                                frozen and frozen.net)  # the existing generator of a frozen kind, as it is
if init:
    from electra.pretraining.init_from import init_model_
    init_model_(model, init)
    print_main(f'weights from {init.source}')
print(parameter_line(model))  # its parts as the objective's row names them (BERT: one network and its MLM head)

# %% [markdown]
# ## The Learner
# The step is one function, `pretraining_step` in `electra/pretraining/step.py` (masking on the device, generator,
# sampling, discriminator, the loss `1 * generator MLM + 50 * discriminator BCE`, gradients, clipping at 1.0, Adam
# without bias correction); the Learner's other callbacks apply warm-up and linear decay, log, evaluate and checkpoint.

# %%
from electra.pretraining.learner import checkpoint_extra, pretraining_learner, save_run_config

learn = pretraining_learner(cfg, model, tokenizer, train_dl, run_dir, device, precision, resume=ckpt,
                            extra_state=checkpoint_extra(cfg, tok_state, corpus_digest), held_out=held_out)
save_run_config(cfg, run_dir)

# %% [markdown]
# ## Train
# Metrics go to `metrics.csv` in the run directory every `log_every` steps, held-out metrics to `eval_metrics.csv`
# and one line each: the discriminator's AUC beside chance (0.5) and its AUC on the same text replaced at random (a
# probe whose difficulty does not move with the generator), the generator's accuracy beside always guessing the most
# frequent token, the discriminator's beside always answering "original". Checkpoints at 6.25, 12.5, 25, 50 and 100%
# of the steps. Ctrl-C (in Jupyter: interrupt the kernel) finishes the current step, writes a checkpoint there and
# stops; `--resume` continues from it as if nothing had happened.

# %%
from electra.pretraining.learner import train
from electra.training.distributed import finish_distributed

if start_step < cfg.steps:
    train(learn)
finish_distributed()  # in a torchrun job the other processes end here: what follows is the main process's

# %% [markdown]
# ## Export
# The discriminator (the model to fine-tune) and the generator, each loadable with `from_pretrained`.

# %%
from electra.pretrained.export import export_pretrained
from electra.pretraining.learner import end_trackers

exported = export_pretrained(model, tokenizer, run_dir)
for name, path in exported.items(): print(f'{name}: {path}')
end_trackers(learn, cfg, exported)  # with tracking_artifacts: the export sent to the trackers

# %% [markdown]
# ## The two networks at work
# The trained generator fills in the masked positions of that batch with samples (those of its first example here;
# on a GPU the positions differ from the ones above); a sample equal to the original counts as original.

# %%
from electra.tools.walkthrough import detection_view, generator_samples, replaced_token_detection

replaces = model.objective.reported.replacements  # an objective without a generator (BERT) replaces nothing
if replaces:
    rtd = replaced_token_detection(model, batch_ids[:2], batch_types[:2], tokenizer, cfg, seed=cfg.seed)
    show(generator_samples(rtd, tokenizer, n=1), "the generator's samples at the masked positions")
else:
    print(f'objective {cfg.objective}: no generator and no replaced tokens to show; its lines above are the loss and '
          'the accuracy of its MLM at the masked positions')

# %% [markdown]
# The discriminator's verdict on every token of that example. In a notebook each token is shaded red by its probability
# of "replaced" (hover for the number), a replaced token followed by the original struck through, a flagged one
# (probability above 0.5) outlined; in a terminal a replaced token is written [sample/original] and a flagged one starred
# with its probability. The table lists the replaced and the flagged ones.
#
# On the demo the discriminator flags few tokens. The generator has learned the corpus's word frequencies and samples
# frequent words, which only the syntax of the sentence gives away, and 200 steps of a 2-layer model learn little of
# that: the held-out AUC ends about 0.56 (chance: 0.5). The same discriminator tells tokens replaced at random from the
# originals far better, with an AUC about 0.90 (the held-out lines' "on random replacements"): plausible replacements
# are what make ELECTRA's task hard, and what a longer run on real text learns to detect.

# %%
if model.objective.reported.detection:  # its discriminator detects replaced tokens (RTD)
    verdict = detection_view(rtd, tokenizer, example=0)
    show(verdict)
    rows = verdict.frame()
    show(rows[rows['replaced'] | rows['flagged']], 'p(replaced) of the replaced and the flagged tokens')

# %% [markdown]
# ## Loss curves
# The rows of `metrics.csv` (and, dashed, the held-out metrics of `eval_metrics.csv` when the run has them); the
# plot is saved beside them as `losses.png`.

# %%
from electra.tools.walkthrough import plot_losses

show(plot_losses(run_dir / 'metrics.csv', run_dir / 'losses.png'), f'loss curves: {run_dir / "losses.png"}')
