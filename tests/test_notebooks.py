"""The notebooks are the source of the driver scripts: notebooks stored without outputs, every notebook executed top
to bottom on the demo config cut small (nbclient, a fresh kernel, a time bound), and the script path with command-line
flags. The export check itself (`electra.tools.notebooks`) is tested in tests/tools/test_notebooks.py."""
from __future__ import annotations

import csv
import html
import importlib
import importlib.util
import json
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from electra.tools import notebooks
from tests.support.notebook_runs import NOTEBOOKS, REPO, execute_notebook, has_image, outputs_text, tiny_pretraining

TIME_BOUND_S = 150  # per notebook, kernel start included; about 30-60 s on 2 free cores


def is_module(name: str) -> bool:
    try: return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError: return False  # its parent is a module, not a package


def test_every_module_and_file_of_the_library_a_notebook_names_exists():
    """Each `electra/...` file and `electra.x.y` module (or its attribute) named in a notebook's text or code is
    there: a module moved in the library leaves no dangling name behind."""
    names = 0
    for nb in sorted(NOTEBOOKS.glob('*.ipynb')):
        text = '\n'.join(c.source for c in nbformat.read(str(nb), as_version=4).cells)
        for path in re.findall(r'\belectra/[\w/]+\.py\b', text):
            assert (REPO / path).is_file(), f'{nb.name} names {path}, which does not exist'
            names += 1
        for dotted in re.findall(r'\belectra(?:\.\w+)+', text):
            parts, n = dotted.split('.'), 1
            while n < len(parts) and is_module('.'.join(parts[:n + 1])): n += 1
            obj = importlib.import_module('.'.join(parts[:n]))
            for attr in parts[n:]:
                assert hasattr(obj, attr), f'{nb.name} names {dotted}, which does not exist'
                obj = getattr(obj, attr)
            names += 1
    assert names > 20


def test_notebooks_stored_without_outputs_with_a_parameters_cell():
    names = sorted(p.name for p in NOTEBOOKS.glob('*.ipynb'))
    assert names == ['Explore.ipynb', 'Finetune_GLUE.ipynb', 'Pretrain.ipynb']
    for name in names:
        nb = nbformat.read(str(NOTEBOOKS / name), as_version=4)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == 'code']
        assert all(not c.outputs and c.execution_count is None for c in code), name
        params = [c for c in code if 'parameters' in c.metadata.get('tags', [])]
        assert len(params) == 1 and params[0].source.startswith('overrides = {}'), name
        assert nb.metadata['kernelspec']['name'] == 'python3'
    for _, script in notebooks.PAIRS:
        text = (REPO / script).read_text()
        assert 'jupytext_version' not in text and '# %% tags=["parameters"]\noverrides = {}' in text


@pytest.fixture(scope='module')
def pretrained(tmp_path_factory) -> dict:
    "pretrain.py run as a script with command-line flags (the demo preset cut to 20 steps)."
    return tiny_pretraining(tmp_path_factory)


def test_pretrain_script_path(pretrained):
    out, run_dir = pretrained['stdout'], Path(pretrained['run_dir'])
    assert 'starting at step 0 of 20' in out                                    # the flags reached the config
    assert 'A: [CLS]' in out and '| B: ' in out                                 # examples with their segments
    assert '→[MASK]»' in out                                                    # a batch before and after masking
    assert "the generator's samples" in out and 'p(replaced)' in out            # samples and the verdict per token
    assert f'loss curves: {run_dir / "losses.png"}' in out and (run_dir / 'losses.png').is_file()
    assert (run_dir / 'discriminator' / 'config.json').is_file() and Path(pretrained['checkpoint']).is_file()


def test_a_bert_run_of_the_script_prints_its_mlm_and_no_generator(tmp_path, pretrained):
    """pretrain.py with the README's BERT row (`--config demo,bert`, objective mlm: no generator): its lines, parsed,
    name the network and its MLM head, the MLM loss and accuracy, and no generator, nan, replaced P/R or tables of
    samples and verdicts (R9-6); the numbers are metrics.csv's."""
    from tests.support.notebook_runs import run_in_process
    out = run_in_process('pretrain.py', '--config', 'demo,bert', '--run_name', 'bert', '--steps', '2', '--log_every',
                         '2', '--batch_size', '4', '--warmup_steps', '1', '--eval_examples', '8', '--device', 'cpu',
                         '--output_dir', tmp_path, '--cache_dir', pretrained['cache_dir'])
    assert re.search(r'^the network \d\.\d\dM parameters, the network \+ its MLM head \d\.\d\dM$', out, re.M), out
    line = re.search(r'^step 2: loss (\S+) \(mlm (\S+)\) mlm_acc (\S+) lr \S+ \S+ steps/s$', out, re.M)
    row = next(csv.DictReader((tmp_path / 'bert_11081' / 'metrics.csv').open()))
    assert line and [float(v) for v in line.groups()] == [round(float(row[k]), 4) for k in ('loss', 'disc_loss',
                                                                                           'disc_accuracy')], out
    assert re.search(r'^step 2 held-out: mlm acc \S+ at the masked positions \(always the most frequent token \S+\); loss mlm \S+$', out, re.M), out
    for absent in ('generator', 'gen ', 'gen_acc', 'nan', 'P/R', 'p(replaced)', 'Empty DataFrame'):
        assert absent not in out.replace('no generator and no replaced tokens', ''), absent
    assert 'objective mlm: no generator and no replaced tokens to show' in out


def test_pretrain_notebook_executes(tmp_path, pretrained):
    overrides = {'steps': 8, 'batch_size': 8, 'log_every': 4, 'warmup_steps': 2, 'run_name': 'notebook',
                 'device': 'cpu', 'output_dir': str(tmp_path / 'ckpt'), 'cache_dir': pretrained['cache_dir']}
    nb, seconds = execute_notebook(NOTEBOOKS / 'Pretrain.ipynb', overrides, TIME_BOUND_S)
    assert seconds < TIME_BOUND_S
    text = outputs_text(nb)
    assert 'starting at step 0 of 8' in text                                   # the notebook's config cell, not argv
    assert 'A: [CLS]' in text and '→[MASK]»' in text and 'p(replaced)' in text
    assert has_image(nb)                                                        # the loss curves
    run_dir = tmp_path / 'ckpt' / 'notebook_11081'
    assert (run_dir / 'discriminator' / 'config.json').is_file() and (run_dir / 'losses.png').is_file()


@pytest.fixture(scope='module')
def finetune_notebook(tmp_path_factory, pretrained):
    "Finetune_GLUE.ipynb executed from the tiny pretraining's checkpoint: 2 tasks, 1 run each, 1 epoch."
    tmp = tmp_path_factory.mktemp('finetune_notebook')
    overrides = {'model': pretrained['checkpoint'], 'tasks': ['SST-2', 'MRPC'], 'runs': 1, 'epochs': 1,
                 'max_train_samples': 200, 'group': 'nb', 'device': 'cpu', 'output_dir': str(tmp / 'glue'),
                 'test_output_dir': str(tmp / 'test_outputs'), 'cache_dir': str(tmp / 'cache')}
    nb, seconds = execute_notebook(NOTEBOOKS / 'Finetune_GLUE.ipynb', overrides, TIME_BOUND_S)
    return tmp, nb, seconds


def test_finetune_notebook_executes(finetune_notebook, pretrained):
    tmp, nb, seconds = finetune_notebook
    assert seconds < TIME_BOUND_S
    text = outputs_text(nb)
    # the model line says where its pretraining was (R21a-3), as the checkpoint records it
    assert f"model: {pretrained['checkpoint']} (pretrained to step 20 of 20, a checkpoint of pretrain.py): " in text
    assert '| SST-2 | accuracy | 1 |' in text and '| MRPC | accuracy | 1 |' in text   # the summary
    assert 'train_loss' in text and has_image(nb)                                     # the runs table and the plot
    assert (tmp / 'glue/nb/results.csv').is_file() and (tmp / 'test_outputs/nb/glue_submission.zip').is_file()


# run in the executed Explore notebook's kernel: what its figures drew, read off the figures themselves, and the vectors
# they were drawn from, for the test to check against its own computation
EXPLORE_EPILOGUE = """
import json
offsets = lambda fig: {c.get_label(): c.get_offsets().tolist() for c in fig.axes[0].collections}
with open(DUMP, 'w') as f:
    json.dump({'example_map': offsets(map_figure), 'train_vectors': examples.vectors.tolist(),
               'dev_vectors': dev_vectors.tolist(), 'mean': examples.mean.tolist(), 'examined': examined,
               'token_map': offsets(token_figure), 'token_vectors': tokens.vectors.tolist(),
               'confusion': [t.get_text() for t in outcome.axes[0].texts],
               'confusion_labels': [t.get_text() for t in outcome.axes[0].get_yticklabels()],
               'max_length': max_length}, f)
"""


def view_spans(nb, name: str) -> list[tuple[str, float]]:
    "The tokens of the token view a cell tagged figure:<name> displayed, with the opacity of the red of each."
    [cell] = [c for c in nb.cells if f'figure:{name}' in c.metadata.get('tags', [])]
    [html] = [o['data']['text/html'] for o in cell.outputs if 'text/html' in o.get('data', {})]
    spans = re.findall(r'<span class="token" [^>]*rgba\(214, 39, 40, ([\d.]+)\)[^>]*>([^<]*)', html)
    return [(token, float(alpha)) for alpha, token in spans]


def pca_2d(x) -> np.ndarray:
    from sklearn.decomposition import PCA
    return PCA(n_components=2, svd_solver='full').fit_transform(np.asarray(x, dtype=np.float64))


@torch.no_grad()
def check_token_colours(nb, disc_dir: Path, text: str) -> None:
    "Each token view's colours are transformers' ElectraForPreTraining's probabilities on the very tokens shown."
    import transformers
    disc = transformers.ElectraForPreTraining.from_pretrained(disc_dir).eval()
    tok = transformers.AutoTokenizer.from_pretrained(disc_dir)
    for name in ('view_text', 'view_replaced', 'view_generated'):
        spans = view_spans(nb, name)
        ids = torch.tensor([tok.convert_tokens_to_ids([html.unescape(t) for t, _ in spans])])
        p = torch.sigmoid(disc(input_ids=ids).logits)[0].numpy()
        assert np.allclose([a for _, a in spans], p, atol=5e-4), name
    assert [html.unescape(t) for t, _ in view_spans(nb, 'view_text')] == tok.convert_ids_to_tokens(tok(text)['input_ids'])


@torch.no_grad()
def dev_confusion(finetuned: str, tok, dev, max_length: int) -> np.ndarray:
    "The fine-tuned classifier run here on each dev example alone (tokenized by transformers), its counts by numpy."
    from electra.finetuning.loading import load_finetuned
    clf = load_finetuned(finetuned).eval()
    counts = np.zeros((2, 2), int)
    for a, b, gold in zip(dev.text_a, dev.text_b, dev.label):
        enc = tok(a, b, truncation=True, max_length=max_length, return_tensors='pt')
        counts[int(gold), int(clf(enc['input_ids'], enc['attention_mask'], enc['token_type_ids']).argmax())] += 1
    return counts


def test_explore_notebook_executes(tmp_path, finetune_notebook, pretrained):
    """Explore.ipynb on the tiny pretraining and its MRPC run: every section ran without a warning, and its figures show
    what an independent computation gives (the maps scikit-learn's PCA of the vectors, the confusion matrix the
    classifier's own dev predictions, the token colours transformers' discriminator's probabilities)."""
    import transformers

    from electra.finetuning.sweep import resolve_data
    from electra.finetuning.tasks.glue.tasks import TASKS
    from electra.tools.figures import save_figures
    tmp, _, _ = finetune_notebook
    finetuned, dump = str(tmp / 'glue/nb/MRPC_0.pth'), tmp_path / 'drawn.json'
    overrides = {'finetuned': finetuned, 'cache_dir': str(tmp / 'cache'), 'k': 5}
    nb, seconds = execute_notebook(NOTEBOOKS / 'Explore.ipynb', overrides, TIME_BOUND_S,
                                   epilogue=f'DUMP = {str(dump)!r}\n{EXPLORE_EPILOGUE}')
    assert seconds < TIME_BOUND_S
    text = outputs_text(nb)
    assert 'MRPC, fine-tuned from' in text and 'nearest tokens' in text and 'generator: ElectraForMaskedLM' in text
    assert 'token index: recall@10' in text and 'training examples indexed; recall@10' in text
    assert 'dev examples of MRPC predicted wrong' in text
    outputs = [o for c in nb.cells for o in c.get('outputs', [])]
    assert not [o for o in outputs if o.get('name') == 'stderr' or o.get('output_type') == 'error']
    assert not re.search(r'warn', text, re.IGNORECASE)                         # IProgress, deprecations, ...
    names = ['view_text', 'view_replaced', 'view_generated', 'token_map', 'dev_outcome', 'example_map']
    assert [p.name for p in save_figures(nb, tmp_path / 'figures')] == [f'{n}.png' for n in names]
    assert all((tmp_path / 'figures' / f'{n}.png').read_bytes().startswith(b'\x89PNG') for n in names)
    drawn = json.loads(dump.read_text())
    disc_dir = Path(pretrained['run_dir']) / 'discriminator'
    tok = transformers.AutoTokenizer.from_pretrained(disc_dir)
    check_token_colours(nb, disc_dir, 'the teacher reads three books in the classroom .')
    # the map of [CLS] vectors: scikit-learn's PCA of the training and dev vectors, split by label as drawn
    train, dev = (resolve_data('demo', str(tmp / 'cache')).load(TASKS['MRPC'], s) for s in ('train', 'dev'))
    ref, n = pca_2d(drawn['train_vectors'] + drawn['dev_vectors']), len(train)
    m = drawn['example_map']
    for label, name in enumerate(TASKS['MRPC'].names):  # by name (R9-4): not_equivalent, equivalent
        assert np.allclose(m[f'train: {name}'], ref[:n][train.label == label], atol=1e-5)
        assert np.allclose(m[f'dev: {name}'], ref[n:][dev.label == label], atol=1e-5)
    assert np.allclose(m['the examined example'], ref[[n + drawn['examined']]], atol=1e-5)
    # ... of the vectors the classifier reads: its body's [CLS] state, here by transformers' own ElectraModel
    from electra.finetuning.loading import load_finetuned
    enc = tok(dev.text_a[3], dev.text_b[3], truncation=True, max_length=drawn['max_length'], return_tensors='pt')
    with torch.no_grad(): cls = load_finetuned(finetuned).eval().electra(**enc).last_hidden_state[0, 0].numpy()
    assert np.allclose(np.array(drawn['dev_vectors'][3]) + drawn['mean'], cls, atol=1e-4)
    # the confusion matrix: the counts of the classifier's own dev predictions, rows and columns by label name
    shown = np.array([int(t) for t in drawn['confusion']]).reshape(2, 2)
    assert np.array_equal(shown, dev_confusion(finetuned, tok, dev, drawn['max_length']))
    assert drawn['confusion_labels'] == ['not_equivalent', 'equivalent'] and shown.sum() == len(dev)
    # the token map: scikit-learn's PCA of every token's embedding; each looked-up word at its own row's projection
    from sklearn.decomposition import PCA
    pca = PCA(n_components=2, svd_solver='full').fit(np.asarray(drawn['token_vectors'], dtype=np.float64))
    assert np.allclose(drawn['token_map']['all tokens'], pca.transform(np.asarray(drawn['token_vectors'])), atol=1e-5)
    emb = transformers.ElectraForPreTraining.from_pretrained(disc_dir).electra.embeddings.word_embeddings.weight
    for w in ('cow', 'teacher'):
        vec = emb[tok(w, add_special_tokens=False)['input_ids']].mean(0).detach().numpy()[None].astype(np.float64)
        assert np.allclose(drawn['token_map'][f'word: {w}'], pca.transform(vec), atol=1e-5)
