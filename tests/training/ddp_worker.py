"""One tiny pretraining fit, as one process or as one rank of a torchrun job, for `test_distributed.py`: the same global
batches of uneven lengths, masks and samples keyed to the global example (each row masked by a generator seeded
from its own tokens; constant sampling noise, so samples are the generator's argmax) and no dropout, so that any
split of the batch over processes must give the same parameters. Each FIT is one such fit, from the same seed;
rank 0 saves each model's state and metrics to its OUT. Several fits share one job: starting the processes costs
more than the fits.

    python ddp_worker.py OUT,BATCH_SIZE,LOSS_MEAN,GRAD_ACCUM_STEPS[,OBJECTIVE[,TWO_STAGE]] ...   # one process
    python -m torch.distributed.run --nproc_per_node 2 ddp_worker.py FIT ...         # two
"""
import dataclasses
import sys
import tempfile
from pathlib import Path

import datasets
import numpy as np
import torch

from electra.config.pretrain import PretrainConfig
from electra.data.batches import pretraining_dataloader
from electra.objective.masking import MaskedInputs
from electra.objective.model import build_pretraining_model
from electra.pretraining.learner import pretraining_learner
from tests.support.baseline import BenchTokenizer
from electra.training.distributed import finish_distributed, init_distributed
from tests.support.tiny import token_ids
import electra.pretraining.step as step_module

VOCAB, LENGTH = 160, 32
STEP_CALLS = []  # one entry per call of `pretraining_step`: the step function is what ran


def patch_step() -> None:
    """In the worker process only (never on import: tests import this module in the pytest process, whose other tests
    need the real step): count `pretraining_step`'s calls, and constant sampling noise, so that the samples are the
    generator's argmax, whatever process a row is in."""
    real = step_module.pretraining_step
    step_module.pretraining_step = lambda *args: STEP_CALLS.append(1) or real(*args)
    step_module.sampling_noise = lambda model, positions, rng: torch.full(model.noise_shape(positions), 0.5)


def examples(n: int = 64, seed: int = 0) -> datasets.Dataset:
    "`[CLS] words [SEP]` examples of 6 to 32 tokens: processes holding the same number of rows hold unequal tokens."
    rng = np.random.default_rng(seed)
    ids = [[101] + rng.integers(104, VOCAB, int(k) - 2).tolist() + [102] for k in rng.integers(6, LENGTH + 1, n)]
    return datasets.Dataset.from_dict({'input_ids': ids, 'token_type_ids': [[0] * len(x) for x in ids]})


class PerExample:
    "The step's masking with randomness keyed to each example, not to the process's stream."

    def __init__(self, masking): self.masking = masking

    def __getattr__(self, name): return getattr(self.masking, name)  # its settings (special ids, ...) as they are

    def __call__(self, input_ids, rng):
        rows = [self.masking(row[None], torch.Generator().manual_seed(int(row.sum()))) for row in input_ids]
        return MaskedInputs(*(torch.cat(parts) for parts in zip(*rows)))


def config(batch_size: int, loss_mean: str = 'global', grad_accum_steps: int = 1, objective: str = 'electra',
           two_stage: float = 0.0):
    # two-stage training: the generator the discriminator's size, nothing tied (the config's rule)
    stages = dict(two_stage=two_stage, generator_size=1.0, tie_weights='none') if two_stage else {}
    return dataclasses.replace(PretrainConfig(), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=64, embedding_size=32, max_length=LENGTH, batch_size=batch_size,
                               steps=4, warmup_steps=0, lr=1e-3, dropout=0.0, log_every=2, checkpoint_at=[],
                               loss_mean=loss_mean, grad_accum_steps=grad_accum_steps, vocab_size=VOCAB,
                               objective=objective, **stages)


def initial_model(cfg):
    torch.manual_seed(0)
    return build_pretraining_model(cfg, token_ids(VOCAB, mask=103))


def fit(procs, batch_size: int, loss_mean: str, grad_accum_steps: int, objective: str = 'electra',
        two_stage: float = 0.0) -> dict:
    "One fit of 4 steps from seed 0: the model's state, (rank 0) its metrics.csv, this process's step calls."
    cfg = config(batch_size, loss_mean, grad_accum_steps, objective, two_stage)
    model, calls = initial_model(cfg), len(STEP_CALLS)
    dl = pretraining_dataloader(examples(), cfg.batch_size, LENGTH, 0, 0, cfg.steps, rank=procs.rank,
                                world_size=procs.size)
    with tempfile.TemporaryDirectory(prefix=f'ddp_worker_{procs.rank}_') as tmp:  # removed before the process ends
        learn = pretraining_learner(cfg, model, BenchTokenizer(VOCAB), dl, Path(tmp), torch.device('cpu'), 'fp32')
        step = learn.pretraining_step
        step.constants = dataclasses.replace(step.constants, masking=PerExample(step.constants.masking))
        learn.fit(1)
        metrics = (Path(tmp) / 'metrics.csv').read_text() if procs.rank == 0 else ''
    return {'model': model.state_dict(), 'metrics': metrics, 'step_calls': len(STEP_CALLS) - calls}


def main(fits: list[str]) -> None:
    procs = init_distributed(torch.device('cpu'))
    done = []
    for spec in fits:
        out, batch_size, loss_mean, grad_accum_steps, *rest = spec.split(',')
        objective, two_stage = (*rest, *['electra', '0'][len(rest):])  # the defaults of what is not given
        done.append((out, fit(procs, int(batch_size), loss_mean, int(grad_accum_steps), objective, float(two_stage))))
    finish_distributed()  # every process leaves the group before any exits; the others end here
    if procs.rank == 0:
        for out, state in done: torch.save(state, out)


if __name__ == '__main__':
    patch_step()
    main(sys.argv[1:])
