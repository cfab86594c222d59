"""electra/tools/explore.py: nearest-neighbour search and its token and example helpers."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from electra.config.errors import ConfigError
from electra.tools.explore import (
    CosineIndex,
    ExampleIndex,
    TokenIndex,
    cls_embeddings,
    exact_cosine_knn,
    explore_config,
    find_misclassified,
    open_finetuned,
    recall_at_k,
    word_embeddings,
)
from tests.support.config import refused
from tests.support.notebook_runs import REPO, tiny_pretraining
from tests.support.tokenizers import reordered

pytestmark = pytest.mark.usefixtures('one_thread')

REAL_GLUE = REPO.parent / 'shared' / 'data' / 'glue'
DEMO_CHECKPOINT = REPO / 'checkpoints' / 'pretrain' / 'demo_11081_100%.pth'


def not_degenerate(vectors: np.ndarray) -> float:
    "The median cosine similarity between different rows: near 1 would make any search look perfect."
    u = vectors[:500] / np.linalg.norm(vectors[:500], axis=1, keepdims=True)
    sims = (u @ u.T)[np.triu_indices(len(u), 1)]
    return float(np.median(sims))


def test_exact_search_is_brute_force_cosine():
    rng = np.random.default_rng(1)
    data, queries = rng.standard_normal((300, 16)), rng.standard_normal((7, 16))
    ids, sims = exact_cosine_knn(data, queries, 5)
    u = data / np.linalg.norm(data, axis=1, keepdims=True)
    full = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ u.T
    assert (ids == np.argsort(-full, axis=1)[:, :5]).all() and np.allclose(sims, np.sort(full, axis=1)[:, ::-1][:, :5])


def test_recall_on_random_embeddings_and_determinism():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((5000, 64)).astype(np.float32)
    queries = rng.standard_normal((300, 64)).astype(np.float32)
    index = CosineIndex(data, seed=0)
    assert recall_at_k(index, data, queries, 10) >= 0.95
    small = CosineIndex(data[:1000], seed=0)
    found, sims = small.query(queries, 10)
    again, sims_again = CosineIndex(data[:1000], seed=0).query(queries, 10)
    assert (found == again).all() and np.array_equal(sims, sims_again)           # same graph, same answers
    assert np.all(np.diff(sims, axis=1) <= 1e-6)                                   # most similar first


def test_recall_counts_ties_and_catches_a_bad_index():
    const = np.ones((200, 8), dtype=np.float32)
    assert recall_at_k(CosineIndex(const), const, const[:5], 10) == 1.0         # all tied: any 10 are right

    class FirstTen:
        def query(self, q, k): return np.tile(np.arange(k), (len(q), 1)), None
    rng = np.random.default_rng(2)
    data = rng.standard_normal((1000, 16)).astype(np.float32)
    assert recall_at_k(FirstTen(), data, rng.standard_normal((50, 16)), 10) < 0.1


@pytest.fixture(scope='module')
def pretrained(tmp_path_factory):
    "The discriminator and tokenizer of the demo preset pretrained for 20 steps by pretrain.py (shared with test_notebooks)."
    from electra.finetuning.loading import load_pretrained
    return load_pretrained(tiny_pretraining(tmp_path_factory)['checkpoint'])


def real_checkpoints():
    yield pytest.param('tiny', id='tiny-demo-pretraining')
    yield pytest.param(str(DEMO_CHECKPOINT), id='demo-checkpoint',
                       marks=pytest.mark.skipif(not DEMO_CHECKPOINT.is_file(), reason='run `python pretrain.py` for the demo checkpoint'))


@pytest.mark.parametrize('source', real_checkpoints())
def test_recall_on_word_embeddings(source, pretrained):
    from electra.finetuning.loading import load_pretrained
    model, tokenizer = pretrained if source == 'tiny' else load_pretrained(source)
    tokens = TokenIndex.from_model(model, tokenizer)
    assert not_degenerate(tokens.vectors) < 0.9
    assert len(tokens.ids) == len(tokenizer) - len(set(tokenizer.all_special_ids))   # all but the special tokens
    queries = tokens.vectors[np.random.default_rng(0).choice(len(tokens.vectors), 300, replace=False)]
    assert recall_at_k(tokens.index, tokens.vectors, queries, 10) >= 0.95
    near = tokens.nearest_tokens('the', 5)
    assert len(near) == 5 and 'the' not in set(near['token']) and near['similarity'].is_monotonic_decreasing
    assert (word_embeddings(model, len(tokenizer)) == tokens.embeddings).all()


@pytest.mark.skipif(not (REAL_GLUE / 'STS-B' / 'train.tsv').is_file(), reason='../shared/data/glue/STS-B is absent')
def test_recall_on_cls_embeddings_of_sts_b(pretrained):
    "[CLS] vectors of 2,000 real STS-B training pairs; 300 dev pairs as queries."
    from electra.finetuning.tasks.glue.sources import open_source
    from electra.finetuning.tasks.glue.tasks import TASKS
    model, tokenizer = pretrained
    source = open_source(str(REAL_GLUE))
    train = source.load(TASKS['STS-B'], 'train').take(np.arange(2000))
    dev = source.load(TASKS['STS-B'], 'dev').take(np.arange(300))
    index = ExampleIndex(model, tokenizer, train, max_length=64)
    assert index.vectors.shape == (2000, model.config.hidden_size) and not_degenerate(index.vectors) < 0.9
    queries = index.embed(dev.text_a, dev.text_b)
    assert recall_at_k(index.index, index.vectors, queries, 10) >= 0.95
    # an example's own text finds it first
    near = index.nearest_examples(train.text_a[7], train.text_b[7], k=3)
    assert near["idx"].iloc[0] == train.idx[7] and near["similarity"].iloc[0] == pytest.approx(1.0, abs=1e-3)
    assert list(near.columns) == ['similarity', 'idx', 'text_a', 'text_b', 'label']


@pytest.fixture(scope='module')
def tiny_random():
    import transformers
    words = 'the a cow ship bread sails bakes eats good bad movie film is was very not'.split()
    vocab = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '.', *words]
    tok = transformers.ElectraTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})
    torch.manual_seed(0)
    cfg = transformers.ElectraConfig(vocab_size=len(tok), embedding_size=16, hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    return transformers.ElectraForPreTraining(cfg).eval(), tok


def test_cls_embeddings_are_in_example_order_and_match_the_model(tiny_random):
    model, tok = tiny_random
    texts = ['the cow eats bread .', 'a ship', 'the film was very very good .', 'bad']
    got = cls_embeddings(model, tok, texts, batch_size=3)
    enc = tok(texts[2])
    with torch.no_grad():
        ref = model.electra(input_ids=torch.tensor([enc['input_ids']])).last_hidden_state[0, 0].numpy()
    assert np.allclose(got[2], ref, atol=1e-5)


def test_find_misclassified(tiny_random):
    from electra.finetuning.classifier import ElectraClassifier
    from electra.finetuning.tasks.sources import Examples
    from electra.finetuning.tasks.glue.tasks import TASKS
    model, tok = tiny_random
    torch.manual_seed(0)
    clf = ElectraClassifier(model.electra, 2).eval()
    ex = Examples(np.arange(6), ['the movie was good', 'bad film', 'very good', 'not good', 'the cow', 'a ship'],
                  None, np.array([1, 0, 1, 0, 1, 0]))
    wrong = find_misclassified(clf, tok, TASKS['SST-2'], ex, max_length=16)
    with torch.no_grad():
        from electra.finetuning.learner import predict_outputs
        from electra.finetuning.tasks.encoding import encode, make_loader
        pred = predict_outputs(clf, make_loader(encode(ex, tok, 16), 4, False, 0)).argmax(-1)
    assert sorted(wrong['idx']) == sorted(np.flatnonzero(pred != ex.label).tolist())
    assert wrong['p(prediction)'].is_monotonic_decreasing and (wrong['label'] != wrong['prediction']).all()


def test_the_tables_give_exact_similarities_predictions_and_errors(tiny_random):
    """R24a-5: similarities were rounded to 3 decimals in the DataFrame's values (ties that are not there: 1.000,
    1.000, 0.999 for 0.99979, 0.99953, 0.99944), and a regression's predictions, labels and errors too, its mistakes
    picked by the rounded error. Each is now the exact value, against numpy: cosine of the centred [CLS] vectors,
    |prediction - label|."""
    from electra.finetuning.classifier import ElectraClassifier
    from electra.finetuning.learner import predict_outputs
    from electra.finetuning.tasks.encoding import encode, make_loader
    from electra.finetuning.tasks.glue.tasks import TASKS
    from electra.finetuning.tasks.sources import Examples
    model, tok = tiny_random
    texts = ['the movie was good', 'bad film', 'very good', 'not good', 'the cow', 'a ship', 'the ship sails',
             'a cow eats bread', 'the film is bad', 'very very good .']
    ex = Examples(np.arange(10), texts, None, np.linspace(0, 5, 10))
    index = ExampleIndex(model, tok, ex, max_length=16)
    near = index.nearest_examples('the good movie', k=4)
    q = index.embed(['the good movie'])[0]
    cos = index.vectors @ q / (np.linalg.norm(index.vectors, axis=1) * np.linalg.norm(q))
    assert near['idx'].tolist() == np.argsort(-cos)[:4].tolist()
    assert near['similarity'].to_numpy() == pytest.approx(np.sort(cos)[::-1][:4], abs=1e-6)
    assert (near['similarity'] != near['similarity'].round(3)).any()
    torch.manual_seed(0)
    clf = ElectraClassifier(model.electra, 1).eval()
    out = predict_outputs(clf, make_loader(encode(ex, tok, 16), 4, False, 0))
    error = np.abs(out - ex.label)
    tolerance = float(np.sort(error)[4])  # the five largest errors are over it
    wrong = find_misclassified(clf, tok, TASKS['STS-B'], ex, max_length=16, tolerance=tolerance)
    assert wrong['idx'].tolist() == np.argsort(-error, kind='stable')[:5].tolist()
    assert wrong['error'].to_numpy() == pytest.approx(np.sort(error)[::-1][:5], abs=1e-6)
    assert wrong['prediction'].to_numpy() == pytest.approx(out[wrong['idx']], abs=1e-6)
    assert wrong['label'].tolist() == ex.label[wrong['idx']].tolist()


def test_explore_config_checks_keys():
    assert explore_config({'k': 3}).k == 3 and explore_config().model == ''
    with pytest.raises(ConfigError, match="unknown key 'word'. Did you mean 'words'"):
        explore_config({'word': ['cow']})
    with pytest.raises(ConfigError, match=r"^overrides: key 'generate': \[\] is not a non-empty list of strings \(words of "
                                          r"`text` the generator fills in"):
        explore_config({'generate': []})  # nothing to sample: the list's own domain (numbers: tests/config/test_domains.py)
    with pytest.raises(ConfigError, match=r"^overrides: key 'replace_with': expected a string, got \['a'\]"):
        explore_config({'replace_with': ['a']})



# -- a fine-tuned run opened for the notebook: its own tokenizer, its own data, its task from its task file

def _finetuned(tmp_path, data, tiny, tiny_dir, task: str) -> tuple:
    "One run of `task` fine-tuned from the tiny discriminator (saved in `tiny_dir`), and its results row."
    from electra.finetuning import sweep
    from electra.finetuning.tasks.glue.sources import open_source
    from tests.support.finetune import job
    cfg = job(tmp_path, data, model=str(tiny_dir), tasks=[task], epochs=2, lr=1e-3, predict=False)
    row = sweep.run_sweep(cfg, *tiny, open_source(str(data)) if data != 'none' else None, log=lambda s: None).df.iloc[0]
    return Path(row['checkpoint']), row


def test_open_finetuned_scores_with_the_runs_own_tokenizer_and_data(tmp_path, glue_dir, tiny, tiny_dir):
    """R3-1, R3-3 of fresh eyes round 3: the classifier was fed the tokenizer of the `model` setting (another model's:
    wrong predictions, or an IndexError) and the dev set of the `data` setting (the demo's, whatever the run was
    fine-tuned on). Now its mistakes are those its own dev accuracy counts, whatever `model` says."""
    ckpt, row = _finetuned(tmp_path, glue_dir, tiny, tiny_dir, 'SST-2')
    run = open_finetuned(ckpt)
    assert run.tokenizer.get_vocab() == tiny[1].get_vocab() and run.data == str(glue_dir.resolve())
    dev = run.load('dev')
    assert list(dev.text_a) == [l.split('\t')[0] for l in (glue_dir / 'SST-2' / 'dev.tsv').read_text().splitlines()[1:]]
    wrong = find_misclassified(run.model, run.tokenizer, run.task, dev, run.max_length)
    assert len(wrong) == round((100 - row['accuracy']) / 100 * len(dev))  # the sweep's own dev accuracy, counted again
    with pytest.raises(ConfigError) as e:
        open_finetuned(ckpt, data='demo', cache_dir=tmp_path / 'cache2')
    assert str(e.value) == (f"data: demo ({(tmp_path / 'cache2' / 'demo_glue').resolve()}) is not what {ckpt} was "
                            f"fine-tuned on ({glue_dir.resolve()}); leave `data` empty to read the run's own.")
    assert open_finetuned(ckpt, data=str(glue_dir)).data == str(glue_dir.resolve())
    torch.save({**torch.load(ckpt, weights_only=True), 'pretrained_fingerprint': '0' * 16}, tmp_path / 'moved.pth')
    with pytest.raises(ConfigError, match=re.escape(f"{tmp_path / 'moved.pth'}: {tiny_dir} is not the model this run was "
                                                    "fine-tuned from (its files changed since)")):
        open_finetuned(tmp_path / 'moved.pth')  # its tokenizer may be another: the classifier's ids would mean other tokens


def test_open_finetuned_runs_of_a_task_file_and_refuses_other_kinds_in_one_line(tmp_path, tiny, tiny_dir):
    "R3-4: a task-file run ended in `KeyError: 'myml'` (its task looked up among GLUE's)."
    rows = 'sentence,label\n' + ''.join(f'the {w} film,{"good" if i % 2 else "bad"}\n'
                                        for i, w in enumerate(['good', 'bad', 'cow', 'ship', 'bread', 'three'] * 3))
    (tmp_path / 'train.csv').write_text(rows), (tmp_path / 'dev.csv').write_text(rows)
    spec = tmp_path / 'myml.yaml'
    spec.write_text('train: train.csv\ndev: dev.csv\ntext: sentence\nlabel: label\n')
    ckpt, row = _finetuned(tmp_path, 'none', tiny, tiny_dir, str(spec))
    run = open_finetuned(ckpt)
    assert (run.task.name, run.task.labels, run.data) == ('myml', ('bad', 'good'), str(spec.resolve()))
    dev = run.load('dev')
    assert list(dev.text_a) == [l.split(',')[0] for l in rows.splitlines()[1:]]
    wrong = find_misclassified(run.model, run.tokenizer, run.task, dev, run.max_length)
    assert len(wrong) == round((100 - row['accuracy']) / 100 * len(dev))
    saved = torch.load(ckpt, weights_only=True)
    torch.save({**saved, 'kind': 'tagging'}, tmp_path / 'tagged.pth')
    with pytest.raises(ConfigError, match=r"^[^\n]*tagged\.pth: a tagging run: the Explore helpers analyse classification "
                                          r"and regression runs \(GLUE tasks and task files of those kinds\)\.$"):
        open_finetuned(tmp_path / 'tagged.pth')


@pytest.mark.parametrize('word', ['日本', ',', 'cow,'], ids=['wholly-unknown', 'punctuation-unknown', 'partly-unknown'])
def test_a_word_the_vocabulary_reads_as_unk_is_refused_not_looked_up_as_unk(word):
    """R9-7: nearest_tokens('日本') and nearest_tokens(',') gave one and the same table, the neighbours of the [UNK]
    embedding (exact cosine of row 1), as if they were each word's; a word read partly as [UNK] mixed [UNK]'s row into
    its mean. Now each lookup (the table, `neighbours`, the token map's star) refuses it in one line."""
    import transformers
    from electra.tools.pictures import token_map
    vocab = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'cow', 'ship', 'bread', 'sail', '##s', 'eat', 'bake']
    tok = transformers.ElectraTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})
    pieces = tok.tokenize(word)                                     # the tokenizers library's own reading of it
    assert '[UNK]' in pieces and (word != 'cow,' or pieces == ['cow', '[UNK]'])
    index = TokenIndex(np.random.default_rng(0).standard_normal((len(vocab), 8)).astype(np.float32), tok)
    said = (f"words: {word!r} is unknown to the vocabulary (read as {' '.join(pieces)}): it has no embedding of its "
            "own, and the neighbours of [UNK]'s are not its. Give words the tokenizer reads without [UNK].")
    for lookup in (lambda: index.nearest_tokens(word, 3), lambda: index.neighbours(['cow', word], 3),
                   lambda: token_map(index, ['cow', word], 2)):
        with pytest.raises(ConfigError) as e:
            lookup()
        assert str(e.value) == said
    assert list(index.nearest_tokens('sails', 2)['token'])  # a word of known pieces is looked up as before


def test_an_unknown_key_of_the_notebook_s_config_names_its_keys_not_a_help_it_has_not():
    """R9-5: `explore_config({'kk': 1})` said "Run with --help for the list of keys"; a notebook has no --help. The
    pointer depends on where the keys come from: a notebook's overrides are told the keys of its config class."""
    import dataclasses
    from electra.tools.explore import ExploreConfig
    keys = ', '.join(f.name for f in dataclasses.fields(ExploreConfig))
    with pytest.raises(ConfigError) as e:
        explore_config({'kk': 1})
    assert str(e.value) == (f"overrides: unknown key 'kk'. Did you mean 'k'? The keys of "
                            f"electra.tools.explore.ExploreConfig: {keys}.")
    assert keys.startswith('model, finetuned, data, cache_dir, generator, text,') and keys.endswith('mistake, seed')


def test_a_mistake_past_the_dev_set_s_mistakes_is_refused_naming_their_count():
    """R9-5: `explore_config({'mistake': 10000})` with 73 mistakes was accepted and the notebook silently analysed the
    last one (`min(cfg.mistake, len(mistakes) - 1)`). Now `mistake_at`, where the mistakes are known, refuses it in
    one line naming their count; the notebook calls it."""
    import json
    import pandas as pd
    from electra.tools.explore import mistake_at
    mistakes = pd.DataFrame({'idx': [7, 3, 9], 'p(prediction)': [0.9, 0.8, 0.6]}, index=[4, 1, 8])
    assert mistake_at(mistakes, 0)['idx'] == 7 and mistake_at(mistakes, 2)['idx'] == 9  # by confidence, as listed
    with pytest.raises(ConfigError) as e:
        mistake_at(mistakes, 10000)
    assert str(e.value) == ("mistake: 10000 is past the 3 dev mistakes (0 is the most confident, 2 the least): give "
                            "0 to 2.")
    code = ''.join(''.join(c['source']) for c in json.loads((REPO / 'notebooks' / 'Explore.ipynb').read_text())['cells'])
    assert 'mistake_at(mistakes, cfg.mistake)' in code and 'min(cfg.mistake' not in code


def test_the_helpers_refuse_a_tokenizer_that_is_not_the_models_and_open_finetuned_one_not_its_runs(tmp_path, glue_dir,
                                                                                                  tiny, tiny_dir):
    """The notebook's helpers fed a model ids of another tokenizer (the same words in another order) silently: a
    pretrained discriminator's word-embedding neighbours and its view of a text, a fine-tuned classifier's outputs,
    mistakes and [CLS] vectors. Each refuses it in one line naming the fix; the model's own vocabulary read otherwise
    (transformers' AutoTokenizer) is accepted. A run fine-tuned from a model built in memory with another tokenizer
    than its `model`'s is refused by `open_finetuned` (it would hand the classifier its start model's)."""
    import copy
    import transformers
    from electra.finetuning import sweep
    from electra.finetuning.loading import load_pretrained
    from electra.finetuning.tasks.glue.sources import open_source
    from electra.tools.token_view import view_text
    from tests.support.finetune import job
    model, own = load_pretrained(str(tiny_dir))
    swapped = reordered(own)
    fix = "Give the tokenizer load_pretrained returns with the model (of a fine-tuned run: open_finetuned's tokenizer)."
    vocab = f"its vocabulary ({len(own)} tokens) is not that of the model's tokenizer ({len(own)} tokens; 'a' is"
    for use in (lambda t: TokenIndex.from_model(model, t), lambda t: view_text(model, t, 'the cat .'),
                lambda t: cls_embeddings(model, t, ['the cat .'])):
        refused(lambda: use(swapped), f"tokenizer: the tokenizer given is not the one {tiny_dir} was saved with: {vocab}",
                fix)
        use(transformers.AutoTokenizer.from_pretrained(tiny_dir))
    ckpt, _ = _finetuned(tmp_path, glue_dir, tiny, tiny_dir, 'SST-2')
    run = open_finetuned(ckpt)
    dev = run.load('dev')
    for use in (lambda t: find_misclassified(run.model, t, run.task, dev, run.max_length),
                lambda t: ExampleIndex(run.model, t, dev, run.max_length)):
        refused(lambda: use(swapped), "tokenizer: the tokenizer given is not the one the model was trained with: its "
                                      "tokens, their ids or what it does to its input are not those of the model's "
                                      "tokenizer", fix)
        use(transformers.AutoTokenizer.from_pretrained(tiny_dir))
    built = copy.deepcopy(tiny[0])  # a model built in memory: its tokenizer is the one it is given
    del built.electra_tokenizer, built.electra_tokenizer_identity
    cfg = job(tmp_path / 'other', glue_dir, model=str(tiny_dir), tasks=['SST-2'], predict=False)
    row = sweep.run_sweep(cfg, built, swapped, open_source(str(glue_dir)), log=lambda s: None).df.iloc[0]
    folder = Path(row['checkpoint']).with_suffix('')  # its transformers folder, with the tokenizer it read
    assert transformers.AutoTokenizer.from_pretrained(folder).get_vocab() == swapped.get_vocab()
    refused(lambda: open_finetuned(row['checkpoint']),
            f"{row['checkpoint']}: the tokenizer of {tiny_dir} is not the one this run was fine-tuned with: its tokens, "
            "their ids or what it does to its input are not those of the run's tokenizer",
            f"Fine-tune again from {tiny_dir} with its own tokenizer (load_pretrained returns both); its transformers "
            f"folder {folder} holds the one it read, for the helpers of electra.tools.explore.")
