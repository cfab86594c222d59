"""Model cards: the `README.md` that transformers' convention puts beside a model's files, a YAML metadata block
(read by the Hugging Face Hub; written by `huggingface_hub.ModelCardData`, whose `eval_results` make the
`model-index`) and then markdown: what the model is, the settings and data that made it, how well it does, how to load
it, the paper to cite.

`write_pretrained_card` describes a network exported by a pretraining run (`discriminator/`, `generator/`, Electric's
`cloze/`) and what its exported head gives for the run's objective, from the
run's files beside it (`config.yaml`, `metrics.csv`, `eval_metrics.csv`, as `pretraining/learner.py` names them);
fine-tuning describes its runs with `write_card` (`electra.finetuning.card`). Both write on the main process alone,
atomically, as every other file of an export."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import yaml
from huggingface_hub import EvalResult, ModelCardData
from torch import nn

from electra.config.objectives import LEARNT_NOTHING, OBJECTIVES, Objective
from electra.config.pretrain import PretrainConfig
from electra.config.version import __version__
from electra.runtime.files import atomic_write_text
from electra.runtime.processes import is_main_process

__all__ = ['CARD', 'CITATION', 'LICENSE', 'LICENSE_NOTE', 'card_text', 'write_card', 'last_row', 'yaml_block',
           'details', 'hub_datasets', 'write_pretrained_card', 'electric_head', 'scores_usage', 'CLOZE_USAGE']

CARD = 'README.md'  # the name transformers and the Hub give a model's card
CITATION = """\
@inproceedings{clark2020electra,
  title     = {{ELECTRA}: Pre-training Text Encoders as Discriminators Rather Than Generators},
  author    = {Kevin Clark and Minh-Thang Luong and Quoc V. Le and Christopher D. Manning},
  booktitle = {International Conference on Learning Representations},
  year      = {2020},
  url       = {https://openreview.net/forum?id=r1xMH1BtvB}
}"""
# the library's license (LICENSE, as the official code's, google-research/electra), which its models are shared under
LICENSE = 'apache-2.0'
LICENSE_NOTE = ("The license is Apache-2.0, the library's and the official ELECTRA code's; the terms of the data the "
                "model was trained on apply as well, so check them before you share it.")
_CORPUS_LANGUAGE = {'demo': 'en'}  # corpora whose language is known: the project's own generated English text

# the held-out metrics of each network (eval_metrics.csv): column -> (model-index metric type, its name)
_HELD_OUT = {
    'discriminator': {'disc_auc': ('roc_auc', 'AUC of replaced-token detection'),
                      'uniform_auc': ('roc_auc', 'AUC on random replacements'),
                      'disc_accuracy': ('accuracy', 'accuracy of replaced-token detection'),
                      'disc_loss': ('loss', 'discriminator loss')},
    'generator': {'gen_accuracy': ('accuracy', 'accuracy at the masked positions'),
                  'gen_loss': ('loss', 'generator MLM loss')},
    'cloze': {'gen_accuracy': ('accuracy', 'accuracy at the masked positions'),
              'gen_loss': ('loss', 'cloze loss at every token masking may choose')},
}
# Electric's discriminator (Objective.noise_log_prob): its accuracy, loss and AUC are of the corrected logit (energy +
# log q + log(k / (1 - k))) against the masked positions (noise); the probe on uniform replacements reads the energy alone
_HELD_OUT_NOISE = {'disc_auc': ('roc_auc', "AUC of noise detection (the run's logit)"),
                   'uniform_auc': ('roc_auc', 'AUC of the energy alone on random replacements'),
                   'disc_accuracy': ('accuracy', 'accuracy of noise detection'),
                   'disc_loss': ('loss', 'discriminator loss')}
# a discriminator whose loss head predicts tokens (Objective.mlm): its accuracy and loss are of those predictions
# (objective/loss.py `batch_statistics`), its replaced-token-detection AUCs undefined
_HELD_OUT_MLM = {'disc_accuracy': ('accuracy', "accuracy of the discriminator's token predictions"),
                 'disc_loss': ('loss', 'discriminator token-prediction loss')}
# what each network is, for transformers' Auto classes and the Hub
_ROLES = {
    'discriminator': dict(auto='AutoModelForPreTraining', pipeline_tag='feature-extraction',
                          task=('token-classification', 'Replaced token detection')),
    'generator': dict(auto='AutoModelForMaskedLM', pipeline_tag='fill-mask',
                      task=('fill-mask', 'Masked language modelling')),
    'cloze': dict(auto=None, pipeline_tag='fill-mask', task=('fill-mask', 'Cloze (each token from its context)'),
                  name='cloze model', config='cloze_config.json'),
}
# what the discriminator learnt and what its exported replaced-token-detection head (`discriminator_predictions`) is,
# by its objective's loss head (config/objectives.py HEADS): the 'mlm' head leaves that head out of the loss (no
# gradient: objective/model.py), and the MLM heads are not part of an ElectraForPreTraining, so only the .pth has them
_DISC_HEADS = {
    'rtd': 'it learnt to tell {fake} from the original ones ({task}) with the replaced-token-detection head '
           '(`discriminator_predictions`) exported here',
    'mlm': "it learnt to predict the original tokens at the masked positions with an MLM head that only the run's "
           'checkpoints (`.pth`) hold; the replaced-token-detection head exported here (`discriminator_predictions`) '
           'had no part in its loss: it is {rtd_head}',
    'copy': "it learnt every token's identity through a copy gate, D x [the input token] + (1 - D) x an MLM head's "
            'prediction, D the sigmoid of the replaced-token-detection head exported here '
            "(`discriminator_predictions`); that MLM head only the run's checkpoints (`.pth`) hold",
}
# which tokens the discriminator learnt as fake (Objective.fake) and the name of that task
_FAKE = {'replaced': ('the tokens its generator replaced', 'replaced-token detection'),
         'masked': ('the tokens its generator sampled at the masked positions', 'noise-contrastive estimation')}


_CLOZE = ("Electric's two-tower cloze model, trained with the discriminator: two transformers over the unmasked text, "
          'one reading left to right and one right to left, whose outputs on either side of a token give q(x_t | '
          'context), the probability of every token there; its samples at the masked positions were the noise the '
          "discriminator learnt to tell apart, and its log q of each token is a term of the discriminator's score")


def _generator_kind(cfg: dict) -> str:
    "The generator by its run's config: its size against the discriminator's, and how it was trained (`two_stage`)."
    size = ("a masked language model of the discriminator's size" if
            (cfg.get('generator_size') or PretrainConfig.generator_size) >= 1 else 'a small masked language model')
    if not cfg.get('two_stage'): return f'{size} trained with the discriminator'
    return (f"{size} trained alone for the first {cfg['two_stage']:.0%} of the steps, then frozen while the "
            'discriminator trained on its samples')


def _what(role: str, objective: Objective | None, cfg: dict) -> str:
    """What the network of `role` is, by the run's `objective` row (None: not known) and its config (`cfg`: the
    weights it started from, `init_from`; the generator's size and training)."""
    if role == 'cloze': return _CLOZE
    if role == 'generator':
        read = ("filled the masked positions of the discriminator's input, where it learnt to predict the original "
                'tokens' if objective and objective.mlm else 'were the replacements the discriminator learnt to detect')
        return f'{_generator_kind(cfg)}, whose samples {read}'
    init_from = cfg.get('init_from') or ''
    if objective is None: return 'the model to fine-tune (the objective it was trained with was not found)'
    fake, task = _FAKE[objective.fake]
    rtd_head = (f'carried over unchanged from {init_from}, the weights the run started from' if init_from else
                'untrained (as initialised)')
    return 'the model to fine-tune: ' + _DISC_HEADS[objective.head].format(fake=fake, task=task, rtd_head=rtd_head)


def card_text(data: ModelCardData, body: str, config: str = 'config.json', objective: Objective | None = None) -> str:
    """A card: the metadata block (with `electra_version`, the library that wrote it), `body` (markdown), the line
    naming the library's version (also in the folder's `config` file), the citation (and the paper of `objective`,
    a variant's, where it has one)."""
    data.electra_version = __version__
    variant = (f'\n\nThe objective `{objective.name}` is from {objective.paper}.'
               if objective is not None and objective.paper else '')
    return (f'---\n{data.to_yaml()}\n---\n\n{body.rstrip()}\n\nWritten by the electra library {__version__} '
            f'(`electra_version` in the metadata above and in `{config}`).\n\n## Citation\n\nThe method is ELECTRA '
            f'(Clark et al., ICLR 2020):\n\n```bibtex\n{CITATION}\n```{variant}\n')


def write_card(folder: str | Path, data: ModelCardData, body: str, config: str = 'config.json',
               objective: Objective | None = None) -> Path:
    "Write the card of `folder` (`folder/README.md`), on the main process, atomically; returns its path."
    path = Path(folder) / CARD
    if is_main_process(): atomic_write_text(card_text(data, body, config, objective), path)
    return path


def last_row(path: Path) -> dict[str, str]:
    "The last row of the CSV file at `path` (column -> text as written); {} when there is none."
    try:
        with open(path, newline='', encoding='utf-8') as f: rows = list(csv.DictReader(f))
    except OSError: return {}
    return rows[-1] if rows else {}


def yaml_block(data: dict) -> str:
    "`data` as a fenced YAML block, in its own order."
    return f"```yaml\n{yaml.safe_dump(data, sort_keys=False).rstrip()}\n```"


def details(text: str, summary: str = 'the whole config') -> str:
    "`text` folded away under `summary` (the Hub and GitHub render it closed)."
    return f'<details>\n<summary>{summary}</summary>\n\n{text}\n\n</details>'


def hub_datasets(entries: list[str]) -> list[str]:
    "The hub datasets among corpus entries (`hub:<name>[:<config>]` -> `<name>`), for the card's `datasets`."
    return [e.split(':')[1] for e in entries if e.startswith('hub:') and len(e.split(':')) > 1]


def _held_out_columns(role: str, objective: Objective | None) -> tuple[tuple[str, str], dict]:
    "The model-index task of `role` and its eval_metrics.csv columns -> (metric type, name), by its objective's head."
    if role == 'discriminator' and objective and objective.mlm:
        return ('fill-mask', 'Masked language modelling'), _HELD_OUT_MLM
    if role == 'discriminator' and objective and objective.noise_log_prob:
        return ('token-classification', 'Noise-contrastive estimation'), _HELD_OUT_NOISE
    return _ROLES[role]['task'], _HELD_OUT[role]


def _held_out(role: str, row: dict[str, str], corpus: str, objective: Objective | None) -> list[EvalResult]:
    "The model-index results of `role` on the held-out examples (`row` of eval_metrics.csv); undefined ones left out."
    (task_type, task_name), columns = _held_out_columns(role, objective)
    results = []
    for column, (metric, name) in columns.items():
        value = float(row.get(column) or 'nan')
        if math.isnan(value): continue
        results.append(EvalResult(task_type=task_type, task_name=task_name, dataset_type=corpus,
                                  dataset_name=f'{corpus} (held-out examples)', dataset_split='held-out',
                                  metric_type=metric, metric_value=value, metric_name=name))
    return results


def _metrics_table(row: dict[str, str], columns: list[str]) -> str:
    "The `columns` of `row` as a one-row markdown table, each value as the file wrote it."
    shown = [c for c in columns if row.get(c) not in (None, '')]
    return '\n'.join([f"| {' | '.join(shown)} |", '|' + '---|' * len(shown),
                      f"| {' | '.join(row[c] for c in shown)} |"])


def _schedules_text(schedules: list[dict], cfg: dict) -> str:
    "The learning-rate schedules an extended run (`--resume` with more `steps` or another `lr`) trained under, in order."
    ends = [s['start'] for s in schedules[1:]] + [cfg.get('steps')]
    parts = [f"steps {s['start']} to {end} under a schedule of {s['steps']} steps (peak {s['lr']}, "
             f"{cfg.get('warmup_steps')} warm-up steps; "
             + ('it ran to the schedule\'s end)' if end == s['steps'] else f'followed from its step {s["start"]} to its step {end})')
             for s, end in zip(schedules, ends)]
    return ("### Schedules\n\nThe run was continued under other settings (`--resume` with another `steps` or `lr`), "
            "so its learning rate followed more than one schedule (`schedules.yaml`): " + ', then '.join(parts) + '.')


def _init_length(cfg: dict) -> str:
    "What a run continued from weights says of its position rows: trained up to the longer length, or not known."
    if not cfg.get('init_from'): return ''
    if not cfg.get('init_max_length'):  # a hub model without the field, a run's config of an earlier version
        return (" Those weights do not record the length they were pretrained at, so neither does its config: its "
                f"position rows past {cfg.get('max_length')} may have been trained by them.")
    if cfg['init_max_length'] <= (cfg.get('max_length') or 0): return ''
    return (f" Those weights were pretrained at {cfg['init_max_length']} tokens, so its position rows are trained up "
            f"to {cfg['init_max_length']} (`pretraining_max_length` in its config).")


def _run_section(cfg: dict, train_row: dict[str, str], eval_row: dict[str, str], role: str,
                 objective: Objective | None, schedules: list[dict] = ()) -> str:
    "How the run trained and how its network does: the settings in words, the last rows of its metrics files."
    if not cfg: return "## Training\n\nThe run's settings were not found beside this export (no `config.yaml`)."
    weights, init = cfg.get('corpus_weights') or [], cfg.get('init_from')
    corpus = ', '.join(f'{c} (weight {weights[k]:g})' if len(weights) == len(cfg.get('corpus', [])) else c
                       for k, c in enumerate(cfg.get('corpus', []))) or 'not recorded'
    tokenizer = cfg.get('tokenizer') or (f'that of {init}' if init else 'WordPiece trained on the corpus')
    text = [f"## Training\n\n{cfg.get('steps')} steps of {cfg.get('batch_size')} examples of up to "
            f"{cfg.get('max_length')} tokens, objective `{cfg.get('objective')}`, peak learning rate {cfg.get('lr')} "
            f"({cfg.get('warmup_steps')} warm-up steps), seed {cfg.get('seed')}. Corpus: {corpus}; tokenizer: "
            f"{tokenizer}{f'; continued from the weights of {init}' if init else ''}.{_init_length(cfg)}"]
    if len(schedules) > 1: text.append(_schedules_text(schedules, cfg))
    if eval_row:
        columns = _held_out_columns(role, objective)[1]
        shown = ['step', *columns, *(f'{c}_baseline' for c in ('gen_accuracy', 'disc_accuracy') if c in columns),
                 'examples']
        disc = LEARNT_NOTHING[objective.head if objective else 'rtd']  # (a config of an earlier version: ELECTRA's)
        text.append(f"### Held-out evaluation\n\nOn {eval_row.get('examples')} examples held out from training "
                    f"(`eval_metrics.csv`, its last row); a baseline is what always the most frequent token "
                    f"(generator) or {disc} (discriminator) scores.\n\n{_metrics_table(eval_row, shown)}")
    if train_row:
        columns = ['step', 'loss', 'gen_loss', 'disc_loss', 'gen_accuracy', 'disc_accuracy']
        text.append(f"### Last training metrics\n\nThe last row of `metrics.csv` (means since the row before):\n\n"
                    f"{_metrics_table(train_row, columns)}")
    text.append(f"### Settings\n\nThe run's `config.yaml` (`pretrain.py --config` takes it again):\n\n"
                f"{details(yaml_block(cfg))}")
    return '\n\n'.join(text)


def write_pretrained_card(folder: str | Path, role: str, net: nn.Module, run_dir: str | Path,
                          objective: Objective | None = None, tokenizer_note: str = '') -> Path:
    """Write the card of `net`, the `role` ('discriminator', 'generator' or Electric's 'cloze') of the pretraining run
    in `run_dir`, exported to `folder`: its metadata (with the held-out metrics as the model-index), what it is (by its
    `objective`'s row, else the one its config names) and what its exported head gives, how it was trained, its
    metrics, how to load it (and `tokenizer_note`, where its tokenizer does not encode as the run did:
    `save_exported_tokenizer`). Reads the run's `config.yaml`,
    `metrics.csv` and `eval_metrics.csv`, those that exist."""
    folder, run_dir, about = Path(folder), Path(run_dir), _ROLES[role]
    try: cfg = yaml.safe_load((run_dir / 'config.yaml').read_text(encoding='utf-8')) or {}
    except OSError: cfg = {}
    train_row, eval_row = last_row(run_dir / 'metrics.csv'), last_row(run_dir / 'eval_metrics.csv')
    try: schedules = yaml.safe_load((run_dir / 'schedules.yaml').read_text(encoding='utf-8')) or []
    except OSError: schedules = []
    corpus, objective = cfg.get('corpus', []), objective or OBJECTIVES.get(cfg.get('objective'))
    languages = {_CORPUS_LANGUAGE.get(c) for c in corpus}
    data = ModelCardData(
        language=languages.pop() if len(languages) == 1 and None not in languages else None, license=LICENSE,
        library_name='transformers' if about['auto'] else None, pipeline_tag=about['pipeline_tag'],
        datasets=hub_datasets(corpus) or None,
        tags=['electra', role, f"objective-{cfg.get('objective', 'unknown')}"], model_name=f'{run_dir.name} {role}',
        eval_results=_held_out(role, eval_row, ', '.join(corpus) or 'corpus', objective) or None)
    c, what = net.config, _what(role, objective, cfg)
    note = f'{tokenizer_note}\n\n' if tokenizer_note else ''
    head = f'{_head_section(objective, cfg)}\n\n' if role == 'discriminator' and objective else ''
    name = about.get('name', role)
    body = (f"# ELECTRA {name}: {run_dir.name}\n\nThe {name} of the ELECTRA pretraining run `{run_dir.name}` (Clark "
            f"et al. 2020), {what}. {type(net).__name__}: {'two towers, each of ' * (role == 'cloze')}"
            f"{c.num_hidden_layers} layers, hidden size {c.hidden_size}, {c.num_attention_heads} attention heads, "
            f"feed-forward {c.intermediate_size}, embeddings {c.embedding_size}, a vocabulary of {c.vocab_size} tokens, "
            f"{sum(p.numel() for p in net.parameters()) / 1e6:.2f}M parameters.\n\n{head}"
            f"{_run_section(cfg, train_row, eval_row, role, objective, schedules)}\n\n"
            f"{_usage(folder, role, objective)}\n\n{note}{LICENSE_NOTE}")
    return write_card(folder, data, body, about.get('config', 'config.json'), objective)


def electric_head(mask_prob: str) -> str:
    """What an Electric discriminator's exported head gives (its energy) and how its run's p(replaced) is had (with
    the cloze model beside it in `cloze/`): the clause after "the head's logits", `mask_prob` the constant in words."""
    return ("is Electric's energy E(x)_t of each token (low where the token is likely in its context: exp(-E) is the "
            "model's unnormalised p(x_t | context)), not the probability that a token was replaced: its sigmoid is no "
            "score of the run. The run's probability that a token is noise (a sample at a masked position) is "
            f"p(replaced) = sigmoid(E + log q(x_t | context) + log(mask_prob / (1 - mask_prob))), with {mask_prob} "
            '(also in `cloze/cloze_config.json`) and q the two-tower cloze model beside this folder in `cloze/` '
            '(google-research/electra run_pretraining.py `_get_discriminator_output`). `electra.electric_scores(path, '
            'texts)` computes the energy, log q, the logit and p(replaced) of every token from the two folders.')


def scores_usage(folder: Path) -> list[str]:
    "The lines of markdown that score a text with Electric's discriminator and cloze model beside `folder`, one of them."
    run = folder.parent.name
    return ['```python', 'import electra', '',
            f"scores = electra.electric_scores('{run}/discriminator', ['A text to score.'])  # reads {run}/cloze too",
            "scores[0].p_replaced  # per token: the run's probability that it is noise; also .energy, .log_q, .logits",
            '```']


CLOZE_USAGE = ('No transformers class holds the two towers: the folder holds `cloze.safetensors` and '
               '`cloze_config.json`, no `config.json`, and the electra library reads them back with the discriminator '
               'beside them:')


def _replacements(objective: Objective, cfg: dict) -> str:
    "Where the replacements a replaced-token detector learnt came from, by its row and the run's config."
    if cfg.get('uniform_generator'):
        return 'tokens drawn uniformly from the vocabulary (the uniform generator: no generator network)'
    if objective.generator == 'frozen':
        return (f"the frozen generator `{cfg.get('generator') or '(not recorded)'}`, an existing masked LM that the run "
                f"did not train and does not export, sampling at a temperature annealed from "
                f"{cfg.get('temperature_start')} to {cfg.get('temperature')}")
    return "the run's generator (exported beside this folder, `generator/`)"


def _head_section(objective: Objective, cfg: dict) -> str:
    """What the exported head (`discriminator_predictions`, `ElectraForPreTraining`'s `logits`) gives, by the run's
    objective row: the run's own score of each token, or what it is instead and where the run's score is."""
    lead = ('## What the exported head gives\n\n`ElectraForPreTraining.from_pretrained(path)(**inputs).logits`, a '
            'logit per token from the replaced-token-detection head (`discriminator_predictions`), ')
    init = cfg.get('init_from')
    if objective.head == 'mlm':
        kept = f'carried over unchanged from {init}' if init else 'untrained (as initialised)'
        return lead + (f"is no score of the run: that head had no part in its loss ({kept}); the run's token "
                       "predictions came from the MLM head that only its checkpoints (`.pth`) hold. Fine-tuning reads "
                       'the encoder alone.')
    if objective.head == 'copy':
        return lead + ("is the copy gate's: its sigmoid D is the weight the run gave to keeping the input token, "
                       'p(x) = D 1[x = input] + (1 - D) softmax(x), high where the discriminator takes the token for '
                       "original: the opposite sense of ELECTRA's p(replaced), and not the run's probability of the "
                       'input token either, which the MLM head (in the `.pth` only) shares.')
    if objective.noise_log_prob:
        k = cfg.get('mask_prob')
        return lead + electric_head(f'mask_prob {k}' if k else "the run's mask_prob")
    where = ('the masked positions only: its loss saw no other token, so its sigmoid is the probability that a token '
             'was replaced given that it was masked, and at a token that was not (every token of an unaltered text) it '
             'answers what it was never trained on' if objective.positions == 'chosen' else
             'every real token ([CLS] and [SEP] included)')
    return lead + (f"is the run's replaced-token detection: its sigmoid is the probability that a token was replaced by "
                   f'{_replacements(objective, cfg)}, as the run scored {where}.')


def _usage(folder: Path, role: str, objective: Objective | None) -> str:
    """How to load the network of `folder` with transformers' Auto classes (and fine-tune the discriminator), and an
    Electric run's scores with the library (the cloze model has no transformers class)."""
    scores = scores_usage(folder)
    if role == 'cloze': return '\n'.join(['## How to use', '', CLOZE_USAGE, '', *scores])
    auto = _ROLES[role]['auto']
    lines = ['## How to use', '', '```python', f'from transformers import {auto}, AutoTokenizer', '',
             f"path = '{folder.parent.name}/{folder.name}'  # this folder, wherever it lies",
             f'model = {auto}.from_pretrained(path)',
             'tokenizer = AutoTokenizer.from_pretrained(path)']
    if role == 'generator':
        lines += ['', 'from transformers import pipeline', "fill = pipeline('fill-mask', model=path)"]
    lines.append('```')
    if role == 'discriminator':
        lines += ['', '`AutoModel` loads its encoder alone. To fine-tune it: `electra-finetune --model PATH` (or '
                      '`python finetune.py --model PATH` in a checkout of the library).']
    if role == 'discriminator' and objective and objective.exports_cloze:
        lines += ['', "The run's scores of a text (the head's logit is the energy alone):", '', *scores]
    return '\n'.join(lines)
