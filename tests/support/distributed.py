"""Running torchrun jobs in tests: the environment (offline, one thread, the repository importable), a free port, the
command (a tiny pretraining's among them), and comparing the state dicts the jobs save."""
import os
import socket
import subprocess
import sys
from pathlib import Path
from tests.support import forked
from tests.support.pretrain import flags


REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, 'HF_HUB_OFFLINE': '1', 'HF_DATASETS_OFFLINE': '1', 'OMP_NUM_THREADS': '1',
       'PYTHONPATH': str(REPO)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def torchrun(*args, n: int = 2) -> list[str]:
    # --standalone: a rendezvous on a free local port of torchrun's own choosing
    return [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', str(n), *map(str, args)]


# the demo's corpus with the tests' tiny model (tests/support/pretrain.py): a step takes milliseconds, so what these
# jobs cost is mostly starting the processes
TINY_MODEL = ['--max_length', 32, '--hidden_size', 32, '--num_hidden_layers', 2, '--num_attention_heads', 2,
              '--intermediate_size', 64, '--embedding_size', 32, '--generator_size', 0.5, '--vocab_size', 500,
              '--batch_size', 8, '--warmup_steps', 4, '--lr', '5e-4', '--eval_examples', 16]


def torchrun_pretrain(tmp_path: Path, *args) -> list[str]:
    "The torchrun command of a two-process pretraining of the tiny model, 120 steps, checkpoints at 50% and 100%."
    return torchrun(REPO / 'pretrain.py', *flags('--config', 'demo', *TINY_MODEL, '--device', 'cpu', '--steps', 120,
                                                 '--log_every', 10, '--checkpoint_at', '0.5,1.0', '--output_dir',
                                                 tmp_path / 'ckpt', '--cache_dir', tmp_path / 'cache', *args))


def run(cmd: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    res = forked.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res


def max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max((a[k].float() - b[k].float()).abs().max().item() for k in a)


def as_if_in_a_job(monkeypatch, size: int, others: float = 0.0) -> list:
    """This process as rank 0 of a torchrun job of `size` processes whose other processes' counts add up to `others`
    (what the all-reduce of a count adds), without a process group: for the fine-tuning losses' torchrun rules.
    Returns the list of the tensors given to the all-reduce."""
    from electra.finetuning import loss
    from electra.training import distributed
    w, reduced = type('World', (), {'size': size, 'rank': 0})(), []
    for m in (loss, distributed):
        monkeypatch.setattr(m, 'is_distributed', lambda: True)
        monkeypatch.setattr(m, 'world', lambda: w)
    monkeypatch.setattr(distributed, 'all_reduce_sum', lambda t: reduced.append(t.clone()) or t.add_(others))
    return reduced
