"""fastai callbacks of the pretraining loop; `electra.pretraining.learner.pretraining_learner` lists them in the order
they run, with what each does at which event.

Nothing here reads a value off the device every step: metrics accumulate on the device and are read every
`log_every` steps, so the GPU never waits for the host.
"""
from __future__ import annotations

import contextlib
import math
import signal
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Callable

import torch
from fastai.callback.core import Callback, CancelFitException
from fastprogress.fastprogress import ConsoleProgressBar, progress_bar

from electra.config.errors import ConfigError, RunWarning
from electra.config.objectives import Objective
from electra.pretraining.step import STEP_SUMS, PretrainingStep
from electra.runtime.errors import TrainingDiverged, stopped_by
from electra.runtime.files import atomic_save, path_inside, release_run_dir
from electra.runtime.processes import is_main_process, world
from electra.training.checkpoint import checkpoint_name, checkpoint_steps, name_by_total, overwrite_marker, state_checksum
from electra.training.distributed import all_reduce_sum, gather_objects, is_distributed, rank_seed
from electra.training.sinks import CsvLog

__all__ = ['StepCounter', 'ResumeFromCheckpoint', 'MetricsLogger', 'ProgressBar', 'Checkpointer',
           'StopOnInterrupt', 'METRIC_NAMES', 'resume_threads', 'resume_note']


class StepCounter(Callback):
    "Counts optimizer steps over the whole run, so schedules and checkpoints see the same step after a resume."
    order = -9  # right after fastai's TrainEvalCallback, which counts from 0 at every fit

    def __init__(self, total_steps: int): self.total_steps = total_steps

    def before_train(self):  # TrainEvalCallback.before_train resets pct_train to epoch / n_epoch
        self.learn.pct_train = self.learn.train_iter / self.total_steps

    def after_batch(self):
        if self.training: self.learn.pct_train = self.learn.train_iter / self.total_steps


class ResumeFromCheckpoint(Callback):
    "Puts a checkpoint's training state back, each part at the first event it can go (the step's through its own method)."
    order, run_valid = -8, False  # after TrainEvalCallback (-10) moved the model to the device and set the step to 0

    def __init__(self, ckpt: dict, step: PretrainingStep):
        self.ckpt, self.step = ckpt, step  # ckpt None once restored: a later fit of this Learner goes on from there

    def before_fit(self):
        if self.ckpt is None: return
        self.learn.train_iter = self.ckpt['step']
        self.model.load_state_dict(self.ckpt['model'])
        self.opt.load_state_dict(self.ckpt['opt'])  # torch puts each state tensor on its parameter's device
        # the step's masking generator and loss scale, which the step (65) puts back as its fit starts; the global
        # RNGs (dropout) just before the first resumed step, after fit set-up and the loader's iterator drew theirs
        rng = own_random_states(self.ckpt)
        self.step.load_state(None if rng is None else rng['masking'], self.ckpt['scaler'],
                             None if rng is not None else self._fresh_seed())

    def _fresh_seed(self) -> int:
        "This process's seed when the checkpoint has no random states of its own (another number of processes)."
        return rank_seed(self.ckpt['config']['seed'] + self.ckpt['step'], world().rank)

    def before_batch(self):
        if self.ckpt is None: return
        rng = own_random_states(self.ckpt)
        if rng is None: torch.manual_seed(self._fresh_seed())
        else:
            torch.set_rng_state(rng['torch'])
            if torch.cuda.is_available() and rng['cuda']: torch.cuda.set_rng_state_all(rng['cuda'])
        self.ckpt = None


def own_random_states(ckpt: dict) -> dict | None:
    """This process's random states (dropout, masking) in a checkpoint: its own where the checkpoint was written by as
    many processes as this job has (one process: the only ones), else None: its streams then start afresh."""
    ranks, w = ckpt.get('rng_ranks'), world()
    if ranks is None: return ckpt['rng'] if w.size == 1 else None
    return ranks[w.rank] if len(ranks) == w.size else None


def resume_threads(ckpt: dict | None) -> int | None:
    """The CPU threads a resume with `threads: auto` keeps: the checkpoint's, where the resume goes on bit for bit (its
    own random states, `own_random_states`: as many processes as wrote it), since other threads sum in another order;
    None (chosen afresh) at a start and under another number of processes, whose streams start afresh anyway."""
    return ckpt.get('threads') if ckpt and own_random_states(ckpt) is not None else None


def resume_note(ckpt: dict | None) -> str:
    "What the start line adds for a resume under another number of processes than wrote `ckpt`: '' for any other start."
    if not ckpt or own_random_states(ckpt) is not None: return ''
    wrote = len(ckpt['rng_ranks']) if ckpt.get('rng_ranks') is not None else 1
    return (f'; resumed from a run of {wrote} process(es) in {world().size}: its masks, samples and dropout start '
            'afresh from the seed, step and rank, so it goes on as another draw of the run, not bit for bit')


# gen_*: the generator; disc_*: the discriminator (in the MLM objectives its MLM loss and token
# accuracy); replaced_precision / recall: replaced-token detection only (0 otherwise). replaced_fraction: share of real
# tokens replaced; answering "original" everywhere scores 1 - replaced_fraction.
# skipped_steps: steps fp16 loss scaling skipped (overflowing gradients) since the last row; always 0 in bf16 and fp32.
METRIC_NAMES = ['step', 'loss', 'gen_loss', 'disc_loss', 'lr', 'gen_accuracy', 'disc_accuracy',
                'replaced_precision', 'replaced_recall', 'replaced_fraction', 'steps_per_s', 'skipped_steps']


class MetricsLogger(Callback):
    "Accumulates losses and accuracies on the device; every `log_every` steps writes a CSV row and calls `sinks`."
    # before the step (65), whose before_batch runs the step and cancels the batch's later callbacks: the row's clock
    # starts there; its after_batch still runs after the step, which sets the sums it adds
    order, run_valid = 64, False

    def __init__(self, path: str | Path, log_every: int, total_steps: int, step: PretrainingStep,
                 sinks: list[Callable[[dict], None]] = (), saved: list[Path] | None = None, window: dict | None = None):
        """`saved`: the checkpoints written so far (the `Checkpointer`'s list, which it fills), for a divergence's message;
        `window`: a resumed checkpoint's `window_state`, the steps since its last row, which the first row averages in."""
        self.csv, self.log_every, self.total_steps, self.sinks = CsvLog(path, METRIC_NAMES), log_every, total_steps, list(sinks)
        self.step, self.saved = step, [] if saved is None else saved  # step: its `sums`, what each step adds up
        self.last_row, self.window = None, window

    def before_fit(self):
        self._reset()
        if self.window is not None: self._restore_window(self.window)
        self.window = None  # a later fit of this Learner goes on from its own sums
        self.t0 = None  # the row's clock starts at its first step (`before_batch`)
        # the first step whose loss was NaN or infinite (-1: none), kept on the device: no read per step
        self.first_bad = torch.full((), -1, dtype=torch.int64, device=self.acc.device)
        if is_main_process(): self.csv.truncate_after(self.train_iter)

    def _reset(self):
        self.acc = torch.zeros(len(STEP_SUMS), dtype=torch.float64, device=next(self.model.parameters()).device)
        self.batches, self.carried = 0, 0  # carried: batches (of all processes) summed in before a resume

    def window_state(self) -> dict:
        """The sums of the steps since the last row, over the processes (every process calls it at the same step), and
        their batches; skipped steps per process, so that a resume under another number of processes counts them."""
        sums = self.acc.clone()
        all_reduce_sum(sums)
        sums[STEP_SUMS.index('skipped')] /= world().size
        return {'sums': sums.cpu(), 'batches': self.batches * world().size + self.carried}

    def _restore_window(self, window: dict):
        "Sum a checkpoint's `window_state` in (on the main process: the row's all-reduce adds it to the others')."
        if is_main_process():
            sums = window['sums'].to(self.acc)
            if len(sums) < len(STEP_SUMS): sums = self._steps_counted(sums, window['batches'])
            sums[STEP_SUMS.index('skipped')] *= world().size
            self.acc += sums
        self.carried = window['batches']

    @staticmethod
    def _steps_counted(sums: torch.Tensor, batches: int) -> torch.Tensor:
        """A window written before the sums counted each loss's steps: a loss it holds (a nonzero sum) counted on each
        of its `batches` (a run resumed across two-stage training's switch may have had it on some only)."""
        counts = [batches * float(sums[STEP_SUMS.index(k)] != 0) for k in ('gen_loss', 'disc_loss')]
        return torch.cat([sums, sums.new_tensor(counts)])

    def check_finite(self):
        "Raise `TrainingDiverged` if a loss since the start of the fit was NaN or infinite (reads one number)."
        bad = int(self.first_bad)
        if bad < 0: return
        last = f'the last checkpoint it wrote, {self.saved[-1]}, is from before it' if self.saved else 'it wrote no checkpoint after it'
        raise TrainingDiverged(
            f'the loss became NaN or infinite at step {bad} (found at step {self.train_iter}); the run stopped and '
            f'{last}. Resume from the latest good checkpoint with a lower learning rate, e.g. --resume --lr '
            f'{self.learn.lr / 2:.3g}, or look for bad data around that step.')

    def before_batch(self):
        # steps_per_s times the steps of a row, from the first to the last: not what runs before a fit's first step (a
        # resume's checks, the first evaluation, data workers starting) nor after a row (the held-out evaluation,
        # checkpoints), which would make a row's rate that of other work
        if self.t0 is None: self.t0, self.step0 = time.perf_counter(), self.train_iter

    @torch.no_grad()
    def after_batch(self):
        self.acc += self.step.sums
        self.batches += 1
        loss_sum = self.acc[STEP_SUMS.index('loss')]  # turns NaN or infinite at the first bad step since the last row
        self.first_bad = torch.where(~torch.isfinite(loss_sum) & (self.first_bad < 0), self.train_iter, self.first_bad)
        if self.train_iter % self.log_every == 0 or self.train_iter == self.total_steps: self._log()

    def _log(self):
        self.check_finite()
        all_reduce_sum(self.acc)  # over the processes: every one logs at the same steps
        a = dict(zip(STEP_SUMS, self.acc.tolist()))  # with check_finite, the only device reads, every `log_every` steps
        n, tp = max(self.batches * world().size + self.carried, 1), a['tp']  # the losses are summed over the processes' batches
        now = time.perf_counter()
        # each column a mean over the steps (positions) where it exists: NaN where none of the row's has it
        row = {'step': self.train_iter, 'loss': a['loss'] / n, 'gen_loss': mean(a['gen_loss'], a['gen_steps']),
               'disc_loss': mean(a['disc_loss'], a['disc_steps']), 'lr': self.opt.hypers[0]['lr'],
               'gen_accuracy': mean(a['gen_correct'], a['gen_total']),
               'disc_accuracy': mean(a['disc_correct'], a['disc_total']),
               'replaced_precision': tp / max(tp + a['fp'], 1), 'replaced_recall': tp / max(tp + a['fn'], 1),
               'replaced_fraction': a['replaced'] / max(a['real'], 1),
               'steps_per_s': (self.train_iter - self.step0) / max(now - self.t0, 1e-9),
               'skipped_steps': round(a['skipped'] / world().size)}  # every process skips the same steps
        self.t0, self.last_row = None, row
        self._reset()
        if not is_main_process(): return
        self.csv.append(row)
        for sink in self.sinks: sink(row)


def mean(total: float, count: float) -> float:
    "`total` / `count`; NaN over nothing (a quantity not measured), never 0."
    return total / count if count else math.nan


class ProgressBar(Callback):
    "A live progress bar over the run's steps; its comment shows the last logged metrics (no per-step device read)."
    order, run_valid = 75, False

    def __init__(self, total_steps: int, logger: MetricsLogger, objective: Objective):
        self.total_steps, self.logger, self.objective = total_steps, logger, objective

    def before_train(self):
        # A resumed run's bar counts the steps still to run (its time estimate needs steps timed in this process);
        # the comment gives the run's own step. fastprogress bars must be started at 0.
        self.start = self.train_iter
        self.pbar = progress_bar(range(self.total_steps - self.start), leave=True)
        self.pbar.update(0)

    def after_batch(self):
        row = self.logger.last_row
        if row is not None and row['step'] == self.train_iter:
            accuracies = ' '.join(f"{name} {row[key]:.3f}" for name, key in self.objective.reported.accuracies)
            self.pbar.comment = f"step {self.train_iter} loss {row['loss']:.3f} {accuracies} lr {row['lr']:.2e}"
        self.pbar.update(self.train_iter - self.start)

    def after_train(self):
        self.pbar.on_iter_end()
        if isinstance(self.pbar, ConsoleProgressBar): print(flush=True)  # what follows starts below the finished bar


class Checkpointer(Callback):
    """Writes `<run_name>_<seed>_<percent>.pth` atomically at the configured fractions of the run, with a checksum, and
    reads each one back to verify it; never after a NaN or infinite loss. Before the first, it renames the run's
    checkpoints written under another number of steps (an extended run) `..._<percent>%_of_<steps>.pth`."""
    order, run_valid = 80, False

    def __init__(self, output_dir: str | Path, run_name: str, seed: int, total_steps: int, fractions: list[float],
                 extra: Callable[[], dict], step: PretrainingStep, logger: MetricsLogger):
        self.output_dir, self.run_name, self.seed, self.total_steps = Path(output_dir), run_name, seed, total_steps
        self.at, self.extra, self.step, self.logger = checkpoint_steps(total_steps, fractions), extra, step, logger
        self.saved: list[Path] = logger.saved  # the logger names the last of them when the loss diverged
        for at, shared in ((at, fs) for at, fs in self.at.items() if len(fs) > 1):  # a short run: each the same file
            names = [f'{f * 100:g}%' for f in shared]
            warnings.warn(f"checkpoint_at: at {total_steps} steps, {', '.join(names[:-1])} and {names[-1]} fall on one "
                          f"step ({at}): their checkpoints are one state under {len(shared)} names. Give fewer "
                          "fractions, or more steps.", RunWarning, stacklevel=2)

    def before_fit(self):
        if not is_main_process(): return
        # a run extended (--resume --steps more): its checkpoints' percents are of the old total, said in their names
        renamed = name_by_total(self.output_dir, self.run_name, self.seed, self.total_steps)
        if renamed: print(f"resume: the run now has {self.total_steps} steps; its checkpoints written under fewer keep "
                          f"their percent of those, renamed {', '.join(new.name for _, new in renamed)}")

    def after_fit(self):
        if is_main_process(): release_run_dir(self.learn.path)  # training is over: another process may take the run

    def after_batch(self):
        if self.train_iter in self.at: self.save(self.at[self.train_iter])

    def save(self, fractions: list[float]) -> list[Path]:
        """Write the training state after the current step as the checkpoints of `fractions` of the run. Every process
        calls it at the same step and hands over its random states; the main process writes."""
        step = self.step.state()  # its masking generator's (this process's) and loss scale
        window = self.logger.window_state()  # the next row's partial sums: a resume's first row averages all its steps
        rng = {'torch': torch.get_rng_state(), 'cuda': torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
               'masking': step['masking']}
        ranks = gather_objects(rng)  # [one per process]
        if not is_main_process(): return []
        self.logger.check_finite()
        state = {'step': self.train_iter, 'model': self.model.state_dict(), 'opt': self.opt.state_dict(),
                 'scaler': step['scaler'], 'metrics_window': window,
                 'rng': rng, **({'rng_ranks': ranks} if len(ranks) > 1 else {}), **self.extra()}
        state['checksum'] = state_checksum(state)
        paths = []
        for fraction in fractions:
            path = atomic_save(state, path_inside(self.output_dir, checkpoint_name(self.run_name, self.seed, fraction),
                                                  key='output_dir'))
            if state_checksum(torch.load(path, map_location='cpu', weights_only=True)) != state['checksum']:
                raise ConfigError(f"output_dir: {path} reads back different from what was written (a full or failing "
                                  "disk?). Free space or choose another --output_dir, then resume.")
            paths.append(path)
        self.saved += paths
        overwrite_marker(self.output_dir, self.run_name, self.seed).unlink(missing_ok=True)  # the new run has begun
        return paths


class StopOnInterrupt(Callback):
    "On Ctrl-C or a stop signal, finishes the current step, checkpoints it and stops the fit; a second Ctrl-C stops at once."
    order, run_valid = 85, False  # after Checkpointer (80): a scheduled checkpoint of this step is not written twice
    REPEAT_WINDOW_S = 5.0

    def __init__(self, checkpointer: Checkpointer):
        self.checkpointer, self.requested, self.stopped_at, self.group = checkpointer, False, None, None
        self.signum = signal.SIGINT  # what asked for the stop: Ctrl-C, or a signal of `stop_on_signals`

    def before_fit(self):
        import torch.distributed as dist
        # the processes agree on stopping over gloo, on the CPU: no device synchronisation per step
        if is_distributed() and self.group is None and dist.get_backend() != 'gloo':
            self.group = dist.new_group(backend='gloo')

    def _agreed(self) -> bool:
        """Whether any process was asked to stop (Ctrl-C reaches each process of a job at its own moment; a signal may
        reach one alone); each then names the signal one of them got."""
        if not is_distributed(): return self.requested
        import torch.distributed as dist
        flag = torch.tensor([float(self.signum if self.requested else 0)])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.group)
        if flag.item() and not self.requested: self.signum = int(flag.item())
        return bool(flag.item())

    @contextlib.contextmanager
    def handling_sigint(self):
        """Route SIGINT to this callback while the block runs (the main thread only: Python handles signals there), and
        with it the stop signals, which `stop_on_signals` hands to SIGINT's handler."""
        self.requested, self.stopped_at = False, None
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGINT, self._request)
        try: yield
        finally: signal.signal(signal.SIGINT, previous)

    def _request(self, signum, frame):
        now = time.monotonic()
        if self.requested:
            if signum != signal.SIGINT: return  # a stop signal once more (a scheduler's, a parent's): the same request
            # torchrun's agent passes the terminal's Ctrl-C on to its processes, which got it too: a second SIGINT so
            # soon after the first is that one, not the user's second (the agent waits 30 s, then kills them)
            if world().size > 1 and now - self.requested_at < self.REPEAT_WINDOW_S: return
            raise KeyboardInterrupt
        self.requested, self.requested_at, self.signum = True, now, signum
        if world().rank == 0:
            print(f'\n{stopped_by(signum)}: stopping after this step, with a checkpoint (Ctrl-C stops at once, keeping '
                  'only the last checkpoint)', file=sys.stderr, flush=True)

    def after_batch(self):
        if not self._agreed(): return
        ckpt, self.stopped_at = self.checkpointer, self.train_iter
        if self.stopped_at not in ckpt.at: ckpt.save([self.stopped_at / ckpt.total_steps])  # else written just now
        raise CancelFitException
