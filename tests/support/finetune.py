"""Fine-tuning helpers: a job config for the tiny model, and that model saved with a config that says BERT."""
from __future__ import annotations

from pathlib import Path

from electra.config.base import config_from_dict
from electra.config.finetune import FinetuneConfig


def job(tmp_path, data, **kw) -> FinetuneConfig:
    values = dict(model='tiny', data=str(data), runs=1, epochs=1, group='t', output_dir=str(tmp_path / 'ckpt'),
                  test_output_dir=str(tmp_path / 'out'), cache_dir=str(tmp_path / 'cache'), task_overrides={},
                  device='cpu', max_length=64)
    return config_from_dict(FinetuneConfig, {**values, **kw})


def saved_as_bert(tiny, path: Path) -> Path:
    "The tiny model and its tokenizer saved to `path`, with a config.json that says BERT."
    import json
    model, tok = tiny
    model.save_pretrained(path)
    tok.save_pretrained(path)
    cfg = json.loads((path / 'config.json').read_text())
    (path / 'config.json').write_text(json.dumps({**cfg, 'model_type': 'bert', 'architectures': ['BertModel']}))
    return path
