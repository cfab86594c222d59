"""Fine-tuned runs for transformers users: a run's `.pth` also written as a `save_pretrained` folder of transformers'
own class, `<output_dir>/<group>/<task>_<i>/` beside `<task>_<i>.pth`, with its tokenizer, a model card and the task's
label names as `id2label`/`label2id`, so that `pipeline(...)` prints them. Only where that class computes our logits:

- classification, regression, multi-label (`ElectraClassifier`): `ElectraForSequenceClassification`, whose head
  (`ElectraClassificationHead`) adds a dense layer and a GELU before its output layer; they are set so that the logits
  are ours (`_classification_head`), a regression's scores on the task's own scale, as `load_finetuned` gives them;
- tagging (`ElectraTagger`): `ElectraForTokenClassification`, the same dropout and linear layer on every token;
- QA (`ElectraQA`): none. The official head masks the question's positions, predicts the end given the start and the
  answerability from its own layers (`tasks/qa/heads.py`); `ElectraForQuestionAnswering` is one linear layer. Its runs
  stay `.pth` files, which name what they predict (`labels`), as the group's card does.

`config.save_pretrained` says which runs: those `select` and `ensemble_k` pick (the test predictions' runs), all, or
none. The folder of a run of the job's tasks no longer picked (another `select` or `ensemble_k` than an earlier job's)
or past its `runs` is removed, said in a line, so that the group's card, which lists the folders on disk, lists
exactly the runs picked now. A folder is written whole or not at all (a temporary folder renamed); a run trained again loses its folder when
its new weights are saved (`runs.transformers_folder`), so that no folder outlives the weights it was made from."""
from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path
from typing import Callable

import torch
from huggingface_hub import ModelCardData
from torch import nn
from transformers import ElectraConfig, ElectraForSequenceClassification, ElectraForTokenClassification

from electra.config.finetune import FinetuneConfig
from electra.data.tokenizer import save_exported_tokenizer
from electra.finetuning.loading import finetuned_model, read_run
from electra.finetuning.results import ResultsTable, select_runs
from electra.finetuning.runs import group_dir, transformers_folder
from electra.pretrained.card import LICENSE, LICENSE_NOTE, details, write_card, yaml_block
from electra.pretrained.export import save_model, with_model_length
from electra.runtime.files import path_inside
from electra.runtime.processes import is_main_process

__all__ = ['TRANSFORMERS_CLASSES', 'to_transformers', 'pipeline_entities', 'save_run', 'save_runs']

# the transformers class of each task kind whose head it computes (module docstring); the pipeline that reads it
TRANSFORMERS_CLASSES = {'classification': (ElectraForSequenceClassification, 'text-classification'),
                        'tagging': (ElectraForTokenClassification, 'token-classification')}


def _problem_type(ckpt: dict) -> str:
    "transformers' name of what a classification head learnt: its loss, and the pipeline's softmax or sigmoid."
    if not ckpt['labels']: return 'regression'
    return 'multi_label_classification' if ckpt.get('multilabel') else 'single_label_classification'


def _config(ckpt: dict, cls: type) -> ElectraConfig:
    "The run's ELECTRA config with its labels by name (a regression's one output named `score`) and its head's dropout."
    names = ckpt['labels'] or ['score']
    extra = dict(id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)},
                 classifier_dropout=ckpt['head']['dropout'], architectures=[cls.__name__])
    if cls is ElectraForSequenceClassification: extra['problem_type'] = _problem_type(ckpt)
    return ElectraConfig.from_dict({**ckpt['electra_config'], **extra})


@torch.no_grad()
def _classification_head(head, ours: nn.Linear) -> None:
    """Set transformers' `ElectraClassificationHead` (out_proj(gelu(dense(h))), dropout aside) to compute our head,
    W h + b with W [C, H] (a run read back: a regression's on the task's scale). gelu(u) - gelu(-u) = u (Phi(u) +
    Phi(-u)) = u exactly, so dense = [W; -W; 0] [H, H] with no bias and out_proj = [I, -I, 0] [C, H] with bias b give
    W h + b, to float rounding. Needs 2C <= H."""
    w, b = ours.weight, ours.bias  # [C, H], [C]
    c, eye = w.shape[0], torch.eye(w.shape[0], dtype=w.dtype)
    head.dense.weight.zero_(), head.dense.bias.zero_(), head.out_proj.weight.zero_()
    head.dense.weight[:c], head.dense.weight[c:2 * c] = w, -w
    head.out_proj.weight[:, :c], head.out_proj.weight[:, c:2 * c] = eye, -eye
    head.out_proj.bias.copy_(b)


def to_transformers(ckpt: dict) -> tuple[nn.Module | None, str]:
    """The run of `ckpt` (`read_finetuned`) as its transformers class with our weights, or None and why not."""
    kind = ckpt.get('kind', 'classification')  # runs saved before the task kinds ('electra-glue') are classifiers
    if kind not in TRANSFORMERS_CLASSES: return None, f'its {kind} head has no transformers class that computes it'
    if 'labels' not in ckpt: return None, 'its checkpoint (of an earlier version) does not name its labels'
    cls, _ = TRANSFORMERS_CLASSES[kind]
    ours = finetuned_model(ckpt)
    config = _config(ckpt, cls)
    if cls is ElectraForSequenceClassification and 2 * ours.classifier.out_features > config.hidden_size:
        return None, (f'its {ours.classifier.out_features} outputs need a hidden size of at least twice as many in '
                      f"transformers' head (the model's is {config.hidden_size})")
    model = cls(config).eval()
    model.electra.load_state_dict(ours.electra.state_dict())
    if cls is ElectraForSequenceClassification:
        _classification_head(model.classifier, ours.classifier)
    else: model.classifier.load_state_dict(ours.classifier.state_dict())
    return model, ''


def run_length(tokenizer, config, max_length: int):
    """`tokenizer` cutting at the run's `max_length` (`model_max_length`), not the position table: the run never saw
    positions past it, so a longer input would give other logits than the run's."""
    tokenizer = with_model_length(tokenizer, config)
    tokenizer.model_max_length = min(tokenizer.model_max_length, max_length)
    return tokenizer


def _exact_recipe(name: str, ckpt: dict, tag: str) -> str:
    "The run's encoding in transformers' terms where the pipeline's differs: a long text pair's cut, a long sentence's windows."
    return _exact_pair_recipe(name, ckpt) if tag == 'text-classification' else _exact_tagging_recipe(name, ckpt)


def _exact_pair_recipe(name: str, ckpt: dict) -> str:
    """The run's encoding in transformers' terms, for a text pair longer than `max_length`: BERT's `_truncate_seq_pair`
    (google-research/electra, finetune/classification/classification_tasks.py), which drops the last token of the
    longer segment, of the second on a tie, one at a time. transformers' `longest_first` splits the tokens otherwise
    (69 + 69 at 64: 30 + 31, the run's 31 + 30), so it is spelt out here."""
    return (f"A text pair longer than the run's `max_length` ({ckpt['hparams']['max_length']} tokens, the tokenizer's "
            "`model_max_length`) is cut as the run cut it (BERT's `_truncate_seq_pair`, google-research/electra "
            "`finetune/classification/classification_tasks.py`: the last token of the longer segment, of the second "
            "on a tie, one at a time); transformers' `truncation='longest_first'` differs (it splits the tokens "
            "otherwise: 69 + 69 tokens at 64, the run keeps 31 + 30, transformers 30 + 31), so its logits can differ from the run's. "
            "So can a second text of no tokens but not empty (spaces, a tab, a zero-width space): the run reads it as "
            "none, `[CLS] A [SEP]`, as the official featurize does, where transformers' tokenizer adds an empty segment "
            "and a second `[SEP]`. These are the run's logits exactly:\n\n"
            "```python\nimport torch\nfrom transformers import AutoModelForSequenceClassification, AutoTokenizer\n\n"
            f"tok = AutoTokenizer.from_pretrained('{name}')\n"
            f"model = AutoModelForSequenceClassification.from_pretrained('{name}').eval()\n\n\n"
            "def logits(text, text_pair=None):\n"
            "    a = tok(text, add_special_tokens=False)['input_ids']\n"
            "    b = tok(text_pair, add_special_tokens=False)['input_ids'] if text_pair is not None else []\n"
            "    pair = len(b) > 0  # a second text of no tokens is none, as in the official featurize\n"
            "    while len(a) + len(b) > tok.model_max_length - (3 if pair else 2):\n"
            "        (a if len(a) > len(b) else b).pop()  # BERT's _truncate_seq_pair\n"
            "    second = [*b, tok.sep_token_id] if pair else []\n"
            "    ids = [tok.cls_token_id, *a, tok.sep_token_id, *second]\n"
            "    types = [0] * (len(a) + 2) + [1] * len(second)\n"
            "    with torch.no_grad():\n"
            "        return model(input_ids=torch.tensor([ids]), token_type_ids=torch.tensor([types])).logits\n```")


# the run's windows (`electra.finetuning.tasks.tagging.encoding`: `word_pieces`, `plan_windows`, `encode_tagging`) and
# its tags (`word_predictions`) in transformers' terms, for the tagging card
_TAGGING_RECIPE = """import torch
from transformers import AutoModelForTokenClassification, AutoTokenizer

tok = AutoTokenizer.from_pretrained('{name}')
model = AutoModelForTokenClassification.from_pretrained('{name}').eval()
BUDGET, STRIDE = tok.model_max_length - 2, {stride}  # pieces between [CLS] and [SEP]; context the windows share


def windows(counts):
    "(start, end, first scored, end of scored) words of each window, for words of counts[i] pieces."
    spans, start, n = [], 0, len(counts)
    while n:
        end, used = start, 0
        while end < n and used + counts[end] <= BUDGET:
            used += counts[end]
            end += 1
        spans.append((start, end))
        if end == n:
            break
        s, ctx = end, 0  # back over whole words that fit in STRIDE and leave room for word `end`
        while s - 1 > start and ctx + counts[s - 1] <= STRIDE and ctx + counts[s - 1] + counts[end] <= BUDGET:
            s -= 1
            ctx += counts[s]
        start = s
    cuts = [0]
    for (_, end), (nxt, _) in zip(spans, spans[1:]):
        cuts.append(max((nxt + end + 1) // 2, cuts[-1]))  # an overlap split at its middle
    return [(a, b, c, d) for (a, b), c, d in zip(spans, cuts, cuts[1:] + [n])]


def tags(words):
    "The run's tag of each word of a sentence, a list of words."
    enc = tok(words, is_split_into_words=True, add_special_tokens=False)
    pieces = [[] for _ in words]
    for i, w in zip(enc['input_ids'], enc.word_ids()):
        if w is not None:
            pieces[w].append(i)
    pieces = [p[:BUDGET] for p in pieces]  # a word without pieces (the run refuses one) has no input and no tag
    out = [None] * len(words)
    for start, end, a, b in windows([len(p) for p in pieces]):
        ids = [tok.cls_token_id, *(i for p in pieces[start:end] for i in p), tok.sep_token_id]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0]
        pos = 1
        for w in range(start, end):
            if a <= w < b and pieces[w]:
                out[w] = model.config.id2label[int(logits[pos].argmax())]
            pos += len(pieces[w])
    return out
"""


def _exact_tagging_recipe(name: str, ckpt: dict) -> str:
    """How the run tags a sentence longer than its `max_length`, how transformers' pipeline differs, and the run's tags
    exactly (`_TAGGING_RECIPE`, with the task's stride as the run clamped it: at most half a window)."""
    settings, length = ckpt.get('task_settings') or {}, ckpt['hparams']['max_length']
    text = (f"A sentence longer than the run's `max_length` ({length} word pieces with [CLS] and [SEP], the tokenizer's "
            "`model_max_length`): the pipeline above cuts it there, so the words after the cut get no tag. The run cut "
            "it into windows that never split a word, each next one starting up to `stride` pieces of whole words "
            "before the end of the one before, and tagged every word in one window: where two overlap, the first half "
            "of the shared words in the window before, the rest in the window after. The pipeline's own `stride=` "
            "windows otherwise: its windows are cut between pieces, not words, share exactly `stride` pieces, and "
            "where windows overlap it keeps, of entities that overlap, the longest (on a tie the more confident one) "
            "and every other entity of either window, so its entities there can differ from the run's.")
    if 'stride' not in settings:  # runs saved before the checkpoint named the task's settings
        return text + " The run's checkpoint does not name its stride (it was saved by an earlier version)."
    stride = max(0, min(settings['stride'], (length - 2) // 2))
    return (f"{text} These are the run's tags exactly (its stride {stride}), for a sentence given as its words:\n\n"
            f"```python\n{_TAGGING_RECIPE.format(name=name, stride=stride)}```")


def _pipeline_words(tokenizer) -> str:
    """For a tagging folder's card: where transformers' token-classification pipeline finds words by a rule of its own,
    a tokenizer whose pieces do not mark a word's continuation (no `continuing_subword_prefix`: a byte-level BPE, a
    Unigram), for which `gather_pre_entities` takes a piece after a space or at the text's start for a word."""
    model = getattr(getattr(tokenizer, 'backend_tokenizer', None), 'model', None)
    if getattr(model, 'continuing_subword_prefix', None): return ''
    return ("This tokenizer's pieces do not mark a word's continuation, so the pipeline's "
            "`aggregation_strategy='first'` finds words by their offsets and spaces (transformers warns 'Tokenizer "
            "does not support real words'): where it takes a piece for a word of its own (a Unigram's '▁', a byte of "
            "a character of several bytes) its tags differ from the run's; the recipe below gives the run's tags.")


def pipeline_entities(labels: list[str]) -> str:
    """For a tagging folder's card: transformers' pipeline groups words into entities by the `B-` and `I-` of their
    tags alone (`TokenClassificationPipeline.group_entities`), as IOB2 and IOB1 read; an IOBES run's `E-` and `S-`
    tags each begin an entity of their own there, so its entities of several words come apart. '' for other tags."""
    if not any(label[:2] in ('E-', 'S-') for label in labels): return ''
    return ("This run's tags are IOBES: the pipeline's `aggregation_strategy` groups words into entities by `B-` and "
            "`I-` alone, so an entity of several words comes out in pieces (`B-LOC E-LOC` on 'New Harbor': two LOC "
            "entities, 'New' and 'Harbor'), while its words' tags are the run's. The run's entities, those its scores "
            "count, are seqeval's reading of those tags: `seqeval.metrics.sequence_labeling.get_entities(tags)` of "
            "the words' tags (the recipe below gives them), e.g. `[('LOC', 0, 1)]` for 'New Harbor'.")


def _labels_table(names: list[str]) -> str:
    return '\n'.join(['| id | label |', '|---|---|', *(f'| {i} | {n} |' for i, n in enumerate(names))])


def _usage(name: str, ckpt: dict, tag: str) -> str:
    "How to run the folder with transformers' pipeline (a regression's raw score, a multi-label's every label)."
    # truncation=True: a text longer than the run's max_length cut as the run cut it (one text; a pair: `_exact_recipe`)
    kw = {'regression': ", function_to_apply='none'", 'multi_label_classification': ', top_k=None'}.get(
        _problem_type(ckpt), '') + ', truncation=True' if tag == 'text-classification' else \
        ", aggregation_strategy='first'"
    return (f"```python\nfrom transformers import pipeline\n\nrun = pipeline('{tag}', model='{name}'{kw})  "
            f"# this folder\nprint(run('...'))\n```")


def _card(folder: Path, name: str, cfg: FinetuneConfig, ckpt: dict, cls: type, tag: str, tokenizer_note: str) -> Path:
    """`folder`'s README.md (the folder `name` once complete): the run, its labels, dev scores, settings, how to use it
    (with `tokenizer_note`, where its tokenizer does not encode as the run did: `save_exported_tokenizer`)."""
    names = ckpt['labels'] or ['score']
    on_hub = not Path(cfg.model).exists() and not cfg.model.endswith('.pth')
    data = ModelCardData(license=LICENSE, library_name='transformers', pipeline_tag=tag,
                         base_model=cfg.model if on_hub else None, model_name=f"{cfg.group} {ckpt['task']} run {ckpt['run']}",
                         tags=['electra', 'fine-tuned', ckpt['kind'], ckpt['task']])
    head = ("whose head, `ElectraClassificationHead`, puts a dense layer and a GELU before its output layer where the "
            "official head has none: they are set so that its logits are this run's, as gelu(u) - gelu(-u) = u"
            if cls is ElectraForSequenceClassification else 'the same dropout and linear layer on every token')
    scale = ", its score on the task's own scale" if not ckpt['labels'] else ''
    body = '\n\n'.join([
        f"# ELECTRA fine-tuned: {ckpt['task']}, run {ckpt['run']}",
        f"ELECTRA (Clark et al. 2020) fine-tuned from `{cfg.model}` on the {ckpt['kind']} task `{ckpt['task']}`, run "
        f"{ckpt['run']} (seed {ckpt['seed']}) of the group `{cfg.group}`, as transformers' `{cls.__name__}`, {head}. "
        f"Its logits equal those of the run's `{ckpt['task']}_{ckpt['run']}.pth` read by this library "
        f"(`electra.load_finetuned`){scale}.",
        f"## Labels\n\n`config.json`'s `id2label`, from the task's label names:\n\n{_labels_table(names)}",
        f"## Dev scores\n\n{yaml_block({k: v for k, v in ckpt['dev'].items() if k != 'epoch'})}",
        '\n\n'.join(filter(None, ['## How to use', tokenizer_note, _usage(name, ckpt, tag),
                                   tag != 'text-classification' and pipeline_entities(names),
                                   _exact_recipe(name, ckpt, tag)])).rstrip(),
        f"## Settings\n\n{details(yaml_block(ckpt['hparams']), 'the settings of the run')}",
        LICENSE_NOTE])
    return write_card(folder, data, body)


def save_run(cfg: FinetuneConfig, row: dict, tokenizer, say: Callable[[str], None]) -> Path | None:
    """Write the run of the results row `row` as `<task>_<i>/` beside its checkpoint (main process), whole or not at
    all; refused when the checkpoint is not that run (`loading.read_run`); None where transformers cannot hold it
    (`to_transformers`), said in one line unless its kind has no transformers class (QA: the group's card says so, not
    every job's log)."""
    checkpoint = Path(str(row['checkpoint']))
    ckpt = read_run(row)
    model, why = to_transformers(ckpt)
    if model is None:
        if ckpt.get('kind', 'classification') in TRANSFORMERS_CLASSES:
            say(f"{ckpt['task']} run {ckpt['run']}: no transformers folder: {why}; the run is {checkpoint.name} "
                '(electra.load_finetuned reads it)')
        return None
    cls, tag = TRANSFORMERS_CLASSES[ckpt['kind']]
    folder = path_inside(group_dir(cfg), transformers_folder(checkpoint).name, key='output_dir')
    tmp = folder.with_name(f'.{folder.name}.tmp')
    shutil.rmtree(tmp, ignore_errors=True)
    save_model(model, tmp)
    note = save_exported_tokenizer(run_length(copy.deepcopy(tokenizer), model.config, ckpt['hparams']['max_length']),
                                   tmp, folder, words=ckpt.get('kind') == 'tagging')
    if ckpt.get('kind') == 'tagging': note = ' '.join(filter(None, [note, _pipeline_words(tokenizer)]))
    _card(tmp, folder.name, cfg, ckpt, cls, tag, note)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)
    return folder


def _drop_unpicked(cfg: FinetuneConfig, rows, say: Callable[[str], None]) -> None:
    """The folders of runs `select` and `ensemble_k` no longer pick, or outside this job's `runs` (`rows`), removed,
    each said in a line: a folder left from an earlier pick would be taken for a current one. Their weights, the
    `.pth`, stay."""
    for r in rows.sort_values('run').to_dict('records'):
        checkpoint = Path(str(r['checkpoint']))
        folder = transformers_folder(checkpoint)
        if not folder.is_dir(): continue
        shutil.rmtree(path_inside(group_dir(cfg), folder.name, key='output_dir'))
        why = (f"outside this job's {cfg.runs} run(s)" if r['run'] >= cfg.runs else
               f"no longer picked (select {cfg.select}, ensemble_k {cfg.ensemble_k})")
        say(f"{r['task']} run {r['run']}: its transformers folder {folder} removed: the run is {why}; its weights stay "
            f"{checkpoint.name}")


def save_runs(cfg: FinetuneConfig, results: ResultsTable, tokenizer, say: Callable[[str], None] = print) -> list[Path]:
    """The transformers folders of the runs `cfg.save_pretrained` asks for, each task's in turn: those there already
    (a folder is of its run's weights: a run trained again loses it when its new weights are saved,
    `runs.transformers_folder`) and those written now (`save_run`, said in a line). Runs of kinds with no
    transformers class stay `.pth` files, as the group's card says."""
    if not is_main_process() or cfg.save_pretrained == 'none': return []
    found = []
    for task in cfg.task_names:
        every = results.task_rows(task)
        rows = every[every['run'] < cfg.runs]
        picked = rows if cfg.save_pretrained == 'all' or rows.empty else select_runs(rows, cfg.select, cfg.ensemble_k)
        if picked.empty and not rows.empty:  # every score undefined (a constant dev target): no run is picked
            say(f"{task}: no transformers folder: the dev score of each of its {len(rows)} runs is undefined, so none "
                f"is picked; their weights stay {task}_<i>.pth (save_pretrained all writes a folder for every run)")
        _drop_unpicked(cfg, every[~every['run'].isin(picked['run'])], say)
        for r in picked.sort_values('run').to_dict('records'):
            checkpoint = Path(str(r['checkpoint']))
            if transformers_folder(checkpoint).is_dir(): found.append(transformers_folder(checkpoint))
            elif (folder := save_run(cfg, r, tokenizer, say)) is not None:
                say(f"{task} run {r['run']}: also a transformers folder, {folder}")
                found.append(folder)
    return found
