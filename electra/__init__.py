"""ELECTRA: pretraining text encoders as discriminators rather than generators (Clark et al., ICLR 2020), with fastai
and HF transformers, faithful to the official code (google-research/electra).

The public API, by concern (each name is imported on first use, so `import electra` is instant):

- configs: `PretrainConfig`, `FinetuneConfig`, `CompareConfig`, `load_config`
- the method: `mask_tokens`, `MaskingSettings`, `sample_tokens`, `ElectraGeneratorDiscriminator` (HF's
  `ElectraForMaskedLM` generator and `ElectraForPreTraining` discriminator, trained together),
  `build_pretraining_model`, `ElectraLoss`; its objectives (`OBJECTIVES`, a row each: docs/objectives.md) and their
  compute, `pretrain_step_flops`
- data: `resolve_corpus`, `build_corpus`, `drop_repeated_across` (several corpora), `held_out_split`,
  `pretraining_dataloader`, `train_tokenizer`, `load_tokenizer`
- training: `ElectraAdam`, `electra_opt_func`, `warmup_decay_sched`, `lr_at_step`, `init_distributed`
- pretraining: `pretraining_learner`, `train`, `export_pretrained`, `load_discriminator`, `load_init`; an Electric
  run's scores of text from its export (its energy, the run's p(replaced)): `electric_scores`, `ElectricScorer`,
  `ElectricScores`
- conversion: `convert_tf_checkpoint` (official TensorFlow checkpoints, no TensorFlow needed)
- fine-tuning: `ElectraClassifier`, `layer_lrs`, `optimizer_groups`, `finetuning_learner`, `load_pretrained`,
  `load_finetuned` (a run's inputs as it encoded them: `encode_texts`), `run_sweep` (its GLUE data from `resolve_data`); task kinds: `FinetuningTask` (what the sweep needs of one), `ClassificationTask`,
  `TaggingTask`, `QATask`, `read_task_file`
- experiments: `run_comparison` (objective variants at equal compute, `python -m electra.experiments.compare`)
"""
from __future__ import annotations

import importlib
import warnings

# fastai's layers.py scripts a few activations with torch.jit.script when it is imported, which torch 2.10+
# deprecates: a warning about fastai's code that a user of this library can do nothing about, in every process that
# imports it (the drivers, the fine-tuning workers, a notebook's kernel). Set here, before anything imports fastai.
warnings.filterwarnings('ignore', message='`torch.jit.script` is deprecated', category=FutureWarning)

from electra.config.version import __version__  # the one source: electra/config/version.py
from electra.config.errors import format_warning as _format_warning

# The library's RunWarnings shown as one `warning: ...` line in scripts and notebooks alike (Python's format names a
# line of the library and quotes its source); other warnings as they were.
warnings.formatwarning = _format_warning
from electra.config.registries import TASK_CATALOGUE as _TASK_CATALOGUE, filled_by as _filled_by

# The registries config defines for the jobs above it (docs/architecture.md), each filled by importing the job, which
# config does on first use by the name given here, on the floor above both: a FinetuneConfig checked from Python
# needs no `import electra.finetuning` first, and config names no job.
_filled_by(_TASK_CATALOGUE, 'electra.finetuning')  # every task kind, registered by the package's imports

# public name -> the module that defines it
_HOMES = {
    'PretrainConfig': 'electra.config.pretrain', 'FinetuneConfig': 'electra.config.finetune',
    'load_config': 'electra.config.cli', 'CompareConfig': 'electra.config.compare',
    'run_comparison': 'electra.experiments.compare',
    'mask_tokens': 'electra.objective.masking', 'MaskingSettings': 'electra.objective.masking',
    'sample_tokens': 'electra.objective.sampling',
    'ElectraGeneratorDiscriminator': 'electra.objective.model', 'build_pretraining_model': 'electra.objective.model',
    'ElectraLoss': 'electra.objective.loss', 'OBJECTIVES': 'electra.config.objectives',
    'pretrain_step_flops': 'electra.objective.flops',
    'resolve_corpus': 'electra.data.corpus', 'build_corpus': 'electra.data.cache',
    'drop_repeated_across': 'electra.data.cache',
    'held_out_split': 'electra.data.batches', 'pretraining_dataloader': 'electra.data.batches',
    'train_tokenizer': 'electra.data.tokenizer', 'load_tokenizer': 'electra.data.tokenizer',
    'ElectraAdam': 'electra.training.optim', 'electra_opt_func': 'electra.training.optim',
    'warmup_decay_sched': 'electra.training.schedule', 'lr_at_step': 'electra.training.schedule',
    'init_distributed': 'electra.training.distributed',
    'pretraining_learner': 'electra.pretraining.learner', 'train': 'electra.pretraining.learner',
    'export_pretrained': 'electra.pretrained.export', 'load_discriminator': 'electra.pretrained.export',
    'electric_scores': 'electra.pretrained.electric', 'ElectricScorer': 'electra.pretrained.electric',
    'ElectricScores': 'electra.pretrained.electric',
    'load_init': 'electra.pretraining.init_from', 'convert_tf_checkpoint': 'electra.convert.tf',
    'ElectraClassifier': 'electra.finetuning.classifier', 'layer_lrs': 'electra.finetuning.layerwise',
    'encode_texts': 'electra.finetuning.tasks.encoding',
    'optimizer_groups': 'electra.finetuning.layerwise', 'load_pretrained': 'electra.finetuning.loading',
    'load_finetuned': 'electra.finetuning.loading', 'finetuning_learner': 'electra.finetuning.learner',
    'run_sweep': 'electra.finetuning.sweep', 'resolve_data': 'electra.finetuning.sweep',
    'FinetuningTask': 'electra.finetuning.tasks.base',
    'ClassificationTask': 'electra.finetuning.tasks.classification', 'TaggingTask': 'electra.finetuning.tasks.tagging.task',
    'QATask': 'electra.finetuning.tasks.qa.task', 'read_task_file': 'electra.finetuning.tasks.files',
}
# names of release 0.2, kept for one release: old name -> the name now
_DEPRECATED = {'ElectraPretrainingModel': 'ElectraGeneratorDiscriminator'}
__all__ = ['__version__', *_HOMES]


def __getattr__(name: str):
    "Import a public name from its module on first use (PEP 562); the package itself imports nothing heavy."
    if name in _DEPRECATED:
        warnings.warn(f'electra.{name} is deprecated: use electra.{_DEPRECATED[name]}, the same class',
                      DeprecationWarning, stacklevel=2)
        return __getattr__(_DEPRECATED[name])
    if name not in _HOMES: raise AttributeError(f"module 'electra' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
