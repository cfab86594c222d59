"""electra/finetuning/tasks/qa/task.py: a QA task file, the training batches and the loss the sweep trains on, and
the sweep training, scoring, resuming and writing the official prediction files of a SQuAD 2.0 task."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from electra.config.errors import ConfigError, RunWarning
from electra.config.finetune import FinetuneConfig
from electra.config.values import config_from_dict
from electra.finetuning import sweep
from electra.finetuning.loading import load_finetuned
from electra.finetuning.tasks.files import make_task, read_task_file
from electra.finetuning.tasks.qa.data import gold_answers, read_squad
from electra.finetuning.tasks.qa.demo import write_demo_squad
from electra.finetuning.tasks.qa.features import featurize, featurize_cached
from electra.finetuning.tasks.qa.heads import ElectraQA, QALoss
from electra.finetuning.tasks.qa.metrics import null_thresholded, squad_v2_eval
from electra.finetuning.tasks.qa.task import DEFAULTS, OPTIONS, QATask, predict_rows
from tests.finetuning.tasks.qa.conftest import EXTRA_WORDS, make_tokenizer
from tests.support.finetune import job
from tests.support.distributed import as_if_in_a_job

pytestmark = pytest.mark.usefixtures('one_thread')

QA_COLUMNS = ['f1', 'no_answer_f1', 'exact', 'best_f1', 'best_exact', 'HasAns_exact', 'HasAns_f1', 'NoAns_exact', 'NoAns_f1']


def demo_task(tmp_path: Path, extra: str = '', version: str = '2.0', sizes=None, test: bool = True) -> Path:
    "The demo SQuAD set (test.json: the dev questions without their answers) and its task file demo_squad.yaml."
    root = tmp_path / 'squad'
    if not (root / 'dev.json').is_file(): write_demo_squad(root, version, sizes or {'train': 40, 'dev': 16})
    if test:
        data = json.loads((root / 'dev.json').read_text(encoding='utf-8'))
        for art in data['data']:
            for par in art['paragraphs']:
                par['qas'] = [{'id': q['id'], 'question': q['question']} for q in par['qas']]
        (root / 'test.json').write_text(json.dumps(data), encoding='utf-8')
    spec = tmp_path / 'demo_squad.yaml'
    spec.write_text('kind: squad\ntrain: squad/train.json\ndev: squad/dev.json\n' + ('test: squad/test.json\n' if test else '')
                    + extra, encoding='utf-8')
    return spec


@pytest.fixture(scope='module')
def qa_model(qa_tokenizer):
    "A tiny random discriminator over the QA tests' tokenizer (128 positions), and that tokenizer."
    import transformers
    torch.manual_seed(0)
    cfg = transformers.ElectraConfig(vocab_size=len(qa_tokenizer), embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
    return transformers.ElectraForPreTraining(cfg), qa_tokenizer


# -- 1. the task file

def test_task_file_defaults_overrides_and_errors(tmp_path):
    spec = read_task_file(demo_task(tmp_path))
    assert (spec.name, spec.kind, sorted(spec.files)) == ('demo_squad', 'squad', ['dev', 'test', 'train'])
    assert spec.files['dev'] == (tmp_path / 'squad' / 'dev.json').resolve()
    assert spec.options() == OPTIONS and spec.na_threshold == -2.75 and spec.on_bad_answer == 'error'
    assert spec.hparams == {} and spec.defaults == DEFAULTS == {'max_length': 512, 'epochs': 2, 'eval_batch_size': 32}  # official
    spec = read_task_file(demo_task(tmp_path, 'name: sq\nmax_length: 96\nlr: 0.001\ndoc_stride: 32\njoint_prediction: false\n'
                                              'na_threshold: 0\non_bad_answer: skip\n'))
    assert spec.name == 'sq' and spec.hparams == {'max_length': 96, 'lr': 0.001}
    assert (spec.doc_stride, spec.joint_prediction, spec.na_threshold, spec.on_bad_answer) == (32, False, 0.0, 'skip')
    # the kind's defaults over the job's general keys (its max_length 64; official configure_finetuning.py: squad's
    # 512 over the general 128), under task_overrides and what is typed
    cfg = job(tmp_path, 'demo', tasks=[str(demo_task(tmp_path))], task_overrides={'demo_squad': {'epochs': 5}})
    task_cfg = cfg.for_task('demo_squad')
    assert (task_cfg.max_length, task_cfg.epochs, task_cfg.eval_batch_size) == (512, 5, 32)
    cases = [('colour: red\n', r"unknown key\(s\) colour; a QA task file has name, kind, train.*beam_size"),
             ('doc_stride: 0\n', r"line 5: key 'doc_stride': 0 is not a whole number >= 1 \(context tokens between"),
             ('beam_size: 2.5\n', r"line 5: key 'beam_size': expected an integer, got 2\.5\.$"),
             ('answerable_classifier: 2\n', r"line 5: key 'answerable_classifier': expected true or false, got 2\.$"),
             ('na_threshold: high\n', r"line 5: key 'na_threshold': expected a number, got 'high'\.$"),
             ('na_threshold: .inf\n', r"line 5: key 'na_threshold': inf is not a finite number \(SQuAD 2\.0: null odds"),
             ('answerable_weight: -1\n', r"line 5: key 'answerable_weight': -1\.0 is not a finite number >= 0"),
             ('on_bad_answer: keep\n', r"line 5: key 'on_bad_answer': 'keep' is not one of error, skip$"),
             ('max_length: 2000\n', r"line 5: key 'max_length': 2000 is not a whole number in \[8, 512\]")]
    for extra, message in cases:
        with pytest.raises(ConfigError, match=rf"demo_squad\.yaml: .*{message}"): read_task_file(demo_task(tmp_path, extra))
    (tmp_path / 'squad' / 'test.json').unlink()
    with pytest.raises(ConfigError, match=r"demo_squad\.yaml: test: .*test\.json not found"):
        read_task_file(_with_test(tmp_path))
    bad = tmp_path / 'nodev.yaml'
    bad.write_text('kind: squad\ntrain: squad/train.json\n', encoding='utf-8')
    with pytest.raises(ConfigError, match=r"nodev\.yaml: 'dev' is missing"): read_task_file(bad)
    bad.write_text('kind: mrqa\ntrain: squad/train.json\ndev: squad/dev.json\n', encoding='utf-8')
    with pytest.raises(ConfigError, match=r"nodev\.yaml: train: train\.json holds SQuAD JSON, but kind is mrqa: set "
                                          r"kind: squad"):
        read_task_file(bad)


@pytest.mark.parametrize('train, dev, message', [
    ('1.1', '2.0', r"train train.json is SQuAD 1.1 \(version '1.1'\), but dev dev.json is SQuAD 2.0 \(version 'v2.0'\): "
                   r"trained without unanswerable questions, the model would be scored on them"),
    ('2.0', '1.1', r"train train.json is SQuAD 2.0 \(version 'v2.0'\), but dev dev.json is SQuAD 1.1 \(version '1.1'\): "
                   r"the unanswerable training questions would teach a null answer that SQuAD 1.1 never scores"),
])
def test_train_and_dev_of_different_squad_versions_are_refused(tmp_path, train, dev, message):
    "The answerability setting came from the dev file alone, and the training file of the other version ran with it."
    for split, version in (('train', train), ('dev', dev)):
        write_demo_squad(tmp_path / version, version, {'train': 8, 'dev': 4})
        (tmp_path / f'{split}.json').write_bytes((tmp_path / version / f'{split}.json').read_bytes())
    spec = tmp_path / 'mixed.yaml'
    spec.write_text('kind: squad\ntrain: train.json\ndev: dev.json\n', encoding='utf-8')
    with pytest.raises(ConfigError, match=rf"^{spec}: {message}\. Give 'train' and 'dev' files of one SQuAD version"):
        make_task(read_task_file(spec))


def test_a_test_file_of_the_other_squad_version_is_refused(tmp_path):
    spec = demo_task(tmp_path, version='2.0')
    test = tmp_path / 'squad' / 'test.json'
    test.write_text(test.read_text(encoding='utf-8').replace('"v2.0"', '"1.1"'), encoding='utf-8')
    with pytest.raises(ConfigError, match=r"test test.json is SQuAD 1.1 \(version '1.1'\), but dev dev.json is SQuAD 2.0"):
        make_task(read_task_file(spec))


def test_no_answer_f1_is_the_official_score_of_answering_no_question(tmp_path):
    "The baseline counted questions by `is_impossible`; the official rules also answer right a gold that normalises to ''."
    context = 'Ilka lives under the oak. Ilka works as a cook. In the evening, Ilka plays the piano. The end.'
    def qa(qid, *texts):
        return {'id': qid, 'question': 'What?', 'is_impossible': not texts,
                'answers': [{'text': t, 'answer_start': context.index(t, 17)} for t in texts]}
    dev = {'version': 'v2.0', 'data': [{'title': 'x', 'paragraphs': [{'context': context, 'qas': [
        qa('e1', 'the'), qa('e2', '.'), qa('e3', 'the piano', 'the'), qa('e4')]}]}]}
    (tmp_path / 'dev.json').write_text(json.dumps(dev), encoding='utf-8')
    (tmp_path / 'qa.yaml').write_text('kind: squad\ntrain: dev.json\ndev: dev.json\n', encoding='utf-8')
    task = QATask(read_task_file(tmp_path / 'qa.yaml'))
    examples = task.read('dev')
    # evaluate-v2.0.py by hand for "" everywhere: gold_answers = [a for a in answers if normalize_answer(a)] or [''];
    # e1 'the' -> [''] -> 1; e2 '.' -> [''] -> 1; e3 ['the piano'] ('the' dropped) -> 'piano' vs '' -> 0;
    # e4 unanswerable -> [''] -> 1: 3 of 4, whatever the model answered
    got = task.scores(type('S', (), {'examples': examples})(), {e.id: 'oak' for e in examples},
                      {e.id: -9.0 for e in examples})
    assert got['no_answer_f1'] == 75.0 and got['NoAns_total'] == 1.0


def _with_test(tmp_path: Path) -> Path:
    "The task file naming a test file that is not there."
    spec = tmp_path / 'demo_squad.yaml'
    spec.write_text('kind: squad\ntrain: squad/train.json\ndev: squad/dev.json\ntest: squad/test.json\n', encoding='utf-8')
    return spec


def test_metrics_follow_the_dev_files_version_and_the_official_names(tmp_path):
    v1 = QATask(read_task_file(demo_task(tmp_path / 'v1', version='1.1', test=False)))
    v2 = QATask(read_task_file(demo_task(tmp_path / 'v2', test=False)))
    assert (v1.v2, v1.eval_kind, v1.metrics, v1.score_metric) == (False, 'squadv1', ('f1', 'exact'), 'f1')
    assert (v2.v2, v2.eval_kind, v2.metrics, v2.score_metric) == \
        (True, 'squad', ('f1', 'no_answer_f1', 'exact', 'best_f1', 'best_exact', 'HasAns_f1', 'NoAns_f1'), 'f1')
    assert v1.info.test_files == () and v1.info.dev_splits == ('dev',)
    # SQuAD 1.1's exact_match is the results table's `exact`; a wrong answer counts 0
    ex = v1.read('dev')
    preds = {e.id: e.gold_texts[0] for e in ex}
    preds[ex[0].id] = 'no such answer'
    got = v1.scores(type('S', (), {'examples': ex})(), preds, {})
    assert got == pytest.approx({'exact': 100 * (len(ex) - 1) / len(ex), 'f1': 100 * (len(ex) - 1) / len(ex)})
    # SQuAD 2.0 at the file's threshold; NaN for a split without questions
    ex = [e for e in v2.read('dev') if not e.is_impossible]
    odds = {e.id: 0.0 for e in ex}
    got = v2.scores(type('S', (), {'examples': ex})(), {e.id: e.gold_texts[0] for e in ex}, odds)
    assert got['f1'] == 0.0 and got['best_f1'] == 100.0 and math.isnan(got['NoAns_f1'])  # 0 > -2.75: all answer ""
    assert got['no_answer_f1'] == 0.0  # every question answerable: answering none scores nothing
    full = v2.read('dev')  # the baseline: the unanswerable share, whatever the predictions
    got = v2.scores(type('S', (), {'examples': full})(), {e.id: 'x' for e in full}, {e.id: -9.0 for e in full})
    assert got['no_answer_f1'] == pytest.approx(100 * sum(e.is_impossible for e in full) / len(full), abs=1e-12)
    assert 0 < got['no_answer_f1'] < 100 and got['NoAns_f1'] == 0.0
    assert all(isinstance(v, float) for v in got.values())
    v2.spec = read_task_file(demo_task(tmp_path / 'v2', 'na_threshold: 0.5\n', test=False))  # the file's threshold
    assert v2.scores(type('S', (), {'examples': ex})(), {e.id: e.gold_texts[0] for e in ex}, odds)['f1'] == 100.0
    # MRQA: its JSONL, scored by the MRQA script (questions without a prediction left out), named as the table's
    lines = [{'header': {'dataset': 'demo'}}]
    for k, (context, answer) in enumerate([('Alba lives near the pond.', 'near the pond'), ('Borin was born in 1931.', '1931')]):
        at = context.index(answer)
        lines.append({'context': context, 'qas': [{'qid': f'q{k}', 'question': 'Where?', 'answers': [answer],
                      'detected_answers': [{'text': answer, 'char_spans': [[at, at + len(answer) - 1]]}]}]})
    (tmp_path / 'mrqa.jsonl').write_text('\n'.join(json.dumps(x) for x in lines) + '\n', encoding='utf-8')
    (tmp_path / 'mrqa.yaml').write_text('kind: mrqa\ntrain: mrqa.jsonl\ndev: mrqa.jsonl\n', encoding='utf-8')
    mrqa = QATask(read_task_file(tmp_path / 'mrqa.yaml'))
    assert (mrqa.v2, mrqa.eval_kind, mrqa.metrics) == (False, 'mrqa', ('f1', 'exact'))
    ex = mrqa.read('dev')
    assert [e.id for e in ex] == ['q0', 'q1'] and ex[0].answers == (('near the pond', 11),)
    assert mrqa.scores(type('S', (), {'examples': ex})(), {'q0': 'Near the pond.'}, {}) == {'exact': 100.0, 'f1': 100.0}


# -- 2. the training batches and the loss

def test_training_batches_feed_the_joint_head_and_the_loss(tmp_path, qa_tokenizer):
    task = QATask(read_task_file(demo_task(tmp_path, test=False)))
    ex = task.read('train')[:6]
    windows = featurize(ex, qa_tokenizer, 48, 64, 16, is_training=True)
    assert any(w.start > 0 for w in windows) and any(w.start == 0 for w in windows)  # windows with and without the answer
    cfg = job(tmp_path, 'demo', tasks=[str(tmp_path / 'demo_squad.yaml')], batch_size=4, eval_batch_size=5)
    task_cfg = cfg.for_task('demo_squad')
    batches = list(task.loader(windows, task_cfg, 0, True, seed=3))
    assert len(batches) == math.ceil(len(windows) / 4) and all(len(b) == 7 for b in batches)
    seen = []
    for ids, mask, types, start_in, start, end, impossible in batches:
        assert torch.equal(start_in, start) and ids.shape == mask.shape == types.shape
        for r in range(len(ids)):
            w = next(w for w in windows if len(w) == int(mask[r].sum()) and np.array_equal(w.input_ids, ids[r, :len(w)].numpy())
                     and w.start == start[r] and w.end == end[r])
            assert float(impossible[r]) == float(w.is_impossible) and types[r, :len(w)].tolist() == w.token_type_ids.tolist()
            seen.append(id(w))
    assert sorted(seen) == sorted(map(id, windows))  # every window once per epoch
    # evaluation: inputs only, every window once; under torchrun, training batches carry weights (0: a stand-in)
    ev = task.loader(windows, task_cfg, 0, False)
    assert all(len(b) == 3 for b in ev) and sorted(i for b in ev.batch_sampler for i in b) == list(range(len(windows)))
    part = list(task.loader(windows[:3], task_cfg, 0, True, seed=0, shard=(3, 4)))
    ids, mask, types, s_in, s, e, imp, weight = part[0]
    assert weight.tolist() == [0.0] and len(ids) == 1  # 3 windows over 4 processes: the 4th gets a stand-in
    whole = list(task.loader(windows[:3], task_cfg, 0, True, seed=0, shard=(0, 4)))[0]
    assert whole[-1].tolist() == [1.0] and torch.equal(whole[0], ids)  # the stand-in is the batch's first window
    # the model takes the first 4 items (the joint head's end given the gold start), the loss the rest
    body = _tiny_body(qa_tokenizer)
    model = task.new_model(body, task_cfg)
    out = model(*batches[0][:task.n_inp])
    assert 'end_logits' in out and 'start_top_index' not in out
    loss = task.loss_func(model, task_cfg)(out, *batches[0][task.n_inp:])
    assert loss.ndim == 0 and torch.isfinite(loss)


def _tiny_body(tok):
    import transformers
    torch.manual_seed(0)
    return transformers.ElectraModel(transformers.ElectraConfig(
        vocab_size=len(tok), embedding_size=16, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128))


def test_loss_with_weights_and_under_torchrun_equals_the_hand_computation(monkeypatch):
    torch.manual_seed(1)
    b, n = 5, 9
    out = {'start_logits': torch.randn(b, n, requires_grad=True), 'end_logits': torch.randn(b, n),
           'answerable_logit': torch.randn(b)}
    start, end = torch.tensor([0, 3, 2, 5, 1]), torch.tensor([0, 4, 2, 7, 6])
    impossible, weight = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0]), torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0])
    ls, le = out['start_logits'].log_softmax(-1), out['end_logits'].log_softmax(-1)
    z = out['answerable_logit']
    bce = -(impossible * F.logsigmoid(z) + (1 - impossible) * F.logsigmoid(-z))
    per = [-(ls[i, start[i]] + le[i, end[i]]) / 2 + 0.5 * bce[i] for i in range(b)]
    assert QALoss(True, 0.5)(out, start, end, impossible).item() == pytest.approx(sum(p.item() for p in per), rel=1e-6)
    loss = QALoss(True, 0.5, reduction='mean')
    # no weight, no divisors: the batch mean
    assert loss(out, start, end, impossible).item() == pytest.approx(sum(p.item() for p in per) / b, rel=1e-6)
    # weights: the weighted sum over the weights' sum; a weight-0 row counts nowhere
    want = sum(per[i].item() * weight[i].item() for i in range(b))
    assert loss(out, start, end, impossible, weight).item() == pytest.approx(want / 4, rel=1e-6)
    assert loss.local_sum.item() == pytest.approx(want, rel=1e-6) and loss.local_count.item() == 4.0
    # under torchrun: the same sum over the global batch's divisor (given this process's count)
    with monkeypatch.context() as m:
        got_counts = as_if_in_a_job(m, 2, others=1.0)  # (4 + 1) / 2 processes
        value = loss(out, start, end, impossible, weight)
    assert value.item() == pytest.approx(want / 2.5, rel=1e-6) and got_counts[0].tolist() == [4.0]
    value.backward()
    assert out['start_logits'].grad[2].abs().sum() == 0 and out['start_logits'].grad[1].abs().sum() > 0
    other = {k: v.detach().clone() for k, v in out.items()}
    other['start_logits'][2] = 50.0  # the weight-0 row changed: the loss does not move
    assert loss(other, start, end, impossible, weight).item() == pytest.approx(want / 4, rel=1e-6)
    assert QALoss(False, reduction='mean')(out, start, end, impossible, weight).item() == pytest.approx(
        sum((per[i] - 0.5 * bce[i]).item() * weight[i].item() for i in range(b)) / 4, rel=1e-6)


def test_windows_are_cached_by_questions_tokenizer_and_options(tmp_path, qa_tokenizer):
    task = QATask(read_task_file(demo_task(tmp_path, test=False)))
    ex = task.read('dev')
    cache = tmp_path / 'cache'
    first = featurize_cached(ex, qa_tokenizer, cache, 'dev', 48, 64, 16)
    again = featurize_cached(ex, qa_tokenizer, cache, 'dev', 48, 64, 16)
    want = featurize(ex, qa_tokenizer, 48, 64, 16)
    assert len(list(cache.glob('dev-*.npz'))) == 1 and len(again) == len(want) == len(first)
    for a, b in zip(again, want):
        assert (a.example, a.index, a.start, a.end, a.is_impossible) == (b.example, b.index, b.start, b.end, b.is_impossible)
        for k in ('input_ids', 'token_type_ids', 'char_spans', 'max_context'):
            x, y = getattr(a, k), getattr(b, k)
            assert x.dtype == y.dtype and np.array_equal(x, y), k
    featurize_cached(ex, qa_tokenizer, cache, 'dev', 48, 64, 24)  # another stride
    featurize_cached(ex[:-1], qa_tokenizer, cache, 'dev', 48, 64, 16)  # other questions
    featurize_cached(ex, make_tokenizer(EXTRA_WORDS), cache, 'dev', 48, 64, 16)  # another tokenizer
    assert len(list(cache.glob('dev-*.npz'))) == 4
    path = next(cache.glob('dev-*.npz'))
    path.write_bytes(b'damaged')
    featurize_cached(ex, qa_tokenizer, cache, 'dev', 48, 64, 16)  # a damaged file is made again, not read


@pytest.mark.parametrize('split', ['train', 'dev', 'test'])
def test_a_question_without_word_pieces_stops_the_job_before_any_run_naming_its_file_and_id(tmp_path, qa_tokenizer,
                                                                                               split):
    "An empty question was taken in every file, trained on, and answered from the context alone."
    spec = demo_task(tmp_path)
    path = tmp_path / 'squad' / f'{split}.json'
    data = json.loads(path.read_text(encoding='utf-8'))
    qa = data['data'][0]['paragraphs'][0]['qas'][0]
    qa['question'] = '\u200b'
    path.write_text(json.dumps(data), encoding='utf-8')
    task = make_task(read_task_file(spec))
    cfg = config_from_dict(FinetuneConfig, {'tasks': [str(spec)], 'max_length': 64}).for_task('demo_squad')
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: question {re.escape(repr(qa['id']))}: the question "
                                          rf"{re.escape(repr(qa['question']))} has no word piece"):
        task.prepare(cfg, qa_tokenizer, tmp_path / 'cache', False)


def test_a_question_that_leaves_no_room_for_its_context_names_the_keys_to_set_and_where_they_were_set(tmp_path,
                                                                                                      qa_tokenizer):
    """R22a-1: the refusal said "raise max_seq_length", the official name, which no key of the job has (followed,
    "unknown key"), and named neither the task file nor the line that set the two lengths. The fix it names works."""
    spec = demo_task(tmp_path, 'max_length: 16\nmax_query_length: 40\n')
    path = tmp_path / 'squad' / 'dev.json'
    data = json.loads(path.read_text(encoding='utf-8'))
    qa = data['data'][0]['paragraphs'][0]['qas'][0]
    qa['question'] = ' '.join(['the'] * 30)  # 30 tokens of the tests' tokenizer
    path.write_text(json.dumps(data), encoding='utf-8')
    assert len(qa_tokenizer.tokenize(qa['question'])) == 30
    task = make_task(read_task_file(spec))
    cfg = config_from_dict(FinetuneConfig, {'tasks': [str(spec)]}).for_task('demo_squad')
    with pytest.raises(ConfigError) as e:
        task.prepare(cfg, qa_tokenizer, tmp_path / 'cache', False)
    assert str(e.value) == (f"{path}: question {qa['id']!r}: its 30 tokens (max_query_length 40, {spec}: line 6) leave "
                            f"no room for the context in max_length 16 ({spec}: line 5): set max_query_length to at most "
                            "12, or raise max_length.")
    cfg = config_from_dict(FinetuneConfig, {'tasks': [str(spec)], 'task_overrides': {'demo_squad': {'max_length': 48}}})
    assert task.prepare(cfg.for_task('demo_squad'), qa_tokenizer, tmp_path / 'cache', False).dev['dev'].windows  # the fix


def test_max_train_samples_past_the_training_questions_is_said(tmp_path, qa_tokenizer):
    "R22a-5 on QA: every question trained on, the warning naming the count of questions."
    spec = demo_task(tmp_path)
    task = make_task(read_task_file(spec))
    n = len(task.read('train'))
    cfg = config_from_dict(FinetuneConfig, {'tasks': [str(spec)], 'max_length': 64, 'max_train_samples': n + 1})
    with pytest.warns(RunWarning, match=rf"^demo_squad: max_train_samples {n + 1} is more than its {n} training "
                                        rf"questions: all {n} are used"):
        task.prepare(cfg.for_task('demo_squad'), qa_tokenizer, tmp_path / 'cache', False)


# -- 3. the sweep

def test_sweep_trains_scores_resumes_and_writes_the_official_files(tmp_path, qa_model):
    # short windows (several per question, overlapping) and a small beam, to see the options reach the model
    spec = demo_task(tmp_path, 'max_length: 64\ndoc_stride: 24\nbeam_size: 5\nepochs: 3\n', sizes={'train': 80, 'dev': 16})
    cfg = job(tmp_path, 'demo', tasks=[str(spec)], runs=2, batch_size=16, lr=3e-3, eval_batch_size=64)
    log = []
    results = sweep.run_sweep(cfg, *qa_model, None, log=log.append)
    said = re.match(r'demo_squad: 80 training questions \((\d+) windows\), 16 dev questions \((\d+) windows\); '
                    r'3 epochs, .*max_length 64, 2 of 2 runs to do', log[0])
    assert said and int(said[1]) > 80 and int(said[2]) > 16, log[0]  # windows of 64 tokens, several per question
    rows = results.task_rows('demo_squad')
    assert rows['run'].tolist() == [0, 1] and (rows['score'] == rows['f1']).all()
    assert rows[QA_COLUMNS].notna().all().all() and rows['accuracy'].isna().all()
    table = pd.read_csv(tmp_path / 'ckpt' / 't' / 'results.csv')
    assert table[QA_COLUMNS].notna().all().all()
    assert '| demo_squad | f1 | 2 |' in sweep.write_summary(cfg, results)
    said = []
    files = sweep.write_test_predictions(cfg, results, qa_model[1], None, log=said.append)
    out = tmp_path / 'out' / 't' / 'demo_squad'
    names = ['predictions.json', 'null_odds.json', 'nbest_predictions.json']
    assert files == [out / s / f for s in ('dev', 'test') for f in names] and len(said) == 6
    dev = read_squad(tmp_path / 'squad' / 'dev.json')
    preds, odds, nbest = (json.loads((out / 'dev' / f).read_text(encoding='utf-8')) for f in names)
    assert list(preds) == list(odds) == list(nbest) == [e.id for e in dev]
    assert all(isinstance(p, str) and p for p in preds.values())  # dev: the best non-null answer of every question
    # the official evaluation of the written files gives the selected run's row of the results table
    best = rows.sort_values(['score', 'run'], ascending=[False, True]).iloc[0]
    got = squad_v2_eval(gold_answers(dev), preds, odds)
    for col in QA_COLUMNS:  # the official script's, and no_answer_f1: its score of "" everywhere
        want = squad_v2_eval(gold_answers(dev), dict.fromkeys(preds, ''))['f1'] if col == 'no_answer_f1' else got[col]
        assert want == pytest.approx(best[col], abs=5e-5), col  # the table holds 4 decimals
    # ... and they are that run's answers, not the other run's: its null odds, its n-best lists
    task, task_cfg = QATask(read_task_file(spec)), cfg.for_task('demo_squad')
    split = task.split('dev', qa_model[1], task_cfg, cfg.cache_dir)
    for run in rows.to_dict('records'):
        model = load_finetuned(run['checkpoint'])
        p, o, nb = task.answers(model, split, predict_rows(model, task.loader(split, task_cfg, 0, False)))
        assert (o == pytest.approx(odds, abs=1e-6) and p == preds and nb == pytest.approx(nbest)) == \
            (run['run'] == best['run']), run['run']
    assert all(preds[q] == next(d['text'] for d in nbest[q] if d['text']) for q in preds)
    # test: the same questions without answers, "" where the null odds exceed the official threshold
    test_preds, test_odds = (json.loads((out / 'test' / f).read_text(encoding='utf-8')) for f in names[:2])
    assert test_odds == pytest.approx(odds, abs=1e-6)
    assert test_preds == null_thresholded(preds, test_odds, -2.75) != preds
    # the saved run is rebuilt with the file's head options
    model = load_finetuned(best['checkpoint'])
    assert isinstance(model, ElectraQA)
    c = model.classifier
    assert (c.joint, c.beam_size, c.answerable_classifier, c.uses_start) == (True, 5, True, True)
    assert torch.load(best['checkpoint'], weights_only=True)['head'] == {
        'joint_prediction': True, 'beam_size': 5, 'answerable_classifier': True, 'answerable_uses_start_logits': True}
    again = []
    sweep.run_sweep(cfg, *qa_model, None, log=again.append)
    assert again == ['demo_squad: all 2 runs finished before; skipped']
    # an ensemble is refused before any training (and at prediction time for finished runs)
    cfg2 = job(tmp_path, 'demo', tasks=[str(spec)], runs=2, ensemble_k=2)
    with pytest.raises(ConfigError, match=r'ensemble_k: 2, but the answers of QA task demo_squad come from one run'):
        sweep.write_test_predictions(cfg2, results, qa_model[1], None, log=lambda s: None)
    with pytest.raises(ConfigError, match=r'ensemble_k: 2'):
        sweep.run_sweep(job(tmp_path, 'demo', tasks=[str(spec)], runs=2, ensemble_k=2, group='t2'), *qa_model, None,
                        log=lambda s: None)
    assert not (tmp_path / 'ckpt' / 't2').exists()


def test_an_undefined_score_is_written_undefined_in_the_predictions_line(tmp_path, qa_model):
    "A dev set without an unanswerable question leaves NoAns undefined: its line said `NoAns_f1 nan`."
    spec = demo_task(tmp_path, 'max_length: 64\n', sizes={'train': 8, 'dev': 4}, test=False)
    dev = tmp_path / 'squad' / 'dev.json'
    data = json.loads(dev.read_text(encoding='utf-8'))
    for art in data['data']:
        for par in art['paragraphs']: par['qas'] = [q for q in par['qas'] if not q.get('is_impossible')]
    dev.write_text(json.dumps(data), encoding='utf-8')
    n = sum(len(par['qas']) for art in data['data'] for par in art['paragraphs'])
    cfg = job(tmp_path, 'demo', tasks=[str(spec)], batch_size=8)
    said = []
    results = sweep.run_sweep(cfg, *qa_model, None, log=said.append)
    sweep.write_test_predictions(cfg, results, qa_model[1], None, log=said.append)
    line = next(s for s in said if s.startswith('demo_squad/dev/predictions.json'))
    assert re.search(rf'answers of {n} questions from .*, HasAns_f1 \d+\.\d\d, NoAns_f1 undefined \(official', line), line
    assert 'nan' not in ' '.join(said).lower(), said


def test_a_task_longer_than_the_models_positions_stops_before_any_run(tmp_path, qa_model):
    spec = demo_task(tmp_path, test=False)  # the QA default, 512 tokens; the tiny model has 128 positions
    with pytest.raises(ConfigError, match=r"max_length: demo_squad takes 512 tokens, but the model tiny has 128 positions"):
        sweep.run_sweep(job(tmp_path, 'demo', tasks=[str(spec)], max_length=None), *qa_model, None, log=lambda s: None)
