# ---
# jupyter:
#   jupytext:
#     formats: notebooks//ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Pretraining ELECTRA
# A small generator fills in masked tokens; a discriminator learns to tell which tokens were replaced
# (replaced-token detection, Clark et al. 2020). Both train together; afterwards the discriminator is the model
# to fine-tune. Run as a script, this takes its config from the command line (`python pretrain.py --help`);
# in Jupyter, edit `overrides` in the next cell.

# %%
from electra.config import cli_args, config_to_dict, friendly_errors, load_config
from electra.pretrain_config import PretrainConfig

friendly_errors()
overrides = {}  # in a notebook: e.g. {'config': 'demo', 'steps': 200}
cfg = load_config(PretrainConfig, cli_args(), preset_dir='configs/pretrain', default_preset='demo',
                  prog='pretrain.py', overrides=overrides)
cfg

# %% [markdown]
# ## Run directory, device, and where we start
# Checkpoints `<run_name>_<seed>_<percent>.pth` go to `output_dir`; the run's tokenizer, metrics and exported
# models go to `output_dir/<run_name>_<seed>/`. With `--resume` the run continues from its latest checkpoint.

# %%
import torch

from electra.checkpoint import check_resume_compatible, load_checkpoint
from electra.pretraining import existing_run_guard, prepare_run_dir, resolve_device, resolve_precision

run_dir = prepare_run_dir(cfg)
device = resolve_device(cfg.device)
precision = resolve_precision(cfg.precision, device)
resume_path = existing_run_guard(cfg)
ckpt = load_checkpoint(resume_path) if resume_path else None
start_step = ckpt['step'] if ckpt else 0
print(f'run {run_dir} on {device} ({precision}), starting at step {start_step} of {cfg.steps}')

# %% [markdown]
# ## Corpus and tokenizer
# The corpus is in the official layout: one sentence per line, a blank line between documents. Without a
# `--tokenizer`, a WordPiece vocabulary is trained on the corpus and saved with the run.

# %%
from pathlib import Path

from electra.data import corpus_files
from electra.tokenizer import get_tokenizer, tokenizer_state

files = corpus_files(cfg.corpus, Path(cfg.cache_dir))
tokenizer = get_tokenizer(cfg.tokenizer, files, cfg.vocab_size, cfg.lowercase, run_dir)
tok_state = tokenizer_state(tokenizer)
if ckpt: check_resume_compatible(ckpt, config_to_dict(cfg), tok_state, resume_path)
print(f'{len(files)} corpus file(s), vocabulary of {len(tokenizer)}')

# %% [markdown]
# ## Examples
# The official example builder packs consecutive sentences of a document into `[CLS] A [SEP] B [SEP]` examples
# of up to `max_length` tokens (10% single-segment, 5% shorter); built once and cached as Arrow.

# %%
from electra.data import build_pretraining_dataset, pretraining_dataloader

dataset = build_pretraining_dataset(files, tokenizer, cfg.max_length, Path(cfg.cache_dir), cfg.seed)
train_dl = pretraining_dataloader(dataset, cfg.batch_size, cfg.max_length, tokenizer.pad_token_id, cfg.seed,
                                  cfg.steps, start_step, cfg.num_workers)
print(f'{len(dataset)} examples; {len(train_dl)} steps to run')

# %% [markdown]
# ## Generator and discriminator
# HF `ElectraForMaskedLM` and `ElectraForPreTraining`, sharing one embedding module; the generator's output
# projection is the word-embedding matrix.

# %%
from electra.model import build_pretraining_model

torch.manual_seed(cfg.seed)
model = build_pretraining_model(cfg, len(tokenizer), tokenizer.pad_token_id)
n_disc = sum(p.numel() for p in model.discriminator.parameters())
n_all = sum(p.numel() for p in model.parameters())
print(f'discriminator {n_disc / 1e6:.2f}M parameters, generator + discriminator {n_all / 1e6:.2f}M')

# %% [markdown]
# ## The Learner
# Masking happens on the device in a callback; the loss is `1 * generator MLM + 50 * discriminator BCE`; Adam
# without bias correction, warm-up and linear decay applied together, clipping at 1.0.

# %%
from electra.pretraining import build_learner, checkpoint_extra, restore_training_state, save_run_config

learn = build_learner(cfg, model, tokenizer, train_dl, run_dir, device, precision, start_step,
                      extra_state=checkpoint_extra(cfg, tok_state))
if ckpt: restore_training_state(learn, ckpt)
save_run_config(cfg, run_dir)

# %% [markdown]
# ## Train
# Metrics go to `metrics.csv` in the run directory every `log_every` steps; checkpoints at 6.25, 12.5, 25, 50
# and 100% of the steps.

# %%
if start_step < cfg.steps:
    learn.fit(1)

# %% [markdown]
# ## Export
# The discriminator (the model to fine-tune) and the generator, each loadable with `from_pretrained`.

# %%
from electra.export import export_pretrained

exported = export_pretrained(model, tokenizer, run_dir)
for name, path in exported.items(): print(f'{name}: {path}')
