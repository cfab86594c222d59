"""Running a comparison's jobs: pretrain.py and finetune.py as subprocesses (through a launcher a test can replace),
each one's output in a log file, and a small JSON record beside each (its command, wall time, FLOPs, whether it
finished) by which a rerun skips what is done and resumes what was interrupted."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from electra.config.cli import SOURCES_VAR, parse_cli
from electra.config.errors import ConfigError
from electra.config.paths import made_absolute
from electra.config.pretrain import corpus_name
from electra.config.shared_keys import TRACKER_KEYS
from electra.config.values import config_to_dict
from electra.data.corpus import BuildSettings, corpus_text_files, resolve_corpus
from electra.data.tokenizer import TOKENIZER_DIR, get_tokenizer
from electra.experiments.plan import FinetunePoint, Plan, RunPlan
from electra.finetuning.inputs import data_digests
from electra.finetuning.results import ResultsTable
from electra.finetuning.sweep import job_tasks, resolve_data
from electra.pretrained.export import model_fingerprint
from electra.runtime.errors import TrainingStopped
from electra.runtime.files import atomic_write_text
from electra.runtime.processes import child_env, command_again, driver_path, environment, library_env
from electra.training.checkpoint import checkpoint_name, find_checkpoints

__all__ = ['RECORD', 'Launcher', 'RunFailed', 'subprocess_launcher', 'read_record', 'settings', 'changed_keys', 'corpus_data', 'pretrain_done',
           'check_as_planned', 'finetune_done', 'task_data', 'train_tokenizers', 'run_pretraining', 'run_finetuning', 'go_on']

RECORD = 'compare.json'  # the record of a job, in its run directory (pretraining) or group directory (fine-tuning)
# keys that may change between a run and its resume without changing what it computes; and the folders, which the
# records are found in (a comparison moved elsewhere, or named by another path, is the same comparison)
IGNORED_CHANGES = ('device', 'num_workers', 'num_proc', *TRACKER_KEYS, 'cache_dir', 'dist_timeout', 'compile',
                   'compile_mode', 'log_every', 'output_dir', 'test_output_dir', 'model', 'threads')

# who sends a job a signal that ends it without a word of its own
_BY = {signal.SIGKILL: ': kill -9, or the system out of memory'}
# a launcher runs `cmd` with its stdout and stderr appended to `log` and returns its exit status
Launcher = Callable[[list[str], Path], int]


class RunFailed(RuntimeError):
    "A pretraining or fine-tuning job of the comparison failed; the message names it and its log file."


def subprocess_launcher() -> Launcher:
    """The real launcher: `cmd` in a subprocess from the current folder, its output appended to `log`. A Ctrl-C reaches
    the job too (pretrain.py then writes a checkpoint and stops): it is waited for, and a second Ctrl-C kills it. A stop
    signal (`stop_on_signals`) is passed on to the job, which ignores it if its process group got it too, and waited
    for the same way. A job ends with this process (`end_with_parent`): a `kill -9` of the comparison does not leave
    it training unseen. It gets this process's environment as it is at its launch (`SOURCES_VAR`: where its values
    came from)."""
    def launch(cmd: list[str], log: Path) -> int:
        env = child_env(library_env({**os.environ, 'PYTHONUNBUFFERED': '1'}))
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, 'a', encoding='utf-8') as f:
            f.write(f"\n$ {shlex.join(cmd)}   # {datetime.now().isoformat(timespec='seconds')}\n")
            f.flush()
            proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
            try: return proc.wait()
            except KeyboardInterrupt as e:
                if getattr(e, 'signum', signal.SIGINT) != signal.SIGINT: proc.send_signal(e.signum)
                try: proc.wait(timeout=300)
                except (KeyboardInterrupt, subprocess.TimeoutExpired):
                    proc.kill()
                    proc.wait()
                raise
    return launch


def read_record(path: Path) -> dict:
    "A job's record, or {} (none yet, or unreadable: the job is then run again, resuming)."
    try: return json.loads(path.read_text(encoding='utf-8'))
    except (OSError, ValueError): return {}


def _write_record(path: Path, record: dict) -> None:
    atomic_write_text(json.dumps(record, indent=2) + '\n', path)


def settings(cfg) -> dict:
    """The values of a job's resolved config that can change what it computes (`IGNORED_CHANGES`, the preset chain's
    text, the run's name, seed and group left out: those are its command line's), as JSON keeps them. A preset file
    edited since gives other values under the same command line."""
    left_out = {*IGNORED_CHANGES, 'config', 'run_name', 'seed', 'group', 'resume'}
    values = {k: v for k, v in config_to_dict(cfg).items() if k not in left_out}
    return json.loads(json.dumps(values, default=str))


def _value_changes(record: dict, values: dict) -> dict[str, tuple]:
    "Each setting whose value differs from the record's (none for a record of an earlier version, without them)."
    old = record.get('values')
    if old is None: return {}
    return {k: (old.get(k, '(unset)'), values.get(k, '(unset)')) for k in sorted(set(old) | set(values))
            if old.get(k) != values.get(k) and not made_absolute(old.get(k), values.get(k))}


def changed_keys(record: dict, args: list[str], values: dict) -> list[str]:
    """The keys whose values differ between a job's record and its command line `args` and resolved `values` now
    (those that cannot change what a run computes left out): a flag changed, or a preset file edited."""
    a, b = parse_cli(record.get('args', [])), parse_cli(args)
    flags = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k) and k not in IGNORED_CHANGES]
    return [*flags, *(k for k in _value_changes(record, values) if k not in flags)]


def _changes(record: dict, args: list[str], values: dict) -> list[str]:
    "Each changed key (`changed_keys`) with its value then and now."
    a, b = parse_cli(record.get('args', [])), parse_cli(args)
    by_value = _value_changes(record, values)
    return [f"{k} {a.get(k, '(unset)')!r} then, {b.get(k, '(unset)')!r} now" if k in a or k in b
            else f"{k} {by_value[k][0]!r} then, {by_value[k][1]!r} now (from its preset files)"
            for k in changed_keys(record, args, values)]


def _tail(log: Path, n: int = 15) -> str:
    try: lines = log.read_text(encoding='utf-8', errors='replace').splitlines()
    except OSError: return '(no output)'
    return '\n'.join('    ' + line[-300:] for line in lines[-n:])


def _launch(launch: Launcher, cmd: list[str], log: Path, what: str) -> float:
    "Run one job; its wall seconds. A non-zero exit raises RunFailed naming `what` and the log, with its last lines."
    start = time.monotonic()
    status = launch(cmd, log)
    seconds = time.monotonic() - start
    if status == TrainingStopped.exit_status:  # the job stopped on a Ctrl-C or a stop signal (its own, or its group's)
        raise TrainingStopped(f"{what} was stopped by Ctrl-C or a stop signal, keeping a checkpoint or its finished "
                              f"runs (its output: {log}). {go_on()}")
    if status < 0:  # Popen's status of a process ended by a signal: minus the signal
        name = next((f'{s.name}{_BY.get(s, "")}' for s in signal.Signals if s == -status), 'unknown')
        raise RunFailed(f"{what} was killed by signal {-status} ({name}); its output is in {log}. Run the same command "
                        f"again to go on from its last checkpoint or finished runs. Its last lines:\n{_tail(log)}")
    refusal = _refusal(log) if status == 2 else None  # a driver's bad input: its one `error:` line
    if refusal: raise RunFailed(f"{what} was refused (its output: {log}): {refusal}")
    if status != 0:
        raise RunFailed(f"{what} failed (exit status {status}); its output is in {log}. Its last lines:\n{_tail(log)}")
    return seconds


def _refusal(log: Path) -> str | None:
    "The last `error:` line of a job's output (a driver's refusal of its input, exit status 2), without the prefix."
    try: lines = log.read_text(encoding='utf-8', errors='replace').splitlines()
    except OSError: return None
    return next((line[len('error: '):] for line in reversed(lines) if line.startswith('error: ')), None)


def go_on() -> str:
    "How a stopped comparison goes on: the same command, named (it resumes what was interrupted)."
    return f"Run the same command again to go on from there: {command_again(module='electra.experiments.compare')}"


def corpus_data(plan: Plan, run: RunPlan) -> dict[str, str]:
    """The local files of a run's corpus by content (sha256; a folder's visible files), kept in the record of a
    finished pretraining: a corpus edited since is launched again, and its `pretrain.py --resume` refuses it (the
    examples differ from the checkpoint's). The demo corpus and hub datasets count by name."""
    out = {}
    for entry in run.variant.config.corpus:
        p = Path(entry)
        if corpus_name(entry) or not p.exists(): out[entry] = ''
        elif p.is_file(): out[entry] = plan.digests(p).hex()
        else:
            for f in sorted(f for f in p.rglob('*') if f.is_file() and not any(
                    part.startswith('.') for part in f.relative_to(p).parts)):
                out[str(f)] = plan.digests(f).hex()
    return out


def pretrain_done(plan: Plan, run: RunPlan) -> bool:
    """Finished: its record says so for this very command and for its corpus as it is now (by content, `corpus_data`),
    and its exported discriminator exists."""
    record = read_record(run.run_dir / RECORD)
    return bool(record.get('done')) and not _changes(record, run.pretrain_args, settings(run.variant.config)) \
        and _same_corpus(record.get('corpus'), corpus_data(plan, run)) and (run.model / 'config.json').is_file()


def _same_corpus(then, now: dict) -> bool:
    "Whether a record's corpus (`corpus_data`) is `now`: the same files by content (an earlier version's named as typed)."
    return isinstance(then, dict) and list(then.values()) == list(now.values()) and (
        list(then) == list(now) or made_absolute(list(then), list(now)))


def _check_unchanged(run: RunPlan, record: dict) -> None:
    "Refuse to continue or reuse a run made with other settings: the comparison would mix two experiments."
    started = record.get('done') or find_checkpoints(run.pretrain_dir, run.run_name, run.seed)
    changes = _changes(record, run.pretrain_args, settings(run.variant.config)) if record.get('args') else []
    if started and changes:
        raise ConfigError(f"variant '{run.variant.name}' seed {run.seed} was pretrained in {run.run_dir} with other "
                          f"settings ({'; '.join(changes)}). Give the comparison another name, or delete that folder "
                          f"and its checkpoints {run.pretrain_dir / (run.run_name + '_' + str(run.seed))}_*.pth to redo it.")


def _launch_recorded(launch: Launcher, script: str, args: list[str], sources: dict, log: Path, what: str,
                     record: dict, path: Path, trains: bool = True) -> float:
    """Run the driver `script` with `args`, told where each came from (`sources`, in SOURCES_VAR: it records those,
    not 'command line'); its time (unless it `trains` nothing: the table's wall time is the training's) and, where the
    record counts them, an attempt are added to `record`, written to `path` however the job ends."""
    start = time.monotonic()
    try:
        with environment(**{SOURCES_VAR: json.dumps(sources)}):
            return _launch(launch, [sys.executable, str(driver_path(script)), *args], log, what)
    finally:
        if trains: record['wall_seconds'] = round(record['wall_seconds'] + time.monotonic() - start, 1)
        if 'attempts' in record: record['attempts'] += 1
        _write_record(path, record)


def _finish_record(record: dict, path: Path) -> None:
    record.update(done=True, finished_at=datetime.now(timezone.utc).isoformat(timespec='seconds'))
    _write_record(path, record)


def train_tokenizers(plan: Plan, say: Callable[[str], None]) -> bool:
    """Train, before any run, the tokenizer of each variant whose run trains its own and has none yet, in its first
    seed's run folder, where pretrain.py's `get_tokenizer` finds it and uses it: the plan, made again, then counts
    FLOPs and sets the budget at its real size (`plan._run_vocab`). A variant of the same corpus and tokenizer
    settings gets a copy (the training is deterministic). Whether any was trained."""
    made: dict[str, tuple[Path, int]] = {}  # settings -> the folder trained for them, its size
    for v in (v for v in plan.variants if v.vocab_assumed):
        cfg, run_dir = v.config, plan.runs_of(v.name)[0].run_dir
        sources = resolve_corpus(cfg.corpus, Path(cfg.cache_dir), BuildSettings.from_config(cfg))
        files = corpus_text_files(sources)
        key = json.dumps([[str(f) for f in files], [s.entry for s in sources], cfg.vocab_size, cfg.lowercase,
                          bool(cfg.strip_accents)])
        save_dir = run_dir / TOKENIZER_DIR
        if key in made:
            tmp = save_dir.with_name(f'.{save_dir.name}.{os.getpid()}.tmp')  # moved into place whole, as trained
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(made[key][0], tmp)
            shutil.rmtree(save_dir, ignore_errors=True)  # an interrupted attempt
            os.replace(tmp, save_dir)
            say(f'tokenizer of {v.name}: the same settings, {made[key][1]} tokens (in {save_dir})')
            continue
        tok = get_tokenizer('', files, cfg.vocab_size, cfg.lowercase, run_dir, sources, cfg.strip_accents)
        made[key] = save_dir, len(tok)
        say(f'tokenizer of {v.name}: trained, {len(tok)} tokens (in {save_dir})')
    return bool(made)


def run_pretraining(plan: Plan, run: RunPlan, launch: Launcher, say: Callable[[str], None]) -> dict:
    """Pretrain one variant and seed unless done (`pretrain.py --resume true`: from its latest checkpoint if any; a
    finished run whose record is of an earlier version, or whose corpus changed, is launched again to be checked)."""
    path, v = run.run_dir / RECORD, run.variant
    if pretrain_done(plan, run):
        say(f'pretrain {run.label}: done before; skipped')
        return read_record(path)
    old = read_record(path)
    _check_unchanged(run, old)
    values = settings(v.config)
    if not old.get('args') or _changes(old, run.pretrain_args, values): old = {}  # a new run: its time starts at 0
    log = run.run_dir / 'pretrain.log'
    record = {'variant': v.name, 'seed': run.seed, 'preset': v.preset, 'steps': v.steps, 'warmup_steps': v.warmup_steps,
              'flops_per_step': v.flops_per_step, 'total_flops': v.total_flops, 'vocab': v.vocab, 'args': run.pretrain_args,
              'values': values, 'corpus': old.get('corpus'), 'log': str(log), 'wall_seconds': float(old.get('wall_seconds', 0.0)), 'attempts': old.get('attempts', 0),
              'done': False}
    corpus = corpus_data(plan, run)  # recorded once the job ends well (until then, what the run was trained on)
    run.run_dir.mkdir(parents=True, exist_ok=True)
    _write_record(path, record)
    say(f'pretrain {run.label}: {v.steps:,} steps, {v.total_flops:.3g} FLOPs (log: {log})')
    # its last checkpoint there: the run finished (its --resume checks the export and trains nothing)
    trains = not (run.pretrain_dir / checkpoint_name(run.run_name, run.seed, 1.0)).is_file()
    seconds = _launch_recorded(launch, 'pretrain.py', run.pretrain_args, run.pretrain_sources, log,
                               f"pretraining of variant '{v.name}' seed {run.seed}", record, path, trains)
    if not (run.model / 'config.json').is_file():
        raise RunFailed(f"pretraining of variant '{v.name}' seed {run.seed} ended without exporting {run.model}; "
                        f"see {log}.")
    record['corpus'] = corpus
    _finish_record(record, path)
    say(f'pretrain {run.label}: finished in {seconds:.0f} s')
    return record


def check_as_planned(plan: Plan) -> None:
    """For a table rebuilt from what is on disk (`table_only`): refuse settings that a run there was not made with,
    since the table gives each variant the steps and FLOPs of the plan and the scores of the runs found."""
    changes = []
    for run in plan.runs:
        record = read_record(run.run_dir / RECORD)
        if record.get('args') and (record.get('done') or find_checkpoints(run.pretrain_dir, run.run_name, run.seed)):
            if found := _changes(record, run.pretrain_args, settings(run.variant.config)):
                changes.append(f"variant '{run.variant.name}' seed {run.seed} was pretrained with other settings "
                               f"({'; '.join(found)})")
        for point in run.points if plan.finetune is not None else []:
            record = read_record(plan.group_dir(point) / RECORD)
            if record.get('args') and (found := _changes(record, point.args, settings(plan.finetune))):
                changes.append(f"variant '{run.variant.name}' seed {run.seed} was fine-tuned with other settings "
                               f"({'; '.join(found)}) in {plan.group_dir(point)}")
    if changes:
        more = f" and {len(changes) - 1} other run(s) too" if len(changes) > 1 else ''
        raise ConfigError(f"table_only: {changes[0]}{more}: the table would give their scores at the settings of now. "
                          f"Tabulate them with the settings they were made with (python -m electra.experiments.compare "
                          f"--config {plan.root / 'compare.yaml'} --table_only true), or leave table_only out to run "
                          f"what these settings ask.")


def finetune_done(plan: Plan, run: RunPlan, point: FinetunePoint | None = None) -> bool:
    """Finished: the record of the fine-tuning of `point` (default: every point of the run) says so for this very
    command and for the tasks' data as they are now (by content, `task_data`), and its results table has every task's
    every run, fine-tuned from the model now at `point.model` (by its `model_fingerprint`: a run pretrained again is
    fine-tuned again; a checkpoint deleted since keeps its results). A record naming the model at another path (the
    comparison folder moved) is not done: finetune.py, launched again, skips the finished runs (by content) and writes
    the group's card and summary with the paths of now, and the record is written with them."""
    if point is None: return all(finetune_done(plan, run, p) for p in run.points)
    group = plan.group_dir(point)
    record = read_record(group / RECORD)
    if not record.get('done') or _changes(record, point.args, settings(plan.finetune)): return False
    if record.get('model', str(point.model)) != str(point.model): return False
    if record.get('data') is None or record['data'] != task_data(plan): return False
    df = ResultsTable(group / 'results.csv').df
    if point.model.exists(): df = df[df['model_fingerprint'] == model_fingerprint(point.model)]
    return all(((df['task'] == t) & (df['run'] == i)).any() for t in plan.tasks for i in range(plan.finetune.runs))


def task_data(plan: Plan) -> dict | None:
    """Each fine-tuning task's data by content, as finetune.py matches its rows (`inputs.data_digests`), kept in the
    record of a finished fine-tuning: data edited since are fine-tuned again (finetune.py then redoes the runs whose
    data changed and reuses the others). None where they cannot be read here (hub data offline, a missing folder):
    finetune.py is launched, and says why."""
    cfg = plan.finetune
    try: tasks = job_tasks(cfg, resolve_data(cfg.data, cfg.cache_dir))
    except (ConfigError, OSError): return None
    return {name: data_digests(task.data_files(), plan.digests) for name, task in sorted(tasks.items())}


def run_finetuning(plan: Plan, run: RunPlan, launch: Launcher, say: Callable[[str], None]) -> None:
    """Fine-tune each checkpoint of a pretrained run not done yet, the finished run first (the table's main scores);
    finetune.py itself skips the runs it finished before from the same inputs (its results table) and does the others
    again."""
    for point in (run.final, *run.points[:-1]):
        _finetune_point(plan, run, point, launch, say)


def _finetune_point(plan: Plan, run: RunPlan, point: FinetunePoint, launch: Launcher, say: Callable[[str], None]) -> dict:
    group = plan.group_dir(point)
    path, log = group / RECORD, group / 'finetune.log'
    at = '' if point.fraction == 1.0 else f' at {point.fraction:.4g} of pretraining (step {point.step:,})'
    if finetune_done(plan, run, point):
        say(f'fine-tune {run.label}{at}: done before; skipped')
        return read_record(path)
    if not point.model.exists():
        raise RunFailed(f"fine-tuning of variant '{run.variant.name}' seed {run.seed}{at}: its checkpoint {point.model} "
                        f"is missing (deleted, or the run was made without it in checkpoint_at).")
    old, values = read_record(path), settings(plan.finetune)
    same = not _changes(old, point.args, values)
    record = {'variant': run.variant.name, 'seed': run.seed, 'fraction': point.fraction, 'step': point.step,
              'model': str(point.model), 'args': point.args, 'values': values, 'data': task_data(plan), 'log': str(log),
              'wall_seconds': float(old.get('wall_seconds', 0.0)) if same else 0.0, 'done': False}
    group.mkdir(parents=True, exist_ok=True)
    _write_record(path, record)
    say(f"fine-tune {run.label}{at}: {', '.join(plan.tasks)}, {plan.finetune.runs} run(s) each (log: {log})")
    seconds = _launch_recorded(launch, 'finetune.py', point.args, point.sources, log,
                               f"fine-tuning of variant '{run.variant.name}' seed {run.seed}{at}", record, path)
    _finish_record(record, path)
    say(f'fine-tune {run.label}{at}: finished in {seconds:.0f} s')
    return record
