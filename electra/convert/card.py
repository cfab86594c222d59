"""The model card (`README.md`) of each folder a conversion writes (`discriminator/`, `generator/`, an Electric
checkpoint's `cloze/`): the official checkpoint it came from, its config, what its head gives (an Electric
discriminator's: the energy alone) and what the conversion checked, from the conversion's report (`conversion.json`,
`electra.convert.tf`) and the folder's config file."""
from __future__ import annotations

import json
import re
from pathlib import Path

from huggingface_hub import ModelCardData

from electra.config.objectives import OBJECTIVES
from electra.pretrained.card import (
    CLOZE_USAGE,
    LICENSE,
    LICENSE_NOTE,
    details,
    electric_head,
    scores_usage,
    write_card,
    yaml_block,
)

__all__ = ['write_conversion_card']

_ROLES = {'discriminator': ('ElectraForPreTraining', 'AutoModelForPreTraining', 'feature-extraction',
                            'the model to fine-tune (replaced-token detection)'),
          'generator': ('ElectraForMaskedLM', 'AutoModelForMaskedLM', 'fill-mask',
                        'the small masked language model trained beside the discriminator'),
          'cloze': ('TwoTowerClozeGenerator', None, 'fill-mask',
                    "Electric's two-tower cloze model, whose log q(x_t | context) of each token is a term of the "
                    "discriminator's score")}
# the config file of each folder (the cloze model has no transformers class, so no config.json)
_CONFIGS = {'discriminator': 'config.json', 'generator': 'config.json', 'cloze': 'cloze_config.json'}


def _step(source: str) -> str:
    "The training step in an official checkpoint's name (`model.ckpt-1000000` -> 'step 1000000'), or ''."
    m = re.search(r'\.ckpt-(\d+)$', source)
    return f', step {m[1]}' if m else ''


def _length(report: dict) -> str:
    "The length it was pretrained at, from the run's hparams (fine-tuning past it warns), or that it is unknown."
    n = report['pretraining_max_length']
    if n is None: return ("Pretraining length unknown (no hparams): fine-tuning cannot say when max_length passes it "
                          "(the released models were pretrained at 128 tokens, configure_pretraining.py).")
    return (f"It was pretrained at max_seq_length {n} tokens (`pretraining_max_length` in its config): position rows "
            f"past it were never trained, and fine-tuning past it warns.")


def _checks(report: dict, role: str) -> str:
    "What the conversion verified, in words, with the tensors compared after saving."
    compared = [c.split(': ', 1)[1] for c in report['checked'] if c.startswith(f'{role}: ')]
    crc = ('CRC-32C of every tensor verified against the checkpoint while reading it' if report['crc32c_verified']
           else 'CRC-32C checks skipped (`--no-verify`)')
    return '\n'.join([
        f"- {len(report['mapped'])} variables mapped and {len(report['skipped'])} skipped (optimizer slots, training "
        "bookkeeping and what has no transformers counterpart), each listed with its reason in `conversion.json`; a "
        "variable that fits nothing, or a shape that does not fit, stops the conversion;",
        f'- {crc};',
        f"- after saving, this folder read back with `{'load_cloze' if role == 'cloze' else 'from_pretrained'}` and "
        "these tensors compared with the checkpoint's, "
        'exactly:', *(f'  - `{c}`' for c in compared)])


def _usage(folder: Path, role: str, report: dict) -> str:
    "How to load the network of `folder` (and an Electric conversion's scores of a text, with the library)."
    auto = _ROLES[role][1]
    if role == 'cloze': return '\n'.join(['## How to use', '', CLOZE_USAGE, '', *scores_usage(folder)])
    text = (f"## How to use\n\n```python\nfrom transformers import {auto}, AutoTokenizer\n\n"
            f"model = {auto}.from_pretrained('{folder.name}')  # this folder\ntokenizer = AutoTokenizer.from_pretrained("
            f"'{folder.name}')\n```\n\nTo fine-tune it: `electra-finetune --model PATH`.")
    if role == 'discriminator' and report.get('mask_prob') is not None:
        text += "\n\nThe run's scores of a text (the head's logit is the energy alone):\n\n" + '\n'.join(scores_usage(folder))
    return text


def _head(role: str, report: dict) -> list[str]:
    "An Electric discriminator's section on what its head gives (`electric_head`); none for another network."
    if role != 'discriminator' or report.get('mask_prob') is None: return []
    source = f"the run's, from --hparams {report['hparams']}" if report['hparams'] else 'the official default'
    constant = f"mask_prob {report['mask_prob']} ({source})"
    return [f"## What the exported head gives\n\nAn Electric checkpoint's (noise-contrastive estimation, not "
            f"replaced-token detection): `ElectraForPreTraining.from_pretrained(path)(**inputs).logits` "
            f"{electric_head(constant)}"]


def write_conversion_card(folder: str | Path, role: str, report: dict) -> Path:
    "Write `folder/README.md` for the `role` network of the conversion described by `report`; returns its path."
    folder = Path(folder)
    cls, auto, pipeline_tag, what = _ROLES[role]
    if _head(role, report): what = 'the model to fine-tune'  # Electric's: what its head gives has a section
    config = json.loads((folder / _CONFIGS[role]).read_text(encoding='utf-8'))
    data = ModelCardData(license=LICENSE, library_name='transformers' if auto else None, pipeline_tag=pipeline_tag,
                         tags=['electra', role, 'converted'], model_name=f'{Path(report["source"]).parent.name} {role}')
    name = 'cloze model' if role == 'cloze' else role
    body = '\n\n'.join([
        f"# ELECTRA {name}, converted from an official TensorFlow checkpoint",
        f"The {name} of the official ELECTRA checkpoint `{report['source']}`{_step(report['source'])} (google-research/"
        f"electra), {what}, as {'transformers' if auto else 'the electra library'}' `{cls}`, converted without TensorFlow by `electra-convert tf` "
        f"(`python -m electra.convert tf`). Vocabulary: `{report['vocab']}` (lower-cased: {report['do_lower_case']}); "
        f"attention heads from {report['heads_from']}; generator: {report['generator']}. {_length(report)}",
        *_head(role, report),
        f"## Config\n\nThe sizes read from the checkpoint's tensors:\n\n{yaml_block(report['sizes'][role])}\n\n"
        f"{details(yaml_block(config), _CONFIGS[role])}",
        f"## How it was checked\n\n{_checks(report, role)}",
        _usage(folder, role, report),
        LICENSE_NOTE])
    # an Electric checkpoint (its mask_prob read) cites Electric's paper beside ELECTRA's
    objective = OBJECTIVES['electric'] if report.get('mask_prob') is not None else None
    return write_card(folder, data, body, _CONFIGS[role], objective)
