"""Fine-tuning helpers: a job config for the tiny model, that model saved with a config that says BERT, and the
driver `finetune.py` run in this process."""
from __future__ import annotations

from pathlib import Path

from electra.config.finetune import FinetuneConfig
from electra.config.values import config_from_dict
from tests.support.pretrain import run_driver


def job(tmp_path, data, **kw) -> FinetuneConfig:
    "A job's config of these values (a value None: the key not set, so that a task kind's default fills it)."
    values = dict(model='tiny', data=str(data), runs=1, epochs=1, group='t', output_dir=str(tmp_path / 'ckpt'),
                  test_output_dir=str(tmp_path / 'out'), cache_dir=str(tmp_path / 'cache'), task_overrides={},
                  device='cpu', max_length=64)
    return config_from_dict(FinetuneConfig, {k: v for k, v in {**values, **kw}.items() if v is not None})


def saved_as_bert(tiny, path: Path) -> Path:
    "The tiny model and its tokenizer saved to `path`, with a config.json that says BERT."
    import json
    model, tok = tiny
    model.save_pretrained(path)
    tok.save_pretrained(path)
    cfg = json.loads((path / 'config.json').read_text())
    (path / 'config.json').write_text(json.dumps({**cfg, 'model_type': 'bert', 'architectures': ['BertModel']}))
    return path


def finetune_in_process(*argv: str) -> dict:
    """Run finetune.py in this process, from the repository root (what it prints is in capsys): the driver's globals.
    An error is raised as it is (the one-line form of tests/test_finetune.py's script runs is `friendly_errors`')."""
    return run_driver('finetune.py', list(argv))
