"""The pretraining job's steps, each one call for the driver (`pretrain.py` / `notebooks/Pretrain.ipynb`):
device and precision, the run directory, the fastai Learner with its callbacks, resume, and the whole run."""
from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path

import torch
import yaml
from fastai.callback.progress import ProgressCallback
from fastai.callback.schedule import ParamScheduler
from fastai.learner import Learner, Recorder

from electra.config.errors import ConfigError
from electra.config.objectives import OBJECTIVES
from electra.config.pretrain import PretrainConfig
from electra.config.values import BOOL_WORDS, config_from_dict, config_to_dict, value_sources
from electra.config.version import __version__
from electra.data.tokenizer import TOKENIZER_DIR
from electra.pretrained.export import EXPORTS, export_holds, export_pretrained
from electra.objective.loss import ElectraLoss
from electra.objective.masking import MaskingSettings
from electra.objective.sampling import TemperatureSchedule
from electra.objective.model import ElectraGeneratorDiscriminator, build_pretraining_model
from electra.pretraining.callbacks import (
    Checkpointer,
    MetricsLogger,
    ProgressBar,
    ResumeFromCheckpoint,
    StepCounter,
    StopOnInterrupt,
)
from electra.pretraining.evaluation import HeldOutEvaluation, eval_batches
from electra.pretraining.step import PretrainingStep
from electra.runtime.errors import TrainingStopped, stopped_by
from electra.runtime.files import (atomic_write_text, lock_run_dir, path_inside, release_run_dir, writable_dir,
                                   writable_files)
from electra.runtime.processes import cli_args, command_again, is_main_process, running_in_notebook, world
from electra.runtime.streams import LOG_NAME, log_to
from electra.training.checkpoint import (
    FORMAT,
    checkpoint_name,
    find_checkpoints,
    latest_checkpoint,
    overwrite_marker,
    recorded,
    refuse_past,
    remove_old_run,
    remove_partial_checkpoints,
)
from electra.training.distributed import finish_distributed, is_distributed, rank_seed
from electra.training.optim import electra_opt_func, param_groups
from electra.training.schedule import warmup_decay_sched
from electra.training.sinks import prefixed_sink, print_eval_sink, print_sink
from electra.training.speed import DeviceDataLoaders, DevicePrefetcher
from electra.training.step import one_graph_supported
from electra.training.trackers import TrackedRun, Trackers, start_trackers

__all__ = ['RUN_FILES', 'prepare_run_dir',
           'pretraining_learner', 'record_schedules', 'checkpoint_extra', 'existing_run_guard', 'refuse_over_export',
           'end_if_finished', 'train', 'compile_description',
           'save_run_config', 'end_trackers']


# the files of a run's folder `<output_dir>/<run_name>_<seed>/` (losses.png: pretrain.py's plot), written in place
RUN_FILES = (LOG_NAME, 'config.yaml', 'schedules.yaml', 'metrics.csv', 'eval_metrics.csv', 'losses.png')


def prepare_run_dir(cfg: PretrainConfig) -> Path:
    """`<output_dir>/<run_name>_<seed>/`, checked writable up front rather than at the first checkpoint (with the
    folders the run writes in it: the tokenizer it trains, the models it exports, its TensorBoard events; no folder
    where one of its files or checkpoints goes), and locked by
    this process (`lock_run_dir`): one run of a name at a time. Holding the lock, it removes the partial checkpoint
    files a killed write of this run left (`.<checkpoint>.*.tmp`, as large as a checkpoint). The job's output goes to
    the run's `log.txt` too (`log_to`)."""
    writable_dir(cfg.output_dir, 'output_dir')
    run_dir = writable_dir(path_inside(cfg.output_dir, f'{cfg.run_name}_{cfg.seed}', key='output_dir'), 'output_dir')
    for name in (TOKENIZER_DIR, *EXPORTS, 'tensorboard'):  # made when written (an export after the last step), checked now
        writable_dir(run_dir / name, 'output_dir', create=False)
    writable_files(run_dir, RUN_FILES, 'output_dir')  # no folder where a file goes (the plot's is written last)
    writable_files(cfg.output_dir, [checkpoint_name(cfg.run_name, cfg.seed, f) for f in cfg.checkpoint_at], 'output_dir')
    if is_main_process():
        lock_run_dir(run_dir)
        remove_partial_checkpoints(cfg.output_dir, cfg.run_name, cfg.seed)
    log_to(run_dir)  # the job's output, also what a closed stdout missed: log.txt (main process)
    return run_dir


def _trackers(cfg: PretrainConfig, run_dir: Path, resume: dict | None) -> Trackers:
    """The run's trackers (`logger`; none outside the main process): a resumed run goes on in the tracked runs its
    checkpoint names, and a tracker it names none of first gets the rows of the CSV files written before the resume."""
    run = TrackedRun(f'{cfg.run_name}_{cfg.seed}', cfg.tracking_group or cfg.run_name, tuple(cfg.tracking_tags),
                     config_to_dict(cfg), value_sources(cfg), run_dir / 'tensorboard', cfg.neptune_project)
    return start_trackers(cfg.logger, run, (resume or {}).get('trackers'), (resume or {}).get('step', 0),
                          {'train/': run_dir / 'metrics.csv', 'eval/': run_dir / 'eval_metrics.csv'})


def pretraining_learner(cfg: PretrainConfig, model: ElectraGeneratorDiscriminator, tokenizer, train_dl, run_dir: Path,
                        device: torch.device, precision: str, resume: dict | None = None, extra_state=None,
                        held_out=None) -> Learner:
    """A fastai Learner running the ELECTRA objective with the official optimizer, schedule and clipping, continuing
    from the checkpoint `resume` when given; with `held_out` examples (see `held_out_split`), evaluated on them every
    `log_every` steps."""
    # Batches are (input_ids, token_type_ids): both inputs; the step masks them. No fastai validation pass.
    # Batches reach the device with non-blocking copies, one batch ahead (fastai's own copy would block every step).
    dls = DeviceDataLoaders(DevicePrefetcher(train_dl, device), [], device=device, n_inp=2)
    live = is_main_process() and (sys.stdout.isatty() or running_in_notebook())
    trackers = _trackers(cfg, run_dir, resume)
    sinks = ([] if live else [print_sink(OBJECTIVES[cfg.objective])]) + [prefixed_sink(trackers, 'train/')]
    extra = extra_state or dict
    masking = MaskingSettings.from_config(cfg, tokenizer)
    learn = Learner(dls, model, loss_func=ElectraLoss(cfg.gen_loss_weight, cfg.disc_loss_weight, cfg.objective),
                    opt_func=electra_opt_func((cfg.adam_beta1, cfg.adam_beta2), cfg.adam_eps, cfg.weight_decay),
                    splitter=param_groups, lr=cfg.lr, path=run_dir, model_dir='.')
    # fastai's Recorder keeps a loss tensor per step and its ProgressCallback reads the loss every step: replaced below.
    learn.remove_cbs([Recorder, ProgressCallback])
    # The step is one callback (65: `PretrainingStep`, electra/pretraining/step.py); the others, in the order they run
    # (fastai's TrainEvalCallback, -10, counts and moves the model), do what is not the step.
    step = PretrainingStep(masking, rank_seed(cfg.seed, world().rank), tokenizer.pad_token_id,
                           cfg.grad_accum_steps, cfg.loss_mean, cfg.clip_grad, precision, _compile_scope(cfg, precision),
                           None if cfg.compile_mode == 'default' else cfg.compile_mode,
                           temperature=TemperatureSchedule.from_config(cfg),
                           switch_step=cfg.two_stage_switch if cfg.two_stage else 0, random_draws=cfg.random_draws)
    logger = MetricsLogger(run_dir / 'metrics.csv', cfg.log_every, cfg.steps, step, sinks,
                           window=(resume or {}).get('metrics_window'))
    schedules = record_schedules(cfg, resume, run_dir)
    checkpointer = Checkpointer(cfg.output_dir, cfg.run_name, cfg.seed, cfg.steps, cfg.checkpoint_at,
                                lambda: {**extra(), 'trackers': trackers.ids, 'schedules': schedules}, step, logger)
    cbs = [
        StepCounter(cfg.steps),                  # -9 before_train/after_batch: the run's fraction done, over resumes
        ResumeFromCheckpoint(resume, step) if resume else None,  # -8 before_fit, first before_batch: the checkpoint's
        ParamScheduler({'lr': warmup_decay_sched(cfg.lr, cfg.warmup_steps, cfg.steps, cfg.decay_power, cfg.schedule,
                                                 cfg.two_stage_switch if cfg.two_stage_schedule == 'per_stage' else 0)}),
                                                 # 60 before_batch: the official lr at this step
        step,                                    # 65 before_batch: the step, in place of fastai's (two-stage
                                                 # training's switch too: the discriminator from the generator)
        logger,                                  # 70 after_batch: metrics.csv rows
        _held_out_evaluation(cfg, tokenizer, held_out, masking, run_dir, precision, trackers),  # 72, main process
        # 75 after_batch: the live bar in a terminal or notebook
        ProgressBar(cfg.steps, logger, OBJECTIVES[cfg.objective]) if live else None,
        checkpointer,                            # 80 after_batch: the checkpoints of `checkpoint_at`
        StopOnInterrupt(checkpointer)]           # 85 after_batch: Ctrl-C ends the fit after this step, checkpointed
    learn.trackers = trackers  # ended by `train` when the fit fails or stops, else by the driver after the export
    return learn.add_cbs([cb for cb in cbs if cb is not None])


def record_schedules(cfg: PretrainConfig, resume: dict | None, run_dir: Path) -> list[dict]:
    """The learning-rate schedules the run trained under, in order: `{'start', 'steps', 'lr'}` each, a schedule of
    `steps` steps peaking at `lr`, followed from step `start` on. One, unless a resume changed `steps` (an extended
    run: the official schedule is of the new total, so the rate rises again) or `lr`; the checkpoints carry the list,
    and `<run_dir>/schedules.yaml` holds it for the model card."""
    saved = (resume or {}).get('config', {})
    schedules = (resume or {}).get('schedules') or ([{'start': 0, 'steps': saved['steps'], 'lr': saved['lr']}]
                                                    if resume else [])
    if not schedules or (schedules[-1]['steps'], schedules[-1]['lr']) != (cfg.steps, cfg.lr):
        schedules = [*schedules, {'start': (resume or {}).get('step', 0), 'steps': cfg.steps, 'lr': cfg.lr}]
    if is_main_process(): atomic_write_text(yaml.safe_dump(schedules, sort_keys=False), run_dir / 'schedules.yaml')
    return schedules


def _compile_scope(cfg: PretrainConfig, precision: str) -> str | None:
    """What `compile` compiles: with `compile_scope` step (or auto where it can run) the whole step as one graph,
    else the model; None without `compile`."""
    if not cfg.compile: return None
    one_graph = cfg.compile_scope == 'step' or (cfg.compile_scope == 'auto' and not is_distributed() and
                                                 precision != 'fp16' and cfg.grad_accum_steps == 1 and
                                                 cfg.two_stage == 0 and one_graph_supported())
    return 'step' if one_graph else 'model'


def compile_description(cfg: PretrainConfig, precision: str) -> str:
    """The run's first line's word on `compile`: what is compiled, by which backend; with dropout on, that inductor
    draws dropout from a stream of its own (on the CPU too), so the compiled run is another draw of the eager one."""
    scope = _compile_scope(cfg, precision)
    if scope is None: return ''
    what = 'the whole step' if scope == 'step' else 'the model'
    draw = ": dropout is inductor's draw, another draw of the run" if cfg.dropout else ''
    return f"; torch.compile of {what} (inductor, mode {cfg.compile_mode}){draw}"


def _held_out_evaluation(cfg: PretrainConfig, tokenizer, held_out, masking: MaskingSettings, run_dir: Path,
                         precision: str, trackers: Trackers) -> HeldOutEvaluation | None:
    "The held-out evaluation of a run with `held_out` examples, logging beside the training metrics."
    if held_out is None or not len(held_out) or not is_main_process(): return None
    # printed in a terminal and a notebook too: the bar's comment shows the training metrics only
    eval_sinks = [print_eval_sink(OBJECTIVES[cfg.objective]), prefixed_sink(trackers, 'eval/')]
    return HeldOutEvaluation(eval_batches(held_out, cfg.batch_size, cfg.max_length, tokenizer.pad_token_id),
                             cfg.log_every, cfg.steps, run_dir / 'eval_metrics.csv', masking, cfg.seed, precision,
                             eval_sinks, at_start=bool(cfg.init_from))


def checkpoint_extra(cfg: PretrainConfig, tokenizer_state: dict[str, str], corpus_digest: str):
    """What every checkpoint carries besides the training state: format, resolved config, tokenizer files, the
    corpus's examples by content (`electra.data.cache.examples_digest`, which a resume checks), the CPU threads
    the run uses (a resume with `threads: auto` keeps them: the same sums in the same order) and the library's version
    that wrote it."""
    return lambda: {'format': FORMAT, 'electra_version': __version__, 'config': config_to_dict(cfg),
                    'tokenizer': tokenizer_state, 'corpus_digest': corpus_digest, 'threads': torch.get_num_threads()}


def existing_run_guard(cfg: PretrainConfig) -> Path | None:
    """The checkpoint to resume from (None: start at step 0). Refuses to start over a run that already has
    checkpoints unless asked to, so a forgotten --resume never overwrites work. --overwrite removes the old run's
    checkpoints first (behind `overwrite_marker`), and the tokenizer trained for it; a --resume after an overwrite that stopped before its first
    checkpoint finishes that removal and starts at step 0, never from the old run; a start at step 0 removes the run's
    old TensorBoard events (`remove_old_events`). A folder holding the run's export
    without checkpoints is refused too, with --resume or not (`refuse_over_export`)."""
    if cfg.resume:
        if overwrite_marker(cfg.output_dir, cfg.run_name, cfg.seed).exists():
            old = remove_old_run(cfg.output_dir, cfg.run_name, cfg.seed)
            if is_main_process():
                print(f"resume: the --overwrite of {cfg.run_name}_{cfg.seed} stopped before its first checkpoint; "
                      f"the old run's checkpoints are not resumed ({len(old)} more removed); starting at step 0.")
            return remove_old_events(cfg)
        path = latest_checkpoint(cfg.output_dir, cfg.run_name, cfg.seed)
        # fewer steps than the run reached: refused before any line says where it starts or goes on
        if path is not None:
            saved, run = recorded(path), f'{cfg.run_name}_{cfg.seed}'
            refuse_past(path, run, saved['step'], cfg.steps)
            # before the tokenizer is chosen: a run begun from weights goes on with theirs, kept in its checkpoint
            if (line := cfg.resume_start(saved['init_from'], path, run, saved['init_max_length'])) and is_main_process(): print(line)
            cfg.resume_trackers(saved, path)  # its tracked runs' group and tags, unless others are given
        if path is None: refuse_over_export(cfg)  # even with overwrite (the demo preset's): --resume asks to go on
        if path is None and is_main_process():
            print(f"resume: no checkpoint of {cfg.run_name}_{cfg.seed} in {cfg.output_dir}; starting at step 0.")
        return path or remove_old_events(cfg)
    found = find_checkpoints(cfg.output_dir, cfg.run_name, cfg.seed)
    if found and not cfg.overwrite:
        raise ConfigError(f"{found[-1]}: run '{cfg.run_name}' (seed {cfg.seed}) already has checkpoints in "
                          f"{cfg.output_dir}. Continue it with --resume, start another with --run_name NAME, "
                          "or replace it with --overwrite true.")
    if not cfg.overwrite: refuse_over_export(cfg)
    remove_old_run(cfg.output_dir, cfg.run_name, cfg.seed)
    if cfg.overwrite and is_main_process():  # the old run's trained tokenizer goes too: the new run trains its own
        shutil.rmtree(path_inside(cfg.output_dir, f'{cfg.run_name}_{cfg.seed}', 'tokenizer', key='output_dir'),
                      ignore_errors=True)
    return remove_old_events(cfg)


def remove_old_events(cfg: PretrainConfig) -> None:
    """A run starting at step 0 removes the TensorBoard events an earlier start of it left (an --overwrite's old run,
    a start killed before its first checkpoint), as metrics.csv is rewritten: the new run's events are the only ones."""
    if is_main_process():
        shutil.rmtree(path_inside(cfg.output_dir, f'{cfg.run_name}_{cfg.seed}', 'tensorboard', key='output_dir'),
                      ignore_errors=True)


def refuse_over_export(cfg: PretrainConfig) -> None:
    """Refuse to start at step 0 in a run folder that holds an export (a finished run whose checkpoints were removed):
    the export, config.yaml and metrics.csv are the run's product, which the new run would replace."""
    run_dir = path_inside(cfg.output_dir, f'{cfg.run_name}_{cfg.seed}', key='output_dir')
    held = [f'{name}/' for name in EXPORTS if (run_dir / name).is_dir() and any((run_dir / name).iterdir())]
    if not held: return
    replace = 'run it without --resume, with --overwrite true' if cfg.resume else 'give --overwrite true'
    raise ConfigError(f"{run_dir}: run '{cfg.run_name}' (seed {cfg.seed}) has no checkpoint"
                      f"{' to resume' if cfg.resume else ''} in {cfg.output_dir}, but its folder holds its export "
                      f"({', '.join(held)}), which a run from step 0 would replace. Keep it and start another with "
                      f"--run_name NAME, or to replace it {replace}.")


def end_if_finished(cfg: PretrainConfig, ckpt: dict | None, path: Path | None, tokenizer, run_dir: Path,
                    generator=None) -> None:
    """A --resume whose latest checkpoint `ckpt` (at `path`) is at the run's last step has nothing to train: the job
    ends here, status 0, writing nothing when the run's export holds that checkpoint's weights, else (a kill during the
    export, or an export of other weights) writing the export from it.
    `generator`: the run's frozen generator, when its objective has one (`load_generator`'s net)."""
    if ckpt is None or ckpt['step'] < cfg.steps: return
    name, step = f'{cfg.run_name}_{cfg.seed}', ckpt['step']  # (past `steps`: refused by `existing_run_guard`)
    if is_main_process():
        run_cfg = config_from_dict(PretrainConfig, ckpt['config'], source=str(path))
        model = build_pretraining_model(run_cfg, MaskingSettings.from_config(run_cfg, tokenizer), generator)
        model.load_state_dict(ckpt['model'])
        if export_holds(model, tokenizer, run_dir):
            print(f'run {name} finished at step {step}; nothing to do: its checkpoints and export ({run_dir}) are '
                  'left as they are.')
        else:
            export_pretrained(model, tokenizer, run_dir)
            print(f'run {name} finished at step {step}; its export in {run_dir} was missing, incomplete or not the '
                  f'weights of its last checkpoint {path}: written from that checkpoint.')
        release_run_dir(run_dir)
    finish_distributed()
    raise SystemExit(0)


def train(learn: Learner) -> None:
    """Train over the rest of the run. Ctrl-C (SIGINT, also a notebook's interrupt) or a stop signal (SIGTERM, SIGHUP,
    SIGUSR1, SIGUSR2: `stop_on_signals`) lets the current step finish, checkpoints it and raises `TrainingStopped`
    with the command that continues the run; a second Ctrl-C stops at once."""
    stop = learn.stop_on_interrupt  # fastai names a callback's attribute after its class
    try:
        with stop.handling_sigint():
            learn.fit(1)
    except BaseException:
        learn.trackers.end('failed')
        raise
    if stop.stopped_at is None: return
    if (total := learn.checkpointer.total_steps) <= stop.stopped_at:  # asked during the last step: nothing to resume
        if world().rank == 0:
            print(f"{stopped_by(stop.signum)} came during the last step ({stop.stopped_at} of {total}): the run is "
                  "complete, so it ends as a finished run does (its export, then status 0; nothing to resume).",
                  file=sys.stderr, flush=True)
        return
    learn.trackers.end('killed')  # stopped: a resume goes on in the same tracked runs
    again = command_again([*without_resume(cli_args()), '--resume']) or 'the same settings and --resume'
    saved = learn.checkpointer.saved  # its last one is this step's (none outside the main process)
    kept = f"checkpoint {saved[-1]} written" if saved else 'checkpoints are written by the main process'
    raise TrainingStopped(f"at step {stop.stopped_at} of {learn.checkpointer.total_steps} by {stopped_by(stop.signum)}; "
                          f"{kept}. Continue the run with: {again}")


def without_resume(argv: list[str]) -> list[str]:
    "`argv` without its `--resume` flag: bare, `--resume true|false` or `--resume=...`."
    out, skip = [], False
    for i, a in enumerate(argv):
        if skip: skip = False; continue
        if a.startswith('--resume='): continue
        if a == '--resume':
            skip = i + 1 < len(argv) and argv[i + 1].lower() in BOOL_WORDS
            continue
        out.append(a)
    return out


def save_run_config(cfg: PretrainConfig, run_dir: Path) -> Path:
    "The resolved config beside the run, loadable again with --config <run_dir>/config.yaml."
    data = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in ('config', 'resume', 'overwrite')}
    if not is_main_process(): return run_dir / 'config.yaml'
    return atomic_write_text(yaml.safe_dump(data, sort_keys=False), run_dir / 'config.yaml')


def end_trackers(learn: Learner, cfg: PretrainConfig, exported: dict[str, Path]) -> None:
    "The run's tracked runs ended after its export, which they get as artifacts with `tracking_artifacts`."
    if cfg.tracking_artifacts: learn.trackers.artifacts(exported.values())
    learn.trackers.end()
