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
# exported from notebooks/Finetune_GLUE.ipynb by `python -m electra.tools.notebooks export` (edit the notebook, not this file): sha256 e549bfd0a58ab208fc0796bc20c037a7c88087eba0bbe3209044b16ad59932b8

# %% [markdown]
# # Fine-tuning ELECTRA on GLUE
#
# This walkthrough takes a pretrained ELECTRA discriminator, fine-tunes it on every GLUE task several times with
# different seeds, summarises the dev scores, and writes the test predictions of the chosen runs in the format the
# GLUE site accepts. It follows the official fine-tuning (google-research/electra): the [CLS] vector goes through
# dropout and one linear layer; Adam without bias correction; warm-up and linear decay applied together;
# layer-wise learning-rate decay; training pairs of MRPC and STS-B in both orders.
#
# The same sweep runs every other kind of task, given as a task file (YAML) in `tasks`: your own classification,
# regression or multi-label data, token tagging (NER) with entity F1, and extractive QA (SQuAD 1.1/2.0, MRQA) with
# the official windows, head and evaluation; the presets `demo_tasks`, `demo_tagging` and `demo_squad` run each
# kind on the project's own demo data (see the README).
#
# Run it as a script (`python finetune.py --config small --model google/electra-small-discriminator`) or as the
# notebook `notebooks/Finetune_GLUE.ipynb`. `python finetune.py --help` lists every setting. This script is exported
# from the notebook (`python -m electra.tools.notebooks export`): edit the notebook, not the script.

# %%
import os
import sys

if 'ipykernel' in sys.modules and not os.path.isdir('electra') and os.path.isdir(os.path.join('..', 'electra')):
    os.chdir('..')  # Jupyter starts the kernel in notebooks/; the job runs from the repository root, as the script does

# %%
from electra.config.cli import load_config
from electra.config.finetune import FinetuneConfig
from electra.config.values import config_to_dict
from electra.runtime.errors import friendly_errors
from electra.runtime.processes import cli_args, end_with_parent

friendly_errors()  # a bad setting or input file ends the script with one `error: ...` line and status 2
end_with_parent()  # a job the comparison command or torchrun started ends when they do, kill -9 included

from electra.finetuning.loading import load_pretrained, model_description
from electra.finetuning.sweep import (data_description, raise_if_diverged, resolve_data, run_sweep, write_summary,
                                     write_test_predictions)
from electra.training.device import resolve_device, use_cpu_threads
from electra.training.distributed import finish_distributed, init_distributed, main_process_first, print_main

# %% [markdown]
# ## 1. Settings
#
# Defaults come from `FinetuneConfig`, then the preset (`configs/finetune/demo.yaml` unless `--config` names another
# preset or a YAML file), then `--key value` flags. In the notebook, put changes in `overrides` (the cell tagged
# `parameters`).
# The presets `small`, `base` and `large` hold the paper's learning rate and layer decay for each model size;
# `task_overrides` gives RTE and STS-B their 10 epochs.

# %% tags=["parameters"]
overrides = {}  # in the notebook: e.g. {'tasks': ['SST-2', 'MRPC'], 'runs': 3}

# %%
from electra.training.trackers import check_trackers

cfg = load_config(FinetuneConfig, cli_args(), preset_dir='configs/finetune', default_preset='demo',
                  prog='finetune.py', overrides=overrides)
check_trackers(cfg.logger)  # each tracker's package installed, MLflow's store (a server, a local store) answering
procs = init_distributed(resolve_device(cfg.device), cfg.dist_timeout)  # under torchrun: this process's rank
print_main('\n'.join(f'{k}: {v}' for k, v in config_to_dict(cfg).items()))
print_main(f'this process: {use_cpu_threads(cfg.threads)}')  # auto: the cores other processes leave free

# %% [markdown]
# ## 2. Data and pretrained model
#
# `data` is the HF hub (`nyu-mll/glue`), `demo` (small synthetic tasks in the GLUE layout, written by the project),
# or a local directory: TSV files as the GLUE download script lays them out, or saved copies of the hub dataset.
# Tasks given as task files read their own files.
# The model is a `.pth` checkpoint of `pretrain.py`, an exported directory, or a hub name; only its
# discriminator's body is used, under a new output layer per run.

# %%
with main_process_first('the demo tasks', cfg.dist_timeout):  # written once, by the main process
    source = resolve_data(cfg.data, cfg.cache_dir)
pretrained, tokenizer = load_pretrained(cfg.model)
print_main(f'task data: {data_description(cfg, source)}')
print_main(f'model: {model_description(cfg.model, pretrained, tokenizer)}')  # a .pth: the step its pretraining was at

# %% [markdown]
# ## 3. Fine-tune: `runs` runs per task
#
# Each task's examples are tokenized once (and cached on disk). Every finished run writes its weights to
# `<output_dir>/<group>/<task>_<i>.pth` and its dev metrics to `results.csv` straight away, so an interrupted sweep
# picks up where it stopped when run again.
#
# On a machine with several GPUs the runs are spread over them: `parallel_runs` worker processes (by default one per
# visible GPU; more than one per GPU for small models) take the runs from a shared queue, and the results table is the
# one a single process writes. Under `torchrun` instead, every run is trained by all the job's processes together
# (data-parallel, `batch_size` the global batch): for one large run, such as MNLI with a large model.

# %%
results = run_sweep(cfg, pretrained, tokenizer, source)
finish_distributed()  # in a torchrun job the other processes end here: what follows is the main process's

# %% [markdown]
# ## 4. Summary of the dev scores
#
# Mean, median, standard deviation and best run per task, and the paper's GLUE score (the mean over the eight tasks
# other than WNLI of Spearman for STS-B, MCC for CoLA and accuracy for the rest). Saved as `summary.md` and
# `summary.png` next to the results table.

# %%
print(write_summary(cfg, results))

# %% [markdown]
# Every run of this sweep (the rows of `results.csv`), and the plot of the dev scores per task:

# %%
from pathlib import Path

from electra.tools.walkthrough import runs_table, show, show_image

summary_png = Path(cfg.output_dir) / cfg.group / 'summary.png'
show(runs_table(cfg, results), 'every run: dev score and metrics')
if summary_png.is_file(): show_image(summary_png)

# %% [markdown]
# ## 5. Test predictions
#
# The best dev run of each task (or the median run, `--select median`; or the averaged logits of the top
# `ensemble_k` runs) predicts the test sets; AX is predicted with the MNLI model. The files and
# `glue_submission.zip` go to `<test_output_dir>/<group>/`, beside each other kind's own files: `id<TAB>prediction`
# for a task from files, the input's format with a predicted-tag column for tagging, the official `predictions.json`
# (and `null_odds.json`) for QA.

# %%
if cfg.predict:
    files = write_test_predictions(cfg, results, tokenizer, source)
    print('\n'.join(str(f) for f in files))

# %% [markdown]
# A run whose loss became NaN or infinite stopped there (at the end of that epoch) with no score: it is not in the
# results table, the summary names it, and no prediction comes from it. The other runs went on and are kept; the job
# ends here with an error naming the diverged runs (status 2), and the same command tries them again.

# %%
raise_if_diverged(results)
