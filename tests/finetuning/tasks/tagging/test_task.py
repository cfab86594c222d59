"""electra/finetuning/tasks/tagging/task.py: a tagging task file, and the sweep training, scoring, resuming and
predicting a tagging task (unlabelled test files included) as it does a GLUE task."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from electra.config.errors import ConfigError, RunWarning
from electra.config.finetune import FinetuneConfig
from electra.config.values import config_from_dict
from electra.finetuning import sweep
from electra.finetuning.loading import load_finetuned
from electra.finetuning.tasks.files import read_task_file
from electra.finetuning.tasks.tagging.demo import write_demo_tagging
from electra.finetuning.tasks.tagging.model import ElectraTagger, predict_windows
from electra.finetuning.tasks.tagging.task import TaggingTask
from tests.support.finetune import job

pytestmark = pytest.mark.usefixtures('one_thread')


def demo_task(tmp_path: Path, extra: str = '', sizes=None) -> Path:
    "The demo NER files (test: words only, as users have them) and their task file."
    root = write_demo_tagging(tmp_path / 'ner', sizes=sizes or {'train': 40, 'dev': 16, 'test': 12})
    test = root / 'test.txt'
    test.write_text('\n'.join(ln.split(' ')[0] for ln in test.read_text(encoding='utf-8').split('\n')), encoding='utf-8')
    spec = tmp_path / 'ner.yaml'
    spec.write_text(f'kind: tagging\ntrain: ner/train.txt\ndev: ner/dev.txt\ntest: ner/test.txt\n{extra}', encoding='utf-8')
    return spec


def read_columns(path: Path) -> list[list[list[str]]]:
    "The word lines of a CoNLL file as column lists, per sentence (-DOCSTART- skipped)."
    out, cur = [], []
    for line in path.read_text(encoding='utf-8').split('\n'):
        cols = line.split()
        if not cols:
            if cur: out.append(cur)
            cur = []
        elif cols[0] != '-DOCSTART-': cur.append(cols)
    return out + ([cur] if cur else [])


def test_task_file_defaults_and_errors(tmp_path):
    spec = read_task_file(demo_task(tmp_path))
    assert (spec.name, spec.kind, spec.scheme, spec.metrics, spec.stride, spec.strict) == \
        ('ner', 'tagging', 'auto', ('f1', 'precision', 'recall', 'accuracy'), 32, False)
    assert spec.hparams == {} and spec.defaults == {'max_length': 256, 'dropout': 0.0}  # official length, no dropout
    assert read_task_file(demo_task(tmp_path, 'max_length: 96\nepochs: 4\nloss_reduction: token\n')).hparams == \
        {'max_length': 96, 'epochs': 4, 'loss_reduction': 'token'}
    cases = [('colour: red\n', "unknown key.*colour"), ('scheme: BIO\n', "scheme: 'BIO'"),
             ('loss: mean\n', 'loss: now .*loss_reduction'),
             ('loss_reduction: avg\n', r"line 5: key 'loss_reduction': 'avg' is not one of sum, mean, token$"),
             ('stride: -1\n', r"line 5: key 'stride': -1 is not a whole number >= 0 \(0: the windows share none; word"),
             ('metrics: [f1, mcc]\n', 'metrics: mcc'),
             ('max_length: 2000\n', r"line 5: key 'max_length': 2000 is not a whole number in \[8, 512\]")]
    for extra, message in cases:
        with pytest.raises(ConfigError, match=rf"ner\.yaml: .*{message}"): read_task_file(demo_task(tmp_path, extra))
    token = demo_task(tmp_path, 'loss_reduction: token\n')  # the task's own key: its loss averages over words
    cfg = config_from_dict(FinetuneConfig, {'tasks': ['STS-B', str(token)]})
    cfg.check_task_kinds()  # 'token' is fine for the tagging task; STS-B keeps the job's sum
    task = TaggingTask(read_task_file(token))
    assert task.loss_func(None, cfg.for_task('ner')).reduction == 'token' and cfg.for_task('STS-B').loss_reduction == 'sum'
    path = demo_task(tmp_path)
    (tmp_path / 'ner' / 'dev.txt').unlink()
    with pytest.raises(ConfigError, match=r"ner\.yaml: dev: .*dev\.txt not found"): read_task_file(path)


def test_bad_tags_stop_the_job_naming_file_and_line(tmp_path):
    spec = demo_task(tmp_path)
    dev = tmp_path / 'ner' / 'dev.txt'
    lines = dev.read_text(encoding='utf-8').split('\n')
    k = next(i for i, ln in enumerate(lines) if ln.endswith(' O') and not ln.startswith('-DOC'))
    lines[k] = lines[k][:-1] + 'I-PER'  # an I- tag after O (or at a sentence start): not IOB2
    dev.write_text('\n'.join(lines), encoding='utf-8')
    with pytest.raises(ConfigError, match=rf"dev\.txt:{k + 1}: tag 'I-PER'"): TaggingTask(read_task_file(spec))


def test_a_task_of_lower_case_prefixes_is_scored_by_its_entities(tmp_path):
    "The demo NER files with b-/i- for B-/I-, no scheme: the task was plain tags, accuracy alone."
    spec = demo_task(tmp_path)
    for name in ('train.txt', 'dev.txt'):
        f = tmp_path / 'ner' / name
        f.write_text(re.sub(r' ([BI])-', lambda m: f' {m[1].lower()}-', f.read_text(encoding='utf-8')), encoding='utf-8')
    task = TaggingTask(read_task_file(spec))
    assert task.data.scheme == 'IOB2' and task.info.metrics == ('f1', 'precision', 'recall', 'accuracy')
    assert 'b-PER' in task.info.labels and 'B-PER' not in task.info.labels  # the file's tags, as written


@pytest.mark.parametrize('split', ['dev', 'test'])
def test_a_dev_or_test_file_without_sentences_stops_the_job_when_the_task_is_made(tmp_path, split):
    "A dev file of -DOCSTART- alone trained a run, then stopped in seqeval with a TypeError; a test file wrote nothing."
    spec = demo_task(tmp_path)
    (tmp_path / 'ner' / f'{split}.txt').write_text('-DOCSTART- O\n\n\n', encoding='utf-8')
    with pytest.raises(ConfigError, match=rf"ner/{split}\.txt: no sentences to {'score' if split == 'dev' else 'tag'}\.$"):
        TaggingTask(read_task_file(spec))


def test_sweep_trains_scores_resumes_and_writes_tags_in_the_input_format(tmp_path, tiny):
    from seqeval.metrics import f1_score, precision_score
    spec = demo_task(tmp_path, 'scheme: IOB2\nmax_length: 24\n')  # short windows: long sentences need several
    cfg = job(tmp_path, 'demo', tasks=[str(spec)], runs=2, epochs=2, batch_size=8, lr=1e-3, ensemble_k=1)
    results = sweep.run_sweep(cfg, *tiny, None, log=lambda s: None)
    rows = results.task_rows('ner')
    assert rows['run'].tolist() == [0, 1] and (rows['score'] == rows['f1']).all() and rows['precision'].notna().all()
    assert '| ner | f1 | 2 |' in sweep.write_summary(cfg, results)
    lines = []
    files = sweep.write_test_predictions(cfg, results, tiny[1], None, log=lines.append)
    assert [p.relative_to(tmp_path / 'out' / 't').as_posix() for p in files] == ['ner/dev.txt', 'ner/test.txt']
    # dev: word, gold tag, predicted tag; seqeval on the file equals the selected run's row of the results table
    dev = read_columns(files[0])
    assert all(len(c) == 3 for s in dev for c in s)
    gold, pred = [[c[1] for c in s] for s in dev], [[c[2] for c in s] for s in dev]
    best = rows.sort_values(['score', 'run'], ascending=[False, True]).iloc[0]
    # the table holds 4 decimals, in its file and in memory alike
    assert 100 * f1_score(gold, pred) == pytest.approx(best['f1'], abs=5e-5)
    assert 100 * precision_score(gold, pred) == pytest.approx(best['precision'], abs=5e-5)
    # test: words only in, word and predicted tag out, the words and lines as they were
    source = (tmp_path / 'ner' / 'test.txt').read_text(encoding='utf-8').split('\n')
    written = files[1].read_text(encoding='utf-8').split('\n')
    assert len(written) == len(source)
    for a, b in zip(source, written):
        assert b == a if not a or a.startswith('-DOC') else (b.split(' ')[0] == a and len(b.split(' ')) == 2)
    assert len(read_columns(files[1])) == 12
    model = load_finetuned(best['checkpoint'])
    assert isinstance(model, ElectraTagger) and model.n_labels == len(TaggingTask(read_task_file(spec)).data.labels)
    again = []
    sweep.run_sweep(cfg, *tiny, None, log=again.append)
    assert again == ['ner: all 2 runs finished before; skipped']


def test_an_ensemble_averages_the_runs_logits(tmp_path, tiny):
    spec = demo_task(tmp_path, 'max_length: 24\n')
    cfg = job(tmp_path, 'demo', tasks=[str(spec)], runs=2, epochs=1, batch_size=8, ensemble_k=2)
    results = sweep.run_sweep(cfg, *tiny, None, log=lambda s: None)
    dev_file = sweep.write_test_predictions(cfg, results, tiny[1], None, log=lambda s: None)[0]
    task = TaggingTask(read_task_file(spec))
    split = task.split('dev', tiny[1], 24)
    loader = task.loader(split, cfg.for_task('ner'), 0, False)
    outs = [predict_windows(load_finetuned(p), loader) for p in results.task_rows('ner')['checkpoint']]
    mean = [(a + b) / 2 for a, b in zip(*outs)]
    from electra.finetuning.tasks.tagging.encoding import word_predictions
    want = word_predictions(split.enc, mean, task.data.labels)
    got = [[c[2] for c in s] for s in read_columns(dev_file)]
    assert got == want


def test_a_task_longer_than_the_models_positions_stops_before_any_run(tmp_path, tiny):
    spec = demo_task(tmp_path)  # the tagging default, 256 tokens (max_length set nowhere); the tiny model has 128 positions
    cfg = job(tmp_path, 'demo', tasks=[str(spec)], max_length=None)
    with pytest.raises(ConfigError, match=r"max_length: ner takes 256 tokens, but the model tiny has 128 positions. "
                                          r"Set task_overrides.ner.max_length"):
        sweep.run_sweep(cfg, *tiny, None, log=lambda s: None)
    assert not (tmp_path / 'ckpt').exists()


def test_max_train_samples_trains_on_a_fixed_random_subset_of_the_sentences(tmp_path, tiny):
    "As classification and QA (`--help`: a fixed random subset); before, every training sentence was trained on."
    spec = demo_task(tmp_path, 'scheme: IOB2\n')
    cfg = job(tmp_path, 'demo', tasks=[str(spec)], runs=1, max_train_samples=7)
    task = sweep.job_tasks(cfg, None)['ner']
    every = task.data.splits['train'].sentences
    data = task.prepare(cfg.for_task('ner'), tiny[1], cfg.cache_dir, False)
    chosen = np.sort(np.random.default_rng(0).choice(len(every), 7, replace=False))
    assert len(every) == 40 and [s.words for s in data.train.file.sentences] == [every[i].words for i in chosen]
    assert task.count(data.train, 'train').startswith('7 training sentences')
    with pytest.warns(RunWarning, match=r"^ner: max_train_samples 50 is more than its 40 training sentences: all 40 are "
                                        r"used, as with max_train_samples 0; its runs record 50, so another value above "
                                        r"40 trains them again\.$"):
        data = task.prepare(job(tmp_path, 'demo', tasks=[str(spec)], max_train_samples=50).for_task('ner'), tiny[1],
                            cfg.cache_dir, False)
    assert [s.words for s in data.train.file.sentences] == [s.words for s in every]  # R22a-5


def test_every_record_holds_the_values_a_task_s_runs_used(tmp_path, tiny):
    """R1-1: the group's README said the command line's max_length while the runs used the kind's 256. Now the values
    used are the ones recorded: the log says the command line's replacing the task file's, the row holds them, the
    card lists each task's values where they differ from the job's config."""
    import json
    import re
    spec = demo_task(tmp_path, 'scheme: IOB2\nepochs: 2\nlr: 0.002\n', sizes={'train': 8, 'dev': 4, 'test': 4})
    values = dict(model='tiny', data='demo', runs=1, group='t', output_dir=str(tmp_path / 'ckpt'), device='cpu',
                  test_output_dir=str(tmp_path / 'out'), cache_dir=str(tmp_path / 'cache'), task_overrides={},
                  tasks=[str(spec)], epochs=1, max_length=32, predict=False)
    cfg = config_from_dict(FinetuneConfig, values, source='command line', from_file=False)
    said = []
    results = sweep.run_sweep(cfg, *tiny, None, log=said.append)
    assert f"ner: epochs 1 from the command line replaces epochs: 2 of its task file ({spec.resolve()}: line 6)" in said
    row = json.loads(results.task_rows('ner')['settings'].iloc[0])['run']
    assert (row['epochs'], row['lr'], row['max_length'], row['dropout']) == (1, 0.002, 32, 0.0)
    sweep.write_summary(cfg, results)
    card = (tmp_path / 'ckpt' / 't' / 'README.md').read_text(encoding='utf-8')
    section = card.split("## Each task's settings\n", 1)[1].split('\n## ', 1)[0]
    rows = re.findall(r'^\| (\w+) \| `(\w+)` \| (\S+) \| (.+) \|$', section, re.M)
    assert rows == [('ner', 'lr', '0.002', f'{spec.resolve()}: line 7'), ('ner', 'dropout', '0.0', "the tagging kind's default")]


def _first_piece_tags(logits_of, tokenizer, sentences: list[list[str]], labels: list[str]) -> list[list[str]]:
    "Each word's tag, read off its first piece's logits of `logits_of(encoding)` [1, T, C], one sentence at a time."
    import torch
    out = []
    for words in sentences:
        enc = tokenizer(words, is_split_into_words=True, return_tensors='pt')
        with torch.no_grad(): logits = logits_of(enc)[0]
        first = {}
        for i, w in enumerate(enc.word_ids()):
            if w is not None: first.setdefault(w, i)
        out.append([labels[int(logits[first[w]].argmax())] for w in range(len(words))])
    return out


def test_the_tags_and_scores_a_job_writes_are_those_of_its_saved_weights(tmp_path, tiny):
    """R5b-1: the job fed token type 1 (official) and wrote tags and scores that its saved run, read with
    transformers' tokenizer (type 0 for one text), did not give. Recomputed here from the .pth (`load_finetuned`) and
    from the transformers folder (`ElectraForTokenClassification`), word by word at first pieces, scored by seqeval."""
    from seqeval.metrics import accuracy_score, f1_score, precision_score
    from transformers import AutoTokenizer, ElectraForTokenClassification
    spec = demo_task(tmp_path, 'max_length: 64\n')  # every sentence in one window
    cfg = job(tmp_path, 'demo', tasks=[str(spec)], epochs=2, batch_size=8, lr=1e-3)
    results = sweep.run_sweep(cfg, *tiny, None, log=lambda s: None)
    files = sweep.write_test_predictions(cfg, results, tiny[1], None, log=lambda s: None)
    row = results.task_rows('ner').iloc[0]
    folder = sweep.group_dir(cfg) / 'ner_0'
    tok, ours = AutoTokenizer.from_pretrained(folder), load_finetuned(row['checkpoint'])
    theirs = ElectraForTokenClassification.from_pretrained(folder).eval()
    labels = [theirs.config.id2label[i] for i in range(theirs.config.num_labels)]
    for path in files:
        sentences = read_columns(path)
        words, written = [[c[0] for c in s] for s in sentences], [[c[-1] for c in s] for s in sentences]
        assert max(len(tok(w, is_split_into_words=True)['input_ids']) for w in words) <= 64
        by_pth = _first_piece_tags(lambda x: ours(x['input_ids'], x['attention_mask'], x['token_type_ids']), tok,
                                   words, labels)
        by_folder = _first_piece_tags(lambda x: theirs(**x).logits, tok, words, labels)
        assert by_pth == written, path.name
        assert by_folder == written, path.name
        if path.name == 'dev.txt':
            gold = [[c[1] for c in s] for s in sentences]
            assert 100 * f1_score(gold, by_pth) == pytest.approx(row['f1'], abs=5e-5)
            assert 100 * precision_score(gold, by_pth) == pytest.approx(row['precision'], abs=5e-5)
            assert 100 * accuracy_score(gold, by_pth) == pytest.approx(row['accuracy'], abs=5e-5)


def test_the_cards_recipe_tags_sentences_longer_than_a_window_as_the_job_did(tmp_path, tiny, monkeypatch):
    """R5b-2: the tagging card's pipeline cut a sentence longer than the run's max_length (the words after it got no
    tag) where the job tagged it in overlapping windows; the card said nothing. Now it says how the pipeline differs,
    and its exact recipe, run as written from the folder, gives the job's tags; within one window the pipeline does."""
    import re
    from seqeval.metrics.sequence_labeling import get_entities
    from transformers import AutoTokenizer, pipeline
    spec = demo_task(tmp_path, 'max_length: 10\n')  # 8 pieces a window, stride 32 clamped to 4: most sentences need several
    cfg = job(tmp_path, 'demo', tasks=[str(spec)], epochs=2, batch_size=8, lr=1e-3)
    results = sweep.run_sweep(cfg, *tiny, None, log=lambda s: None)
    dev = read_columns(sweep.write_test_predictions(cfg, results, tiny[1], None, log=lambda s: None)[0])
    folder = sweep.group_dir(cfg) / 'ner_0'
    tok = AutoTokenizer.from_pretrained(folder)
    assert tok.model_max_length == 10
    body = (folder / 'README.md').read_text(encoding='utf-8')
    assert "the pipeline above cuts it there" in body and "(its stride 4)" in body
    monkeypatch.chdir(folder.parent)
    scope = {}
    exec(re.findall(r'```python\n(.*?)```', body, re.S)[-1], scope)
    words, written = [[c[0] for c in s] for s in dev], [[c[2] for c in s] for s in dev]
    n_pieces = [len(tok(w, is_split_into_words=True)['input_ids']) for w in words]
    assert sum(n > 10 for n in n_pieces) > len(words) // 2  # most sentences take several windows
    assert [scope['tags'](w) for w in words] == written
    run = pipeline('token-classification', model=str(folder), aggregation_strategy='first')
    for w, tags, n in zip(words, written, n_pieces):
        starts = np.cumsum([0] + [len(x) + 1 for x in w])  # each word's first character in ' '.join(w)
        found = {(e['entity_group'], e['start'], e['end']) for e in run(' '.join(w))}
        if n > 10:  # cut after 8 pieces: no entity ends past the word of the 8th
            last = tok(w, is_split_into_words=True).word_ids()[8]
            assert all(end <= starts[last] + len(w[last]) for _, _, end in found), w
            continue
        assert found == {(t, int(starts[a]), int(starts[b] + len(w[b]))) for t, a, b in get_entities(tags)}, w


@pytest.mark.parametrize('split', ['dev', 'test'])
def test_a_word_without_word_pieces_is_refused_in_any_file_before_the_runs(tmp_path, tiny, split):
    """An empty word in a test file (no tags) was 'an empty tag'; in the dev file it was read, fed as [UNK] (changing
    the other words' tags) and given a tag of its own. Now one rule, in every file, before any run."""
    import json
    ner = tmp_path / 'ner'
    ner.mkdir()
    rec = lambda words, tags: json.dumps({'tokens': words, 'tags': tags} if tags else {'tokens': words})
    good = rec(['Olga', 'Keller', 'left'], ['B-PER', 'I-PER', 'O'])
    (ner / 'train.jsonl').write_text(good + '\n' + rec(['in', 'Oslo'], ['O', 'B-LOC']) + '\n', encoding='utf-8')
    bad = rec(['', 'Olga', 'left'], None if split == 'test' else ['O', 'B-PER', 'O'])
    (ner / 'dev.jsonl').write_text(good + '\n' + (bad if split == 'dev' else good) + '\n', encoding='utf-8')
    words_only = rec(['Olga', 'Keller', 'left'], None)  # a test file as users have it: no tags
    (ner / 'test.jsonl').write_text(words_only + '\n' + (bad if split == 'test' else words_only) + '\n', encoding='utf-8')
    spec = tmp_path / 'ner.yaml'
    spec.write_text('kind: tagging\ntrain: ner/train.jsonl\ndev: ner/dev.jsonl\ntest: ner/test.jsonl\n', encoding='utf-8')
    task = TaggingTask(read_task_file(spec))
    cfg = config_from_dict(FinetuneConfig, {'tasks': [str(spec)]}).for_task('ner')
    with pytest.raises(ConfigError, match=rf"{split}\.jsonl:2 \(token 1\): the word '' has no word piece .*Remove the "
                                          r"word"):
        task.prepare(cfg, tiny[1], None, False)
