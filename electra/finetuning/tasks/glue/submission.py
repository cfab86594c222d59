"""Test predictions in the format the GLUE site accepts, and the zip that holds them.

Each file is `<stem>.tsv` with the header `index<TAB>prediction` and one line per test example in test-set
order: the example's own index, then the label string (`entailment`, `0`, ...) or, for STS-B, the score clamped
to [0, 5]. The zip holds the files flat at its root, as the GLUE site expects.
"""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from electra.finetuning.tasks.base import TaskInfo
from electra.finetuning.tasks.glue.tasks import TASKS
from electra.runtime.files import atomic_write_bytes, atomic_write_text
from electra.runtime.processes import is_main_process

__all__ = ['SUBMISSION_FILES', 'SUBMISSION_ZIP', 'write_predictions', 'zip_submission']

# every file of a full submission, in the order of the GLUE site
SUBMISSION_FILES = [f'{stem}.tsv' for t in TASKS.values() for _, stem in t.test_files]
SUBMISSION_ZIP = 'glue_submission.zip'  # the zip of them, beside them


def write_predictions(path: str | Path, task: TaskInfo, idx: np.ndarray, outputs: np.ndarray) -> Path:
    """Write one submission file: `outputs` are class ids (or STS-B scores), one per example of `idx`, in test order."""
    path, idx, outputs = Path(path), np.asarray(idx), np.asarray(outputs)
    if len(idx) != len(outputs): raise ValueError(f'{path.name}: {len(idx)} test examples but {len(outputs)} predictions')
    if task.is_regression:
        values = [f'{v:.3f}' for v in np.clip(outputs.astype(np.float64), 0.0, 5.0)]
    else:
        values = [task.labels[int(i)] for i in outputs]
    lines = ['index\tprediction'] + [f'{int(i)}\t{v}' for i, v in zip(idx, values)]
    if is_main_process(): atomic_write_text('\n'.join(lines) + '\n', path)
    return path


def zip_submission(folder: str | Path, name: str = SUBMISSION_ZIP) -> Path | None:
    """Zip the submission files present in `folder` (flat, at the zip's root) into `folder/name`; None, and no zip
    (one left from before removed), when it holds none: an empty zip is a submission the GLUE site rejects."""
    folder = Path(folder)
    out, files = folder / name, [f for f in SUBMISSION_FILES if (folder / f).is_file()]
    if not files:
        if is_main_process(): out.unlink(missing_ok=True)
        return None
    if is_main_process():
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, 'w', compression=zipfile.ZIP_DEFLATED) as z:
            for fname in files: z.write(folder / fname, arcname=fname)
        atomic_write_bytes(buf.getvalue(), out)
    return out
