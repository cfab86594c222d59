"""The notebooks are the source of the driver scripts: notebooks stored without outputs, every notebook executed top
to bottom on the demo config cut small (nbclient, a fresh kernel, a time bound), and the script path with command-line
flags. The export check itself (`electra.tools.notebooks`) is tested in tests/tools/test_notebooks.py."""
from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import nbformat
import pytest

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


def test_finetune_notebook_executes(finetune_notebook):
    tmp, nb, seconds = finetune_notebook
    assert seconds < TIME_BOUND_S
    text = outputs_text(nb)
    assert '| SST-2 | accuracy | 1 |' in text and '| MRPC | accuracy | 1 |' in text   # the summary
    assert 'train_loss' in text and has_image(nb)                                     # the runs table and the plot
    assert (tmp / 'glue/nb/results.csv').is_file() and (tmp / 'test_outputs/nb/glue_submission.zip').is_file()


def test_explore_notebook_executes(tmp_path, finetune_notebook):
    tmp, _, _ = finetune_notebook
    overrides = {'finetuned': str(tmp / 'glue/nb/MRPC_0.pth'), 'cache_dir': str(tmp / 'cache'), 'k': 5}
    nb, seconds = execute_notebook(NOTEBOOKS / 'Explore.ipynb', overrides, TIME_BOUND_S)
    assert seconds < TIME_BOUND_S
    text = outputs_text(nb)
    assert 'MRPC, fine-tuned from' in text and 'nearest tokens' in text
    assert 'token index: recall@10' in text and 'training examples indexed; recall@10' in text
    assert 'dev examples of MRPC predicted wrong' in text
