"""The pretraining step, read top to bottom: `pretraining_step` masks the batch and draws the sampling noise, and
`learn_from` runs the generator, the sampling and the discriminator, takes the objective's losses and their gradients,
averages them over the processes of a torchrun job, clips them and updates the weights. Every preset and option
trains through these two functions, run by the Learner's one `TrainingStep` callback: eager or compiled (the model,
or with `compile_scope` step the whole of `learn_from` as one graph, CUDA graphs included), fp32, bf16 or fp16,
micro-batches, two-stage training, every objective variant, one process or several.

Official code: google-research/electra, run_pretraining.py (`PretrainingModel`) and model/optimization.py; the paper,
section 2 and equation 1. `electra/objective/reference.py` is the same step's losses without the options, and
`tests/pretraining/test_step.py` holds the two equal.
"""
from __future__ import annotations

import torch
from fastai.callback.core import CancelBatchException

from electra.config.base import ConfigError
from electra.objective.draws import CounterDraws
from electra.objective.loss import batch_statistics, loss_counts
from electra.objective.masking import MaskingSettings
from electra.objective.model import fp32
from electra.objective.sampling import TemperatureSchedule
from electra.training.distributed import is_distributed, loss_divisors
from electra.training.speed import try_compile
from electra.training.step import StepCallback, apply_gradients

__all__ = ['STEP_SUMS', 'pretraining_step', 'learn_from', 'TrainingStep']

# what a step sums for the metrics, in this order (`batch_statistics` and the losses), summed over its micro-batches
STEP_SUMS = ('loss', 'gen_loss', 'disc_loss', 'gen_correct', 'gen_total', 'disc_correct', 'disc_total', 'tp', 'fp', 'fn',
             'replaced', 'real', 'skipped')


def pretraining_step(s: TrainingStep, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
    """One optimizer step on this process's batch `input_ids`, `token_type_ids` [B, L]; returns its `STEP_SUMS` [13]
    on the device (nothing is read to the host)."""
    # 1. Masking, on the device: the official number of positions per row, 85% of them [MASK] (objective/masking.py),
    #    its draws from the run's seeded torch.Generator (outside any graph: a generator breaks one), or with
    #    random_draws 'counter' computed from the seed and the step, in a compiled graph of its own (objective/draws.py)
    m = s.mask(input_ids)                            # m.input_ids [B, L]; m.positions, m.labels [B, P] (-100: unused)
    # 2. What the two losses divide by: the whole step's counts (chosen positions, positions of the discriminator's
    #    loss), summed over the processes with loss_mean 'global', so the step is the global batch's in one process.
    counts = loss_counts(s.model.objective, m.input_ids, m.positions, m.labels, s.pad_token_id,
                         s.masking.special_tensor(input_ids.device))                                        # [2]
    divisors = loss_divisors(counts, s.loss_mean)                                                            # [2]
    # 3. The batch in `micro_batches` (grad_accum_steps) parts of b = B / n rows, run one after another: their
    #    gradients add up to the whole batch's, and the last one updates the weights.
    parts = list(zip(*(t.chunk(s.micro_batches) for t in (m.input_ids, token_type_ids, m.positions, m.labels))))
    # the generator's sampling temperature at this step, annealed by the schedule's formula (Fast-ELECTRA's
    # curriculum, objective/sampling.py `TemperatureSchedule`) at the steps taken; None: the constant `temperature`
    temperature = s.sampling_temperature(s.train_iter)
    grads, sums = None, 0
    for i, part in enumerate(parts):
        # the U(0, 1) draws of the sampling's Gumbel noise [b, P, V], next in the same stream (per part: [B, P, V]
        # at once is large), or counter draws of part i that compute them inside the step; none for BERT's objective
        shape = s.model.noise_shape(part[2])
        noise = None if shape is None else s.noise(shape, input_ids.device, i)
        last = i == len(parts) - 1
        grads, part_sums = s.step_fn(s.model, s.loss_func, part, noise, divisors, s.params, grads, s.dtype, s.scaler,
                                     (s.opt.opt, s.groups, s.lrs, s.max_norm) if last else None, temperature)
        sums = sums + part_sums
    return sums


def learn_from(model, loss_func, part: tuple, noise, divisors, params: list, grads, dtype, scaler, update,
               temperature=None):
    """Forward, losses and gradients of one part of the step's batch, added to `grads` (those of its earlier parts,
    or None); with `update` (the last part: the optimizer, its groups as (indices into `params`, settings), their
    rates, the clipping norm) the update of the weights; `temperature` this step's annealed sampling temperature (0-d)
    or None. Returns (the gradients, the part's `STEP_SUMS`)."""
    ids, token_type_ids, positions, labels = part                      # [b, L], [b, L], [b, P], [b, P]
    with torch.autocast(ids.device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
        # 4. The generator at the chosen positions, Gumbel-max sampling of replacements, the discriminator on the
        #    corrupted input (objective/model.py; what the objective changes is its row of config/objectives.py).
        pred = fp32(model(ids, token_type_ids, positions, labels, noise, temperature))  # the losses read fp32
        # 5. The objective's losses (objective/loss.py): L_gen + lambda L_disc, equation 1 (lambda = 50).
        gen_loss, disc_loss = loss_func.losses(pred, labels, divisors)                                   # 0-d
        loss = loss_func.gen_weight * gen_loss + loss_func.disc_weight * disc_loss
    # 6. The gradients of the trainable weights, in fp32 outside autocast (None: a weight this step did not use, as
    #    the discriminator in two-stage training's first stage); fp16 scales the loss first (loss scaling).
    new = torch.autograd.grad(loss if scaler is None else scaler.scale(loss), params, allow_unused=True)
    grads = list(new) if grads is None else [a if b is None else b if a is None else a + b for a, b in zip(grads, new)]
    with torch.no_grad():
        stats = {**batch_statistics(pred, labels, loss_func.objective.head), 'loss': loss, 'gen_loss': gen_loss, 'disc_loss': disc_loss}
    if update is None: return grads, stacked({**stats, 'skipped': loss.new_zeros(())})
    # 7.-10. training/step.py: under torchrun the average of the processes' gradients (a collective: never in a
    # graph); fp16's unscaling by GradScaler's rules, an overflow's update masked on the device (no host read);
    # clipping by the global norm (official: 1.0); ElectraAdam's update, the official Adam without bias correction
    stats['skipped'] = apply_gradients(grads, params, *update, scaler)
    return grads, stacked(stats)


def stacked(stats: dict[str, torch.Tensor]) -> torch.Tensor:
    "The `STEP_SUMS` of `stats` (0-d tensors) as one float64 vector [13], added up on the device."
    return torch.stack([stats[k].double() for k in STEP_SUMS]).detach()


class TrainingStep(StepCallback):
    """Runs every training step as `pretraining_step`, in place of fastai's forward, backward and optimizer step; holds
    what the step keeps from one to the next: the masking generator, the loss scale, the compiled `learn_from`."""

    def __init__(self, masking: MaskingSettings, seed: int, pad_token_id: int, micro_batches: int = 1,
                 loss_mean: str = 'global', max_norm: float = 1.0, precision: str = 'fp32', compile: str | None = None,
                 mode: str | None = None, backend='inductor', temperature: TemperatureSchedule | None = None,
                 random_draws: str = 'generator'):
        """`compile`: None (eager), 'model' (the model compiled) or 'step' (`learn_from` as one graph). `temperature`:
        the sampling temperature's schedule (None: constant). `random_draws`: 'generator' (the masking generator) or
        'counter' (`CounterDraws` of this process's `seed` and the step, inside the compiled step)."""
        if compile == 'step' and (precision == 'fp16' or is_distributed()):
            raise ConfigError("compile_scope: 'step' runs bf16 or fp32 in one process (fp16's loss scaler is not "
                              'traced, torchrun averages gradients between the backward and the update). Use '
                              '--compile_scope model (or auto).')
        super().__init__(learn_from, seed, precision, compile == 'step', mode, backend)
        self.masking, self.pad_token_id = masking, pad_token_id
        self.micro_batches, self.loss_mean, self.max_norm, self.scope = micro_batches, loss_mean, max_norm, compile
        self.mask_rng, self.rng_state = None, None
        self.schedule, self.step_temperature = temperature, None  # the schedule; this step's value (a tensor)
        self.random_draws, self.step_number, self.mask_fn = random_draws, None, None  # mask_fn: the compiled masking

    def before_fit(self):
        device = next(self.model.parameters()).device
        self.mask_rng = torch.Generator(device=device).manual_seed(self.seed)
        if self.rng_state is not None: self.mask_rng.set_state(self.rng_state)  # put back from a checkpoint
        super().before_fit()
        if self.schedule is not None and self.schedule.annealed:  # filled every step, read where it is (static)
            self.step_temperature = torch.zeros((), device=device)
            torch._dynamo.mark_static_address(self.step_temperature)
        if self.random_draws == 'counter':  # the counter draws' step in a compiled graph: filled, read where it is
            self.step_number = torch.zeros((), dtype=torch.int64, device=device)
            torch._dynamo.mark_static_address(self.step_number)

    def before_batch(self):
        state = self.mask_rng.get_state() if self.one_graph else None  # after a failed compilation: the same draws
        self.sums = self.run_step(lambda: pretraining_step(self, *self.xb), lambda: self._eager(state))
        self.learn.loss = self.sums[0]
        raise CancelBatchException  # fastai's own forward, backward and step are skipped; after_batch runs as usual

    def compile(self):
        """The model compiled in place (scope 'model'), or `learn_from` as one graph ('step'), else a one-line warning;
        with counter draws and scope 'step', the masking as a graph of its own (one CUDA graph with reduce-overhead)."""
        if self.scope != 'model':  # nothing to compile without a scope
            super().compile()
            if self.compiled and self.random_draws == 'counter':
                self.masking.special_tensor(self.xb[0].device)  # made before tracing: an input of the graph, not a new one
                kwargs = {'dynamic': False, **({} if self.mode is None else {'mode': self.mode})}
                self.mask_fn = torch.compile(self.masking.__call__, fullgraph=True, backend=self.backend, **kwargs)
            return
        self.compiled = try_compile([self.model], self._trial, self.backend, self.mode)

    def _eager(self, state: torch.Tensor | None):
        "After a failed compilation: the masking eager, the generator back where the failed step began."
        self.mask_fn = None
        if state is not None: self.mask_rng.set_state(state)

    def _trial(self):
        "One forward and backward that compiles the model, leaving no trace (random states restored, no update)."
        state, device = self.mask_rng.get_state(), self.mask_rng.device
        try:
            with torch.random.fork_rng(devices=[device] if device.type == 'cuda' else []):
                m = self.mask(self.xb[0])
                shape = self.model.noise_shape(m.positions)
                noise = None if shape is None else self.noise(shape, device, 0)
                params = [p for p in self.model.parameters() if p.requires_grad]
                learn_from(self.model, self.loss_func, (m.input_ids, self.xb[1], m.positions, m.labels), noise, None,
                           params, None, self.dtype, None, None, self.sampling_temperature(self.train_iter))
        finally: self.mask_rng.set_state(state)

    def sampling_temperature(self, step: int) -> torch.Tensor | None:
        "The schedule's temperature at `step` (steps taken) in the step's tensor, filled in place; None: constant."
        if self.step_temperature is None: return None
        return self.step_temperature.fill_(self.schedule(step))

    def counter(self, part: int, in_graph: bool) -> CounterDraws:
        """This step's counter draws for micro-batch `part`: the step an int, or for a compiled graph (`in_graph`) the
        tensor filled in place, so that the graph compiles once for every step."""
        return CounterDraws(self.seed, self.step_number.fill_(self.train_iter) if in_graph else self.train_iter, part)

    def mask(self, input_ids: torch.Tensor):
        "This step's masking of `input_ids` [B, L], its draws from the masking generator or the counter."
        if self.random_draws == 'generator': return self.masking(input_ids, self.mask_rng)
        if self.mask_fn is None: return self.masking(input_ids, self.counter(0, False))
        return self.mask_fn(input_ids, self.counter(0, True))

    def noise(self, shape: tuple, device: torch.device, part: int) -> torch.Tensor | CounterDraws:
        """U(0, 1) draws of `shape` for micro-batch `part`, next in the masking generator's stream; or counter draws,
        which compute them where the noise is used (inside the compiled model or step)."""
        if self.random_draws == 'counter': return self.counter(part, self.scope is not None)
        return torch.rand(shape, device=device, generator=self.mask_rng)

    def state(self) -> torch.Tensor | None:
        "The masking generator's state, for a checkpoint (None with counter draws: they follow from the step)."
        return self.mask_rng.get_state() if self.mask_rng is not None and self.random_draws == 'generator' else None
