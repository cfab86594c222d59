"""Fine-tuned runs as transformers models (electra/finetuning/export.py): the run each task picks written as a
`save_pretrained` folder of transformers' own class, read back by transformers alone. Its logits equal this library's
model's on the same input; its labels are the task's names, so `pipeline` prints them; a head with no transformers
class (QA) gets none; every run names the library's version and its labels."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from transformers import (AutoTokenizer, ElectraForSequenceClassification, ElectraForTokenClassification,
                          pipeline)

import electra
from electra.finetuning import loading, sweep
from electra.finetuning.export import save_runs, to_transformers
from electra.finetuning.loading import load_finetuned, read_finetuned
from electra.finetuning.tasks.demo import write_demo_tasks
from tests.support.finetune import job

pytestmark = pytest.mark.usefixtures('one_thread')

TEXTS = ['a wonderful and moving film , truly great', 'dull , boring and far too long .']


@pytest.fixture(scope='module')
def swept(tmp_path_factory, tiny, glue_dir):
    "Two runs each of the demo reviews task (negative/positive), SST-2, STS-B (regression) and NER (tags)."
    tmp = tmp_path_factory.mktemp('export')
    reviews, ner, _ = write_demo_tasks(tmp / 'tasks', sizes={'train': 16, 'dev': 8, 'test': 4})
    cfg = job(tmp, glue_dir, tasks=[str(reviews), 'SST-2', 'STS-B', str(ner)], runs=2, epochs=1, batch_size=8,
              lr=1e-3, max_length=64, max_train_samples=16,
              task_overrides={'ner': {'max_length': 64}, 'STS-B': {'double_unordered': False}})
    results = sweep.run_sweep(cfg, *tiny, sweep.resolve_data(str(glue_dir), cfg.cache_dir), log=lambda s: None)
    return cfg, results


def _picked(results, task: str) -> int:
    rows = results.task_rows(task)
    return int(rows.sort_values(['score', 'run'], ascending=[False, True]).iloc[0]['run'])


def _inputs(tokenizer, texts):
    return tokenizer(texts, padding=True, return_tensors='pt')


def test_the_picked_run_of_each_task_is_a_transformers_folder_and_the_others_are_not(swept):
    cfg, results = swept
    out = sweep.group_dir(cfg)
    for task in ('reviews', 'SST-2', 'STS-B', 'ner'):
        picked = _picked(results, task)
        assert (out / f'{task}_{picked}' / 'config.json').is_file(), task
        assert not (out / f'{task}_{1 - picked}').exists(), task
    # GLUE's binary tasks are named as the hub's nyu-mll/glue names them, not by the GLUE site's codes '0' and '1'
    sst2 = ElectraForSequenceClassification.from_pretrained(out / f"SST-2_{_picked(results, 'SST-2')}").config
    assert sst2.id2label == {0: 'negative', 1: 'positive'}


def test_pipeline_prints_the_task_s_label_names_and_the_logits_equal_ours(swept):
    cfg, results = swept
    run = _picked(results, 'reviews')
    folder = sweep.group_dir(cfg) / f'reviews_{run}'
    hf = ElectraForSequenceClassification.from_pretrained(folder).eval()
    assert hf.config.id2label == {0: 'negative', 1: 'positive'} and hf.config.label2id == {'negative': 0, 'positive': 1}
    ours = load_finetuned(sweep.group_dir(cfg) / f'reviews_{run}.pth')
    tokenizer = AutoTokenizer.from_pretrained(folder)
    x = _inputs(tokenizer, TEXTS)
    with torch.no_grad():
        theirs, mine = hf(**x).logits, ours(x['input_ids'], x['attention_mask'], x['token_type_ids'])
    torch.testing.assert_close(theirs, mine, atol=1e-5, rtol=1e-5)
    found = pipeline('text-classification', model=str(folder))(TEXTS)
    assert [f['label'] for f in found] == [['negative', 'positive'][i] for i in mine.argmax(-1).tolist()]
    assert [round(f['score'], 5) for f in found] == [round(p, 5) for p in mine.softmax(-1).max(-1).values.tolist()]


def test_a_regression_folder_gives_scores_on_the_task_s_own_scale(swept):
    cfg, results = swept
    run = _picked(results, 'STS-B')
    folder = sweep.group_dir(cfg) / f'STS-B_{run}'
    hf = ElectraForSequenceClassification.from_pretrained(folder).eval()
    assert hf.config.problem_type == 'regression' and hf.config.num_labels == 1
    ours = load_finetuned(sweep.group_dir(cfg) / f'STS-B_{run}.pth')
    x = AutoTokenizer.from_pretrained(folder)(TEXTS, TEXTS[::-1], padding=True, return_tensors='pt')
    with torch.no_grad():
        theirs, mine = hf(**x).logits[:, 0], ours(x['input_ids'], x['attention_mask'], x['token_type_ids'])
    # the official STS-B scale: the head learnt scores / 5; read back, the 5 is in its output layer (`on_task_scale`)
    assert read_finetuned(sweep.group_dir(cfg) / f'STS-B_{run}.pth')['head']['target_scale'] == 5.0
    assert ours.target_scale == 1.0
    torch.testing.assert_close(theirs, mine, atol=1e-5, rtol=1e-5)


def test_a_tagging_folder_names_the_tags_and_gives_our_logits(swept):
    cfg, results = swept
    run = _picked(results, 'ner')
    folder = sweep.group_dir(cfg) / f'ner_{run}'
    ckpt = read_finetuned(sweep.group_dir(cfg) / f'ner_{run}.pth')
    hf = ElectraForTokenClassification.from_pretrained(folder).eval()
    tags = ckpt['labels']
    assert len(tags) == ckpt['head']['n_labels'] and 'O' in tags and any(t.startswith('B-') for t in tags)
    assert hf.config.id2label == dict(enumerate(tags)) and hf.config.label2id == {t: i for i, t in enumerate(tags)}
    ours = load_finetuned(sweep.group_dir(cfg) / f'ner_{run}.pth')
    x = _inputs(AutoTokenizer.from_pretrained(folder), TEXTS)
    with torch.no_grad():
        torch.testing.assert_close(hf(**x).logits, ours(x['input_ids'], x['attention_mask'], x['token_type_ids']),
                                   atol=1e-5, rtol=1e-5)


def _folder_outputs(folder, examples) -> torch.Tensor:
    "The folder's logits [N, C] of `examples` (transformers' tokenizer: one text type 0, a pair 0 then 1), none cut."
    tok, model = AutoTokenizer.from_pretrained(folder), ElectraForSequenceClassification.from_pretrained(folder).eval()
    x = tok(examples.text_a, examples.text_b, padding=True, return_tensors='pt')
    assert x['input_ids'].shape[1] <= tok.model_max_length  # the run's max_length: no text was cut
    with torch.no_grad(): return model(**x).logits


def test_the_test_files_and_dev_scores_of_classification_and_regression_are_those_of_the_saved_folders(swept, glue_dir,
                                                                                                     tiny):
    """R5b-1's check for the sentence kinds: each test file and dev score the job wrote, recomputed by transformers alone
    from the picked run's folder (its tokenizer, `ElectraForSequenceClassification`), scored by scikit-learn / scipy."""
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score
    from electra.finetuning.tasks.glue.tasks import TASKS
    cfg, results = swept
    src = sweep.resolve_data(str(glue_dir), cfg.cache_dir)
    sweep.write_test_predictions(cfg, results, tiny[1], src, log=lambda s: None)
    for name in ('SST-2', 'STS-B'):
        run = _picked(results, name)
        row, folder = results.get(name, run), sweep.group_dir(cfg) / f'{name}_{run}'
        dev, test = src.load(TASKS[name], 'dev'), src.load(TASKS[name], 'test')
        lines = (Path(cfg.test_output_dir) / cfg.group / f'{name}.tsv').read_text(encoding='utf-8').splitlines()
        assert lines[0] == 'index\tprediction'
        written = [ln.split('\t') for ln in lines[1:]]
        assert [int(r[0]) for r in written] == test.idx.tolist()
        if name == 'SST-2':
            assert [r[1] for r in written] == [TASKS[name].labels[i] for i in _folder_outputs(folder, test).argmax(-1)]
            got = 100 * accuracy_score(dev.label, _folder_outputs(folder, dev).argmax(-1).numpy())
            assert got == pytest.approx(row['accuracy'], abs=5e-5)
        else:
            scores = _folder_outputs(folder, test)[:, 0].clamp(0, 5).numpy()
            assert [float(r[1]) for r in written] == pytest.approx(scores.tolist(), abs=5e-4 + 1e-5)  # 3 decimals
            dev_scores = _folder_outputs(folder, dev)[:, 0].double().numpy()
            # the tiny run's dev scores spread by about 0.01 around 14.3, where float32 steps by 1e-6 (the job's output
            # times 5, the folder's head computing it otherwise): Pearson's r moves by some 1e-3 points, ranks not at all
            assert 100 * pearsonr(dev_scores, dev.label)[0] == pytest.approx(row['pearson'], abs=1e-2)
            assert 100 * spearmanr(dev_scores, dev.label)[0] == pytest.approx(row['spearman'], abs=5e-4)


def _card(path) -> tuple[dict, str]:
    text = path.read_text(encoding='utf-8')
    return yaml.safe_load(re.match(r'---\n(.*?)\n---\n', text, re.S)[1]), text


def test_cards_checkpoints_and_exports_name_the_version_license_and_labels(swept, monkeypatch):
    cfg, results = swept
    out = sweep.group_dir(cfg)
    run = _picked(results, 'reviews')
    meta, text = _card(out / f'reviews_{run}' / 'README.md')
    assert meta['license'] == 'apache-2.0' and meta['library_name'] == 'transformers'
    assert meta['pipeline_tag'] == 'text-classification' and meta['electra_version'] == electra.__version__
    assert '| 0 | negative |' in text and '| 1 | positive |' in text
    assert f"pipeline('text-classification', model='reviews_{run}', truncation=True)" in text
    monkeypatch.chdir(out)
    exec(re.findall(r'```python\n(.*?)```', text, re.S)[0].replace("'...'", repr(' '.join(TEXTS * 20))), {})  # runs
    for task in ('reviews', 'STS-B', 'ner'):
        for r in (0, 1):
            assert read_finetuned(out / f'{task}_{r}.pth')['electra_version'] == electra.__version__
    assert read_finetuned(out / 'reviews_0.pth')['labels'] == ['negative', 'positive']
    assert read_finetuned(out / 'STS-B_0.pth')['labels'] == []  # a regression: one score, no classes
    # the group's card names each task's labels, the QA task's what its head predicts, and the folders written
    sweep.write_summary(cfg, results)
    _, group = _card(out / 'README.md')
    assert '| reviews | classification | negative, positive |' in group and '| SST-2 | classification | negative, ' \
        'positive |' in group and '| STS-B | regression | one score' in group
    assert f'`reviews_{run}/`' in group and f'`reviews_{1 - run}/`' not in group


def test_a_qa_run_has_no_transformers_class_and_says_so(tiny):
    "The official QA head (end given start, answerability, masked question) is not ElectraForQuestionAnswering's."
    from electra.finetuning.tasks.qa.heads import ElectraQA
    model = ElectraQA(tiny[0].electra)
    ckpt = {'format': 'electra-finetuned', 'kind': 'qa', 'labels': ['answer'], 'head': {}, 'model': model.state_dict(),
            'electra_config': tiny[0].config.to_dict()}
    assert to_transformers(ckpt) == (None, 'its qa head has no transformers class that computes it')


def test_every_run_on_request_none_and_a_run_trained_again_loses_its_folder(swept, tiny):
    cfg, results = swept
    out, run = sweep.group_dir(cfg), _picked(results, 'reviews')
    tokenizer = AutoTokenizer.from_pretrained(out / f'reviews_{run}')
    assert save_runs(dataclasses.replace(cfg, save_pretrained='none'), results, tokenizer, say=lambda s: None) == []
    assert (out / f'reviews_{run}' / 'config.json').is_file()  # 'none' writes nothing and removes nothing
    written = save_runs(dataclasses.replace(cfg, save_pretrained='all'), results, tokenizer, say=lambda s: None)
    assert sorted(p.name for p in written) == ['SST-2_0', 'SST-2_1', 'STS-B_0', 'STS-B_1', 'ner_0', 'ner_1', 'reviews_0',
                                               'reviews_1']
    # the same run trained again (its inputs changed): its old folder goes when its new weights are saved
    again = dataclasses.replace(cfg, tasks=[cfg.tasks[0]], save_pretrained='none', task_overrides={'reviews': {'lr': 2e-3}})
    sweep.run_sweep(again, *tiny, None, log=lambda s: None)
    assert not (out / 'reviews_0').exists() and not (out / 'reviews_1').exists()
    assert (out / 'SST-2_0' / 'config.json').is_file()


def test_a_head_transformers_cannot_hold_and_a_run_without_labels_get_no_folder_with_the_reason(tiny):
    "transformers' classification head holds our C outputs in 2C of its H dense units; a run of 0.2 names no labels."
    from electra.finetuning.classifier import ElectraClassifier

    def ckpt(n, **kw):
        model = ElectraClassifier(tiny[0].electra, n)
        return {'format': 'electra-finetuned', 'kind': 'classification', 'labels': [f'c{i}' for i in range(n)],
                'head': {'n_outputs': n, 'dropout': 0.1, 'target_scale': 1.0}, 'model': model.state_dict(),
                'electra_config': tiny[0].config.to_dict(), **kw}
    assert to_transformers(ckpt(16))[0] is not None  # 2 x 16 = the hidden size, 32
    assert to_transformers(ckpt(17)) == (None, "its 17 outputs need a hidden size of at least twice as many in "
                                               "transformers' head (the model's is 32)")
    old = ckpt(2)
    del old['labels']
    assert to_transformers(old) == (None, 'its checkpoint (of an earlier version) does not name its labels')


def test_a_run_no_longer_picked_loses_its_folder_and_the_card_lists_what_is_picked_now(swept, tiny):
    "R1-6: after --ensemble_k 2, a rerun with --select median kept the other run's folder, listed in the group's README."
    from electra.finetuning.results import ResultsTable, select_runs
    cfg, _ = swept
    out, tasks = sweep.group_dir(cfg), ('reviews', 'SST-2', 'STS-B', 'ner')
    results = ResultsTable(out / 'results.csv')  # as on disk: reviews was trained again above (another lr)
    save_runs(dataclasses.replace(cfg, ensemble_k=2), results, tiny[1], say=lambda s: None)
    assert all((out / f'{t}_{i}' / 'config.json').is_file() for t in tasks for i in (0, 1))
    median, said = dataclasses.replace(cfg, select='median'), []
    picked = {t: int(select_runs(results.task_rows(t), 'median', 1)['run'].iloc[0]) for t in tasks}
    kept = save_runs(median, results, tiny[1], say=said.append)
    want = sorted(f'{t}_{i}' for t, i in picked.items())
    assert sorted(p.name for p in kept) == want
    assert sorted(p.name for p in out.iterdir() if p.is_dir() and not p.name.startswith(('.', 'tensorboard'))) == want
    other = 1 - picked['reviews']
    assert (f"reviews run {other}: its transformers folder {out / f'reviews_{other}'} removed: the run is no longer "
            f"picked (select median, ensemble_k 1); its weights stay reviews_{other}.pth") in said
    assert (out / f'reviews_{other}.pth').is_file()
    sweep.write_summary(median, results)
    section = (out / 'README.md').read_text(encoding='utf-8').split('## transformers folders\n\n', 1)[1].split('\n## ')[0]
    assert sorted(re.findall(r'`([^`/]+)/`', section)) == want

def test_a_pair_longer_than_max_length_through_the_cards_recipe_gives_the_runs_logits(swept, monkeypatch):
    """The folder's tokenizer cut at 512 (the position table), so a pipeline fed pairs longer than the run's
    max_length whole, through positions never trained; and transformers' `longest_first` gives a tie's token to the
    other segment than BERT's `_truncate_seq_pair` the run uses. Now `model_max_length` is the run's max_length and the
    card's recipe, run as written, reproduces the run's logits on a pair longer than it."""
    from electra.finetuning.tasks.encoding import encode
    from electra.finetuning.tasks.sources import Examples
    import numpy as np
    cfg, results = swept
    run = _picked(results, 'STS-B')
    folder = sweep.group_dir(cfg) / f'STS-B_{run}'
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.model_max_length == 64
    a, b = ' '.join(['a wonderful film'] * 23), ' '.join(['dull and long'] * 23)  # 69 tokens each: a tie at the cut
    enc = encode(Examples(np.array([0]), [a], [b], np.array([0.0])), tokenizer, 64)
    ids = torch.tensor(enc.ids[None].astype('int64'))
    types = (torch.arange(ids.shape[1]) >= int(enc.n_first[0])).long()[None]
    ours = load_finetuned(sweep.group_dir(cfg) / f'STS-B_{run}.pth')
    with torch.no_grad(): mine = ours(ids, torch.ones_like(ids), types)
    hf = tokenizer(a, b, truncation='longest_first', max_length=64)['input_ids']
    assert ids.shape[1] == 64 and hf != ids[0].tolist()  # transformers' own rule differs here, as the card says
    _, body = _card(folder / 'README.md')
    assert "transformers' `truncation='longest_first'` differs" in body
    recipe = re.findall(r'```python\n(.*?)```', body, re.S)[-1]
    monkeypatch.chdir(folder.parent)
    scope = {}
    exec(recipe, scope)
    torch.testing.assert_close(scope['logits'](a, b)[:, 0], mine, atol=1e-5, rtol=1e-5)


def test_the_group_card_s_recipe_encodes_a_long_text_as_the_run_did(swept, tiny, monkeypatch):
    """The group card's "How to use" called the run on `tokenizer(text)` of `load_pretrained`'s tokenizer, which cuts
    at its model_max_length (512), not the run's max_length: a text longer than that reached the run whole, over
    positions it never trained on, and its outputs were not the run's (0.577 against the folder's 0.598). The recipe's
    call, run as written on a long text, now gives the run's outputs: its encoding at the run's max_length."""
    from electra.finetuning.tasks.encoding import encode
    from electra.finetuning.tasks.sources import Examples
    import numpy as np
    cfg, results = swept
    sweep.write_summary(cfg, results)
    group = sweep.group_dir(cfg)
    code = _card_usage(group / 'README.md')
    call = next(line for line in code.splitlines() if 'model(**' in line)
    assert "encode_texts(tokenizer, ['a text'], max_length=64)" in call  # SST-2 run 0, its max_length
    monkeypatch.chdir(group)
    scope: dict = {'tokenizer': tiny[1]}  # the fixture's model is the tokenizer's: its name loads nothing here
    exec('\n'.join(line for line in code.splitlines() if not line.startswith('_, tokenizer =')), scope)
    text = ' '.join(['a wonderful film'] * 40)  # 120 tokens: past the run's 64
    with torch.no_grad(): got = eval(call.split('=', 1)[1].split('#')[0].replace("['a text']", '[text]'),
                                     {**scope, 'text': text})
    enc = encode(Examples(np.array([0]), [text], None, np.array([0])), scope['tokenizer'], 64)
    ids = torch.tensor(enc.ids[None].astype('int64'))
    with torch.no_grad(): want = scope['model'](ids, torch.ones_like(ids), torch.zeros_like(ids))
    assert ids.shape[1] == 64
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    with torch.no_grad(): whole = scope['model'](**scope['tokenizer']([text], return_tensors='pt'))
    assert not torch.allclose(whole, want)  # what the card's call gave before


def test_encode_texts_takes_what_a_tokenizer_takes_and_refuses_the_rest_naming_the_argument(tiny):
    """R29a-1..5: a str was read as a list of characters (8 examples for 'the meal'), pairs as tuples were joined into
    one segment, max_length 0, 1, -3 or 2 gave erratic lengths (Python's negative slices), one past the tokenizer's
    positions a torch shape error, a NaN second text (pandas' empty cell) transformers' type error, lists of two
    lengths an IndexError, and a forgotten max_length silently 512. Now: a str is one text, a (text, pair) tuple is a
    pair, a missing second text (None, NaN) is none as an empty cell is to the run, and the rest is one line naming
    the argument; max_length has no default."""
    from electra.config.errors import ConfigError
    from electra.finetuning.tasks.encoding import encode_texts
    _, tok = tiny
    one, listed = encode_texts(tok, 'a wonderful film', max_length=16), encode_texts(tok, ['a wonderful film'], max_length=16)
    assert all(torch.equal(one[k], listed[k]) for k in listed) and one['input_ids'].shape[0] == 1
    pairs = encode_texts(tok, [('a wonderful film', 'dull and long')], max_length=16)
    apart = encode_texts(tok, ['a wonderful film'], ['dull and long'], max_length=16)
    assert all(torch.equal(pairs[k], apart[k]) for k in apart) and int(apart['token_type_ids'].sum()) > 0
    missing = encode_texts(tok, ['a wonderful film', 'dull'], [None, float('nan')], max_length=16)
    alone = encode_texts(tok, ['a wonderful film', 'dull'], max_length=16)
    assert all(torch.equal(missing[k], alone[k]) for k in alone)
    for kwargs, said in [
            ({'texts': ['a film'], 'max_length': 2, 'text_pairs': ['b']},
             'max_length: 2 leaves no token of a pair ([CLS] A [SEP] B [SEP] takes 5 at least); give the run\'s'),
            ({'texts': ['a film'], 'max_length': 0}, "max_length: 0 is not a length of at least 3 tokens"),
            ({'texts': ['a film'], 'max_length': 600},
             f"max_length: 600 is past the tokenizer's model_max_length ({tok.model_max_length})"),
            ({'texts': ['a', 'b'], 'text_pairs': ['c'], 'max_length': 16},
             'text_pairs: 1 second texts for 2 texts; give one per text (None or an empty string for none)'),
            ({'texts': [], 'max_length': 16}, 'texts: none given; give at least one text'),
            ({'texts': ['a', float('nan')], 'max_length': 16}, 'texts: item 1 is nan, not a text')]:
        with pytest.raises(ConfigError, match=f'^{re.escape(said)}'): encode_texts(tok, **kwargs)
    with pytest.raises(TypeError, match='max_length'): encode_texts(tok, ['a film'])  # the run's: no default to forget


def test_load_finetuned_given_a_run_s_transformers_folder_or_its_group_names_what_it_is(swept):
    "R29a-7: both, like a path that is not there, were 'no such fine-tuned run. Run `python finetune.py` first'."
    from electra.config.errors import ConfigError
    cfg, results = swept
    group = sweep.group_dir(cfg)
    run = _picked(results, 'SST-2')
    folder = group / f'SST-2_{run}'
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(folder))}: the transformers folder of SST-2 run {run}, not "
                                          rf"its \.pth: load_finetuned reads {re.escape(str(folder))}\.pth; the folder "
                                          r"loads with transformers' AutoModelForSequenceClassification\.$"):
        load_finetuned(folder)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(group))}: a fine-tuning group's folder, not one of its "
                                          r"runs: give a run's file in it, <task>_<i>\.pth \(e\.g\. "):
        load_finetuned(group)


def test_a_pair_with_an_empty_second_text_through_the_folder_gives_the_runs_logits(swept, monkeypatch):
    """transformers' tokenizer(a, '') (the card's call, and the pipeline's) gives `[CLS] A [SEP]`; the run encoded
    `[CLS] A [SEP] [SEP]`, so the folder gave other logits for such pairs, up to 0.36 apart (R20a-4). The run now
    encodes a second text of no tokens as none, as the official featurize does; the card's recipe too."""
    from transformers import AutoModelForSequenceClassification, pipeline
    from electra.finetuning.tasks.encoding import encode
    from electra.finetuning.tasks.sources import Examples
    import numpy as np
    cfg, results = swept
    run = _picked(results, 'STS-B')
    folder = sweep.group_dir(cfg) / f'STS-B_{run}'
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    ours = load_finetuned(sweep.group_dir(cfg) / f'STS-B_{run}.pth')
    a = 'a wonderful film'
    _, body = _card(folder / 'README.md')
    recipe = re.findall(r'```python\n(.*?)```', body, re.S)[-1]
    monkeypatch.chdir(folder.parent)
    scope = {}
    exec(recipe, scope)
    for b in ('', '   '):
        enc = encode(Examples(np.array([0]), [a], [b], np.array([0.0])), tokenizer, 64)
        ids = torch.tensor(enc.ids[None].astype('int64'))
        assert ids[0].tolist() == tokenizer(a)['input_ids']  # one segment, as the official featurize makes it
        types = (torch.arange(ids.shape[1]) >= int(enc.n_first[0])).long()[None]
        with torch.no_grad(): mine = ours(ids, torch.ones_like(ids), types)
        torch.testing.assert_close(scope['logits'](a, b)[:, 0], mine, atol=1e-5, rtol=1e-5)
    with torch.no_grad(): hf = model(**tokenizer(a, '', return_tensors='pt')).logits[:, 0]
    torch.testing.assert_close(hf, mine, atol=1e-5, rtol=1e-5)
    said = pipeline('text-classification', model=model, tokenizer=tokenizer, function_to_apply='none')(
        {'text': a, 'text_pair': ''})
    assert abs(said['score'] - float(mine)) < 1e-5
    # a blank second text is none to the run and an empty segment to transformers' tokenizer: the card says so (R29a-6)
    assert tokenizer(a, '   ')['input_ids'] != tokenizer(a)['input_ids']
    assert 'So can a second text of no tokens but not empty (spaces, a tab, a zero-width space)' in ' '.join(body.split())


@pytest.fixture(scope='module', params=['bpe', 'wordpiece', 'unigram'])
def own_tokenizer_swept(request, tmp_path_factory, glue_dir):
    """One run each of SST-2 (one text), STS-B (a pair) and the demo NER task from a tiny random discriminator whose tokenizer is not the
    library's WordPiece (tests/support/tokenizers.py), trained on the demo GLUE texts."""
    import transformers

    from electra.finetuning import loading
    from tests.support.tokenizers import FOLDERS
    tmp = tmp_path_factory.mktemp(f'own_{request.param}')
    texts = [ln for p in sorted(glue_dir.rglob('*.tsv')) for ln in p.read_text(encoding='utf-8').splitlines()]
    folder = FOLDERS[request.param](tmp / 'discriminator', texts)
    torch.manual_seed(0)
    config = transformers.ElectraConfig(vocab_size=len(AutoTokenizer.from_pretrained(folder)), embedding_size=16,
                                        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                        max_position_embeddings=128)
    transformers.ElectraForPreTraining(config).save_pretrained(folder)
    _, ner, _ = write_demo_tasks(tmp / 'tasks', sizes={'train': 16, 'dev': 8, 'test': 4})
    cfg = job(tmp, glue_dir, model=str(folder), tasks=['SST-2', 'STS-B', str(ner)], epochs=1, batch_size=8, lr=1e-3,
              max_train_samples=16, task_overrides={'STS-B': {'double_unordered': False}, 'ner': {'max_length': 64}})
    src = sweep.resolve_data(str(glue_dir), cfg.cache_dir)
    pretrained = loading.load_pretrained(str(folder))
    results = sweep.run_sweep(cfg, *pretrained, src, log=lambda s: None)
    return cfg, results, src, request.param, pretrained[1]


def test_the_pipeline_of_a_folder_whose_tokenizer_is_not_wordpiece_gives_the_runs_predictions(own_tokenizer_swept):
    """R7a-2: with a byte-level BPE (RoBERTa's post-processor), a WordPiece tokenizer.json without a post-processor or
    a Unigram without token_type_ids, the card's `pipeline(...)` fed the folder other ids or types than the run (on
    STS-B 0.247 off on average): now it gives the run's scores of every dev example, one text and a pair."""
    from electra.finetuning.tasks.encoding import encode, make_loader
    from electra.finetuning.tasks.glue.tasks import TASKS
    cfg, results, src, _, _ = own_tokenizer_swept
    for name in ('SST-2', 'STS-B'):
        folder, ours = sweep.group_dir(cfg) / f'{name}_0', load_finetuned(sweep.group_dir(cfg) / f'{name}_0.pth')
        dev, tok = src.load(TASKS[name], 'dev'), AutoTokenizer.from_pretrained(folder)
        enc = encode(dev, tok, 64)
        order = np.concatenate(list(make_loader(enc, 64, False, 0).batch_sampler))
        with torch.no_grad():
            mine = torch.cat([ours(ids, mask, types) for ids, mask, types, _ in make_loader(enc, 64, False, 0)])
        mine = mine[np.argsort(order)]
        inputs = dev.text_a if dev.text_b is None else [{'text': a, 'text_pair': b}
                                                        for a, b in zip(dev.text_a, dev.text_b)]
        if name == 'SST-2':
            found = pipeline('text-classification', model=str(folder), truncation=True)(inputs)
            names = ElectraForSequenceClassification.from_pretrained(folder).config.id2label
            assert [f['label'] for f in found] == [names[i] for i in mine.argmax(-1).tolist()]
            torch.testing.assert_close(torch.tensor([f['score'] for f in found]), mine.softmax(-1).max(-1).values,
                                       atol=1e-5, rtol=1e-5)
        else:
            found = pipeline('text-classification', model=str(folder), function_to_apply='none', truncation=True)(inputs)
            torch.testing.assert_close(torch.tensor([f['score'] for f in found]), mine,
                                       atol=1e-5, rtol=1e-5)


def _groups(words: list[str], tags: list[str]) -> list[tuple[str, int, int]]:
    """The (entity_group, start, end) of `words` joined by spaces, tagged `tags`, as transformers' token-classification
    pipeline groups its words (`group_entities`: a new group where the type changes or a tag starts with B-)."""
    out, pos = [], 0
    for w, t in zip(words, tags):
        bi, kind = t.split('-', 1) if t[:2] in ('B-', 'I-') else ('I', t)
        if out and out[-1][0] == kind and bi != 'B': out[-1][2] = pos + len(w)
        else: out.append([kind, pos, pos + len(w)])
        pos += len(w) + 1
    return [tuple(g) for g in out]


# transformers' own note that a BPE's pieces carry no mark of a word's continuation (it finds words by spaces)
@pytest.mark.filterwarnings('ignore:Tokenizer does not support real words')
def test_the_tagging_folder_whose_tokenizer_is_not_wordpiece_cuts_a_sentence_and_tags_it_as_the_run(own_tokenizer_swept):
    """R7a-2: the tagging run cut each word into pieces on its own, and a byte-level BPE without a prefix space cuts a
    word inside a sentence otherwise ('Ġrejects', the run's 'rej' 'ects'): the card's `pipeline(...,
    aggregation_strategy='first')` tagged other pieces than the run (f1 36.97, the run 55.93). Now the folder's
    tokenizer cuts a sentence, its words joined by spaces, into the run's pieces; the pipeline, every word in its
    groups, gives the run's tags where its rule for words (offsets and spaces) finds the run's words: not a Unigram's
    '▁' piece or a byte-level BPE's second byte of a character, which it takes for words of their own: the card says
    so where the tokenizer's pieces do not mark a word's continuation (not WordPiece's '##')."""
    from electra.finetuning.tasks.tagging.encoding import encode_tagging
    cfg, results, src, kind, run_tokenizer = own_tokenizer_swept
    folder = sweep.group_dir(cfg) / 'ner_0'
    sweep.write_test_predictions(cfg, results, run_tokenizer, src, log=lambda s: None)
    run = pipeline('token-classification', model=str(folder), aggregation_strategy='first', ignore_labels=[])
    tagged = (Path(cfg.test_output_dir) / cfg.group / 'ner' / 'dev.txt').read_text(encoding='utf-8').strip()
    tokenizer, kinds = AutoTokenizer.from_pretrained(folder), set()
    for block in tagged.split('\n\n'):  # a line a word: the word, its gold tag, the run's tag
        rows = [line.split() for line in block.splitlines() if not line.startswith('-DOCSTART-')]
        if not rows: continue
        words, tags = [r[0] for r in rows], [r[-1] for r in rows]
        fed = encode_tagging([words], None, run_tokenizer, ['O'], 64)
        assert tokenizer(' '.join(words))['input_ids'] == fed.ids.tolist(), ' '.join(words)
        if kind == 'unigram' or not all(w.isascii() for w in words): continue
        found = [(g['entity_group'], g['start'], g['end']) for g in run(' '.join(words))]
        assert found == _groups(words, tags), ' '.join(words)
        kinds |= {g[0] for g in found}
    assert len(kinds) > 1 or kind == 'unigram'  # the run tags more than 'O'
    said = "This tokenizer's pieces do not mark a word's continuation" in (folder / 'README.md').read_text('utf-8')
    assert said is (kind != 'wordpiece')  # WordPiece's '##' marks it: the pipeline finds the run's words


@pytest.mark.parametrize('labels, said', [(['O', 'B-LOC', 'I-LOC', 'E-LOC', 'S-LOC'], True),
                                          (['O', 'B-LOC', 'I-LOC'], False), (['O', 'I-LOC', 'B-LOC'], False)])
def test_an_iobes_tagging_card_says_the_pipeline_splits_its_entities_and_how_to_read_the_runs(labels, said, swept,
                                                                                              tmp_path):
    """An IOBES run's `B-LOC E-LOC` ('New Harbor') came out of the card's `pipeline(..., aggregation_strategy=
    'first')` as two LOC entities (transformers groups by B- and I- alone), seqeval's one, and the card said nothing.
    transformers' own grouping shows the split; the card of an IOBES run says so and names seqeval's reading, the
    card of an IOB2 or IOB1 run (which the pipeline groups as seqeval does) says nothing."""
    from seqeval.metrics.sequence_labeling import get_entities
    from transformers import TokenClassificationPipeline
    from electra.finetuning.export import pipeline_entities
    words = [{'entity': t, 'score': 0.9, 'word': w, 'start': s, 'end': s + len(w), 'index': i}
             for i, (w, t, s) in enumerate([('new', 'B-LOC', 0), ('harbor', 'E-LOC', 4)])]
    grouping = TokenClassificationPipeline.__new__(TokenClassificationPipeline)  # its grouping reads no model
    grouping.tokenizer = type('Words', (), {'convert_tokens_to_string': lambda self, pieces: ' '.join(pieces)})()
    grouped = grouping.group_entities(words)
    assert [(g['entity_group'], g['word']) for g in grouped] == [('LOC', 'new'), ('LOC', 'harbor')]
    assert get_entities(['B-LOC', 'E-LOC']) == [('LOC', 0, 1)]  # the run's one entity, as its scores count it
    note = pipeline_entities(labels)
    assert bool(note) is said
    if said: assert 'get_entities' in note and '`B-` and `I-` alone' in note
    # the card of the fixture's tagging run (IOB2), written again as if its tags were these: the note in its How to use
    from electra.finetuning import export
    cfg, results = swept
    ckpt = read_finetuned(sweep.group_dir(cfg) / f"ner_{_picked(results, 'ner')}.pth")
    card = export._card(tmp_path, 'ner', cfg, {**ckpt, 'labels': labels}, ElectraForTokenClassification,
                        'token-classification', '')
    how = card.read_text(encoding='utf-8').split('## How to use', 1)[1]
    assert note in how and ('`B-` and `I-` alone' in how) is said


def _card_usage(card: Path) -> str:
    "The code of the group card's 'How to use' section, as a user copies it."
    return re.search(r'## How to use\n.*?```python\n(.*?)```', card.read_text(encoding='utf-8'), re.S)[1]


def test_a_regression_run_loaded_as_its_card_says_gives_the_scores_of_its_folder_and_test_file(tmp_path, tiny_dir,
                                                                                              glue_dir, monkeypatch):
    """R15a-2: a regression run of a task file with `target_scale` 4, read as the group card's "How to use" says
    (`load_finetuned`) and called, gave its head's output on the training scale (score / 4) where its transformers
    folder and its test file give the task's. Now the module, `load_run`'s and `open_finetuned`'s too, gives the task's
    scale: transformers' own class on the folder, the test file's values and the Explore helpers' outputs agree."""
    from transformers import AutoModelForSequenceClassification
    from electra.finetuning.loading import load_run
    from electra.tools.explore import model_outputs, open_finetuned
    stsb = glue_dir / 'STS-B'
    spec = tmp_path / 'sts4.yaml'
    spec.write_text(f"kind: regression\ntrain: {stsb / 'train.tsv'}\ndev: {stsb / 'dev.tsv'}\ntest: {stsb / 'test.tsv'}\n"
                    "text: [sentence1, sentence2]\nlabel: score\nid: index\ntarget_scale: 4\n", encoding='utf-8')
    cfg = job(tmp_path, glue_dir, model=str(tiny_dir), tasks=[str(spec)], epochs=1, batch_size=8, lr=1e-3,
              max_train_samples=16)
    src = sweep.resolve_data(str(glue_dir), cfg.cache_dir)
    results = sweep.run_sweep(cfg, *loading.load_pretrained(str(tiny_dir)), src, log=lambda s: None)
    sweep.write_summary(cfg, results)  # and the group's card
    sweep.write_test_predictions(cfg, results, loading.load_pretrained(str(tiny_dir))[1], src, log=lambda s: None)
    group = sweep.group_dir(cfg)
    monkeypatch.chdir(group)  # the card names the run's file as a file of its folder
    used: dict = {}
    exec(_card_usage(group / 'README.md'), used)
    model, tokenizer = used['model'], used['tokenizer']
    assert [name for name, m in model.named_modules() if m.training] == []  # eval mode, as the card says
    written = pd.read_csv(Path(cfg.test_output_dir) / cfg.group / 'sts4.tsv', sep='\t')
    rows = pd.read_csv(stsb / 'test.tsv', sep='\t', quoting=3)
    assert written['id'].tolist() == rows['index'].tolist()
    x = tokenizer(rows['sentence1'].tolist(), rows['sentence2'].tolist(), padding=True, return_tensors='pt')
    folder = AutoModelForSequenceClassification.from_pretrained(group / 'sts4_0').eval()
    with torch.no_grad():
        mine = model(x['input_ids'], x['attention_mask'], x['token_type_ids'])
        theirs = folder(**x).logits[:, 0]
        ran = load_run(results.get('sts4', 0))(x['input_ids'], x['attention_mask'], x['token_type_ids'])
    card = (group / 'README.md').read_text(encoding='utf-8')
    assert "a regression run its scores [N] on the task's own scale (STS-B's 0-5; a task file's `target_scale` folded " \
           "in), its test file's values before their rounding" in card
    assert mine.std() > 0 and theirs.abs().max() > 1.5  # scores of the task's scale, 4 times the head's training ones
    torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ran, mine, atol=0, rtol=0)
    np.testing.assert_allclose(written['prediction'], mine.numpy(), rtol=1e-5, atol=1e-5)  # 6 significant digits
    run = open_finetuned(group / 'sts4_0.pth')
    explored = model_outputs(run.model, run.tokenizer, run.load('dev'))
    dev = run.load('dev')
    d = tokenizer(dev.text_a, dev.text_b, padding=True, return_tensors='pt')
    with torch.no_grad(): np.testing.assert_allclose(explored, model(d['input_ids'], d['attention_mask'],
                                                                       d['token_type_ids']).numpy(), rtol=1e-5, atol=1e-5)
