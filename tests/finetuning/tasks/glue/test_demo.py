"""electra/finetuning/tasks/glue/demo.py: the demo GLUE data, read by the readers."""
from __future__ import annotations

from electra.finetuning.tasks.glue.sources import TsvSource, open_source
from electra.finetuning.tasks.glue.tasks import TASKS


def test_demo_tasks_load_through_the_readers(tmp_path):
    from electra.finetuning.tasks.glue.demo import write_demo_glue
    src = open_source(str(write_demo_glue(tmp_path, sizes={'train': 60, 'dev': 30, 'test': 10})))
    assert isinstance(src, TsvSource)
    for task in TASKS.values():
        for split in task.splits:
            ex = src.load(task, split)
            assert len(ex) == (60 if split == 'train' else 30 if split.startswith('dev') else 10), (task.name, split)
            if split.startswith('test'): continue
            if task.is_regression: assert ex.label.min() < 1.5 and ex.label.max() > 3.5
            else: assert set(ex.label.tolist()) == set(range(task.n_outputs)), (task.name, split)  # every class occurs
    assert (tmp_path / 'MRPC/train.tsv').read_bytes().startswith(b'\xef\xbb\xbfQuality')  # like the real download
