"""The pretraining step, read top to bottom: `pretraining_step` masks the batch and draws the sampling noise, and the
step function `learn_from` runs the generator, the sampling and the discriminator, takes the objective's losses and
their gradients, averages them over the processes of a torchrun job, clips them and updates the weights. Every preset
and option trains through these two functions, run by the Learner's one `PretrainingStep` callback: eager or compiled
(the model, or with `compile_scope` step the whole of `learn_from` as one graph, CUDA graphs included), fp32, bf16 or
fp16, micro-batches, two-stage training, every objective variant, one process or several. What they read is explicit:
the run's constants (`PretrainingConstants`), this step's state (`StepState`), the batch; they return what they
computed.

Official code: google-research/electra, run_pretraining.py (`PretrainingModel`) and model/optimization.py; the paper,
section 2 and equation 1. `electra/objective/reference.py` is the same step's losses without the options, and
`tests/pretraining/test_step.py` holds the two equal.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import torch
from fastai.callback.core import CancelBatchException

from electra.config.errors import ConfigError
from electra.objective.draws import CounterDraws
from electra.objective.loss import batch_statistics, loss_counts
from electra.objective.masking import MaskingSettings
from electra.objective.model import fp32
from electra.objective.sampling import TemperatureSchedule
from electra.training.distributed import is_distributed, loss_divisors
from electra.training.speed import try_compile
from electra.training.step import StepCallback, StepConstants, Update, apply_gradients

__all__ = ['STEP_SUMS', 'PretrainingConstants', 'StepState', 'MicroBatch', 'pretraining_step', 'sampling_noise',
           'learn_from', 'part_gradients', 'PretrainingStep']

# what a step sums for the metrics, in this order (`batch_statistics` and the losses), summed over its micro-batches;
# gen_steps / disc_steps: 1 where the step has that loss (two-stage training has each in one stage), for its mean
STEP_SUMS = ('loss', 'gen_loss', 'disc_loss', 'gen_correct', 'gen_total', 'disc_correct', 'disc_total', 'tp', 'fp', 'fn',
             'replaced', 'real', 'skipped', 'gen_steps', 'disc_steps')
PER_STEP = ('skipped', 'gen_steps', 'disc_steps')  # counted once per step: at its last micro-batch


@dataclass(frozen=True, kw_only=True)
class PretrainingConstants(StepConstants):
    """What the pretraining step reads that stays the same for the whole run, beside autocast's dtype and the clipping
    norm: the `masking` settings, the padding id, the `micro_batches` a batch runs in (grad_accum_steps) and
    `loss_mean` ('global': the losses divide by the whole step's counts over the processes; 'per_process')."""
    masking: MaskingSettings
    pad_token_id: int
    micro_batches: int = 1
    loss_mean: str = 'global'


@dataclass(frozen=True)
class StepState:
    """What one pretraining step reads that changes over the run (`PretrainingStep` keeps it): its `mask` of the batch
    (the masking with this step's draws), the `draws` of micro-batch i's sampling noise (the run's generator, whose
    draws move it on, or with random_draws 'counter' the `CounterDraws` of the seed, the step and i), the `update`
    (the weights this step trains, their groups and rates), fp16's loss `scaler` (else None), and the sampling
    `temperature` at this step (0-d; None: the model's constant)."""
    mask: Callable
    draws: Callable[[int], torch.Generator | CounterDraws]
    update: Update
    scaler: torch.amp.GradScaler | None
    temperature: torch.Tensor | None


class MicroBatch(NamedTuple):
    """One part of a step's masked batch, as the step function reads it: `input_ids`, `token_type_ids` [b, L], the
    masked `positions` and their `labels` [b, P], the sampling's U(0, 1) `noise` [b, P, V] (None: nothing sampled), and
    the step's loss `divisors` [2] and sampling `temperature` (0-d or None)."""
    input_ids: torch.Tensor
    token_type_ids: torch.Tensor
    positions: torch.Tensor
    labels: torch.Tensor
    noise: torch.Tensor | None
    divisors: torch.Tensor
    temperature: torch.Tensor | None


def pretraining_step(c: PretrainingConstants, s: StepState, model, loss_func, input_ids: torch.Tensor,
                     token_type_ids: torch.Tensor, learn_from: Callable) -> torch.Tensor:
    """One optimizer step on this process's batch `input_ids`, `token_type_ids` [B, L], its constants `c` and this
    step's state `s`; `learn_from`: the step function (`learn_from`, or its graph with `compile_scope` step). Returns
    the step's `STEP_SUMS` [15] on the device (nothing is read to the host)."""
    # 1. Masking, on the device: the official number of positions per row, 85% of them [MASK] (objective/masking.py),
    #    its draws from the run's seeded torch.Generator (outside any graph: a generator breaks one), or with
    #    random_draws 'counter' computed from the seed and the step, in a compiled graph of its own (objective/draws.py)
    m = s.mask(input_ids)                            # m.input_ids [B, L]; m.positions, m.labels [B, P] (-100: unused)
    # 2. What the two losses divide by: the whole step's counts (chosen positions, positions of the discriminator's
    #    loss), summed over the processes with loss_mean 'global', so the step is the global batch's in one process.
    counts = loss_counts(model.objective, m.input_ids, m.positions, m.labels, c.pad_token_id,
                         c.masking.special_tensor(input_ids.device))                                        # [2]
    divisors = loss_divisors(counts, c.loss_mean)                                                            # [2]
    # 3. The batch in `micro_batches` (grad_accum_steps) parts of b = B / n rows, run one after another: their
    #    gradients add up to the whole batch's, and the last one updates the weights.
    parts = list(zip(*(t.chunk(c.micro_batches) for t in (m.input_ids, token_type_ids, m.positions, m.labels))))
    grads, sums = None, 0
    for i, (ids, types, positions, labels) in enumerate(parts):
        # 4. The sampling's noise, next in the same stream after the masks (per part: [B, P, V] at once is large), or
        #    counter draws of part i that compute it where it is used, inside the compiled model or step.
        noise = sampling_noise(model, positions, s.draws(i))                    # [b, P, V], CounterDraws or None
        part = MicroBatch(ids, types, positions, labels, noise, divisors, s.temperature)
        grads, part_sums = learn_from(model, loss_func, c, part, s.update, s.scaler, grads, last=i == len(parts) - 1)
        sums = sums + part_sums
    return sums


def sampling_noise(model, positions: torch.Tensor, draws: torch.Generator | CounterDraws):
    """The U(0, 1) draws of the sampling's Gumbel noise [b, P, V] for the masked `positions` [b, P], next in the
    generator `draws`' stream, or the `CounterDraws` that compute them inside the model; None for an objective that
    samples nothing (BERT's)."""
    shape = model.noise_shape(positions)
    if shape is None: return None
    if isinstance(draws, CounterDraws): return draws
    return torch.rand(shape, device=positions.device, generator=draws)


def learn_from(model, loss_func, c: PretrainingConstants, part: MicroBatch, update: Update, scaler,
               grads: list | None = None, last: bool = True) -> tuple[list, torch.Tensor]:
    """The step function: forward, losses and gradients of one micro-batch `part`, added to `grads` (those of the
    step's earlier parts; None: the first), and after the `last` part the `update` of the weights (fp16: by the loss
    `scaler`'s rules). Returns (the gradients, the part's `STEP_SUMS`)."""
    new, stats = part_gradients(model, loss_func, c, part, update.params, scaler)
    grads = list(new) if grads is None else [a if b is None else b if a is None else a + b for a, b in zip(grads, new)]
    if not last: return grads, stacked({**stats, **dict.fromkeys(PER_STEP, stats['loss'].new_zeros(()))})
    # 8.-11. training/step.py: under torchrun the average of the processes' gradients (a collective: never in a
    # graph); fp16's unscaling by GradScaler's rules, an overflow's update masked on the device (no host read);
    # clipping by the global norm (official: 1.0); ElectraAdam's update, the official Adam without bias correction
    stats['skipped'] = apply_gradients(grads, update, c, scaler)
    return grads, stacked(stats)


def part_gradients(model, loss_func, c: PretrainingConstants, part: MicroBatch, params: list,
                   scaler) -> tuple[tuple, dict[str, torch.Tensor]]:
    """The gradients of `params` by one micro-batch's loss (None: a weight it did not use), and what the metrics count
    of it (0-d tensors, `STEP_SUMS` but 'skipped')."""
    with torch.autocast(part.input_ids.device.type, dtype=c.dtype or torch.float32, enabled=c.dtype is not None):
        # 5. The generator at the chosen positions, Gumbel-max sampling of replacements, the discriminator on the
        #    corrupted input (objective/model.py; what the objective changes is its row of config/objectives.py).
        pred = fp32(model(part.input_ids, part.token_type_ids, part.positions, part.labels, part.noise,
                          part.temperature))                                                   # the losses read fp32
        # 6. The objective's losses (objective/loss.py): L_gen + lambda L_disc, equation 1 (lambda = 50).
        gen_loss, disc_loss = loss_func.losses(pred, part.labels, part.divisors)                         # 0-d
        loss = loss_func.gen_weight * gen_loss + loss_func.disc_weight * disc_loss
    # 7. The gradients of the trainable weights, in fp32 outside autocast (None: a weight this step did not use);
    #    fp16 scales the loss first (loss scaling).
    grads = torch.autograd.grad(loss if scaler is None else scaler.scale(loss), params, allow_unused=True)
    with torch.no_grad():
        present = lambda t: loss.new_tensor(float(t is not None))  # noqa: E731  whether the network's loss exists
        stats = {**batch_statistics(pred, part.labels, loss_func.objective.head), 'loss': loss, 'gen_loss': gen_loss,
                 'disc_loss': disc_loss, 'gen_steps': present(pred.gen_logits), 'disc_steps': present(pred.disc_mask)}
    return grads, stats


def stacked(stats: dict[str, torch.Tensor]) -> torch.Tensor:
    "The `STEP_SUMS` of `stats` (0-d tensors) as one float64 vector [15], added up on the device."
    return torch.stack([stats[k].double() for k in STEP_SUMS]).detach()


class PretrainingStep(StepCallback):
    "Runs every training step as `pretraining_step` in place of fastai's, holding the step's state between steps."
    order = 65  # after every callback that prepares the step: the rate (ParamScheduler, 60)

    def __init__(self, masking: MaskingSettings, seed: int, pad_token_id: int, micro_batches: int = 1,
                 loss_mean: str = 'global', max_norm: float = 1.0, precision: str = 'fp32', compile: str | None = None,
                 mode: str | None = None, backend='inductor', temperature: TemperatureSchedule | None = None,
                 switch_step: int = 0, random_draws: str = 'generator'):
        """`compile`: None (eager), 'model' (the model compiled) or 'step' (`learn_from` as one graph). `temperature`:
        the sampling temperature's schedule (None: constant). `switch_step`: two-stage training's first step of the
        discriminator (0: joint training). `random_draws`: 'generator' (the masking generator) or 'counter'
        (`CounterDraws` of this process's `seed` and the step, inside the compiled step)."""
        if compile == 'step' and (precision == 'fp16' or is_distributed()):
            raise ConfigError("compile_scope: 'step' runs bf16 or fp32 in one process (fp16's loss scaler is not "
                              'traced, torchrun averages gradients between the backward and the update). Use '
                              '--compile_scope model (or auto).')
        super().__init__(learn_from, seed, precision, compile == 'step', mode, backend)
        self.constants = PretrainingConstants(dtype=self.dtype, max_norm=max_norm, masking=masking,
                                              pad_token_id=pad_token_id, micro_batches=micro_batches,
                                              loss_mean=loss_mean)
        self.scope, self.schedule, self.switch_step = compile, temperature, switch_step
        # the state: the masks' and noise's generator, this step's temperature (a tensor), two-stage training's stage
        self.mask_rng, self.step_temperature, self.current_stage, self.loaded = None, None, 0, None
        self.random_draws, self.step_number, self.mask_fn = random_draws, None, None  # mask_fn: the compiled masking

    def load_state(self, masking: torch.Tensor | None, scaler: dict | None, seed: int | None = None):
        """A checkpoint's step state, put back as the fit starts: the masking generator's state (None: a fresh stream
        from `seed`) and fp16's loss scale (None: none). The stage follows from the step the checkpoint restores."""
        self.loaded = {'masking': masking, 'scaler': scaler}
        if seed is not None: self.seed = seed

    def state(self) -> dict:
        """The step's state for a checkpoint: the masking generator's (None with counter draws: they follow from the
        step), fp16's loss scale (None where there is none)."""
        generator = self.mask_rng is not None and self.random_draws == 'generator'
        return {'masking': self.mask_rng.get_state() if generator else None,
                'scaler': self.scaler.state_dict() if self.scaler is not None else None}

    def before_fit(self):
        device, loaded = next(self.model.parameters()).device, self.loaded or {}
        self.mask_rng = torch.Generator(device=device).manual_seed(self.seed)
        if loaded.get('masking') is not None: self.mask_rng.set_state(loaded['masking'])
        super().before_fit()
        if loaded.get('scaler') and self.scaler is not None: self.scaler.load_state_dict(loaded['scaler'])
        self.loaded = None
        if self.schedule is not None and self.schedule.annealed:  # filled every step, read where it is (static)
            self.step_temperature = torch.zeros((), device=device)
            torch._dynamo.mark_static_address(self.step_temperature)
        if self.random_draws == 'counter':  # the counter draws' step in a compiled graph: filled, read where it is
            self.step_number = torch.zeros((), dtype=torch.int64, device=device)
            torch._dynamo.mark_static_address(self.step_number)
        # two-stage training: a run resumed past the switch has the discriminator's weights in its checkpoint already
        stage = 0 if not self.switch_step else 2 if self.train_iter > self.switch_step else 1
        if stage != self.current_stage: self.update = None  # another fit of this Learner, in another stage
        self.current_stage = self.model.stage = stage

    def before_batch(self):
        if self.current_stage == 1 and self.train_iter >= self.switch_step: self.next_stage()
        state = self.mask_rng.get_state() if self.one_graph else None  # after a failed compilation: the same draws
        self.sums = self.run_step(lambda f: pretraining_step(self.constants, self.step_state(), self.model,
                                                             self.loss_func, *self.xb, f),
                                  lambda: self._eager(state))
        self.learn.loss = self.sums[0]
        raise CancelBatchException  # fastai's own forward, backward and step are skipped; after_batch runs as usual

    def step_state(self) -> StepState:
        "This step's state, its weights and rates prepared (`run_step`): the temperature of the schedule at this step."
        return StepState(self.mask, self.part_draws, self.update, self.scaler, self.temperature_at(self.train_iter))

    def next_stage(self):
        """Two-stage training's switch: the discriminator starts from the generator's weights (the paper, section
        3.2: "initialize the weights of the discriminator with the weights of the generator"), which stay frozen."""
        self.model.discriminator.electra.load_state_dict(self.model.generator.electra.state_dict())
        self.current_stage = self.model.stage = 2
        self.update = None  # the weights the step trains, listed again

    def trainable(self) -> list:
        "The weights this step trains: two-stage training's generator alone (stage 1), then all but the generator's."
        params = super().trainable()
        if not self.current_stage: return params
        generator = {id(p) for p in self.model.generator.parameters()}
        return [p for p in params if (id(p) in generator) == (self.current_stage == 1)]

    def compile(self):
        """The model compiled in place (scope 'model'), or `learn_from` as one graph ('step'), else a one-line warning;
        with counter draws and scope 'step', the masking as a graph of its own (one CUDA graph with reduce-overhead)."""
        if self.scope != 'model':  # nothing to compile without a scope
            super().compile()
            if self.compiled and self.random_draws == 'counter':
                self.constants.masking.special_tensor(self.xb[0].device)  # made before tracing: a graph input
                kwargs = {'dynamic': False, **({} if self.mode is None else {'mode': self.mode})}
                self.mask_fn = torch.compile(self.constants.masking.__call__, fullgraph=True, backend=self.backend,
                                             **kwargs)
            return
        self.compiled = try_compile([self.model], self._trial, self.backend, self.mode)

    def _eager(self, state: torch.Tensor | None):
        "After a failed compilation: the masking eager, the generator back where the failed step began."
        self.mask_fn = None
        if state is not None: self.mask_rng.set_state(state)

    def _trial(self):
        "One forward and backward that compiles the model, leaving no trace (random states restored, no update)."
        c, rng, model, (input_ids, token_type_ids) = self.constants, self.mask_rng, self.model, self.xb
        state = rng.get_state()
        try:
            with torch.random.fork_rng(devices=[rng.device] if rng.device.type == 'cuda' else []):
                m = self.mask(input_ids)
                # this process's own counts: the trial joins no collective
                divisors = loss_counts(model.objective, m.input_ids, m.positions, m.labels, c.pad_token_id,
                                       c.masking.special_tensor(input_ids.device)) + 1e-6
                part = MicroBatch(m.input_ids, token_type_ids, m.positions, m.labels,
                                  sampling_noise(model, m.positions, self.part_draws(0)), divisors,
                                  self.temperature_at(self.train_iter))
                part_gradients(model, self.loss_func, c, part, self.trainable(), self.scaler)
        finally: rng.set_state(state)

    def temperature_at(self, step: int) -> torch.Tensor | None:
        "The schedule's temperature at `step` (steps taken) in the step's tensor, filled in place; None: constant."
        if self.step_temperature is None: return None
        return self.step_temperature.fill_(self.schedule(step))

    def counter(self, part: int, in_graph: bool) -> CounterDraws:
        """This step's counter draws for micro-batch `part`: the step an int, or for a compiled graph (`in_graph`) the
        tensor filled in place, so that the graph compiles once for every step."""
        return CounterDraws(self.seed, self.step_number.fill_(self.train_iter) if in_graph else self.train_iter, part)

    def mask(self, input_ids: torch.Tensor):
        "This step's masking of `input_ids` [B, L], its draws from the masking generator or the counter."
        if self.random_draws == 'generator': return self.constants.masking(input_ids, self.mask_rng)
        if self.mask_fn is None: return self.constants.masking(input_ids, self.counter(0, False))
        return self.mask_fn(input_ids, self.counter(0, True))

    def part_draws(self, part: int) -> torch.Generator | CounterDraws:
        """The draws of micro-batch `part`'s sampling noise: the masking generator (next in its stream), or counter
        draws, which compute the noise where it is used (inside the compiled model or step)."""
        if self.random_draws == 'counter': return self.counter(part, self.scope is not None)
        return self.mask_rng
