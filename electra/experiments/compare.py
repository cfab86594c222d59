"""Compare pretraining objectives at equal compute, as the paper's Table 5 and Figure 3:

    python -m electra.experiments.compare --config paper_table5 --pretrain.corpus my_corpus/
    python -m electra.experiments.compare --config stsb_cpu --dry_run true     # the plan, nothing run

Every variant (a pretrain preset chain plus overrides) is resolved and checked first, then pretrained once per seed
with `pretrain.py` (steps set by the budget: equal FLOPs or equal steps) and fine-tuned with `finetune.py`; the table
(`table.csv`, `table.md`; `curve.csv` when `finetune_at` names checkpoints along the runs) and the plot
(`plot.png`) go to `<output_dir>/<name>/`, and with `logger` to a tracked run of the comparison's own in its jobs'
group. Run again, it skips what is done,
resumes what was interrupted, and rebuilds the table from what is on disk. `--help` lists every key."""
from __future__ import annotations

import json
import shlex
import sys
import warnings
from pathlib import Path
from typing import Callable, Sequence

import yaml

from electra.config.cli import cli_args, load_config, parse_cli, project_dir, resolve_preset
from electra.config.compare import CompareConfig
from electra.config.errors import ConfigError, RunWarning
from electra.config.finetune import FinetuneConfig
from electra.config.pretrain import PretrainConfig
from electra.config.values import config_to_dict, resolved_entries, typed_keys, value_sources, with_entries
from electra.config.yaml_reader import load_yaml
from electra.experiments.plan import Plan, make_plan
from electra.experiments.runs import (RECORD, Launcher, RunFailed, changed_keys, check_as_planned, corpus_data, finetune_done, go_on,
                                      pretrain_done, read_record, settings, run_finetuning, run_pretraining,
                                      subprocess_launcher, train_tokenizers)
from electra.experiments.table import write_table
from electra.runtime.errors import TrainingStopped, friendly_errors, stopped_by
from electra.runtime.files import atomic_write_text, lock_run_dir, release_run_dir, writable_dir, writable_files
from electra.runtime.streams import LOG_NAME, log_to
from electra.training.checkpoint import checkpoint_name, find_checkpoints
from electra.training.trackers import TrackedRun, check_trackers, start_trackers, tracker_names

__all__ = ['load_compare_config', 'plan_text', 'run_comparison', 'main']

PROG = 'python -m electra.experiments.compare'
TRACKING_IDS = 'tracking.json'  # the comparison's own tracked run: its id in each tracker
# the files of the comparison's folder, written in place (the table's as each job ends)
COMPARISON_FILES = (LOG_NAME, 'compare.yaml', TRACKING_IDS, 'table.csv', 'curve.csv', 'table.md', 'plot.png')
# --pretrain.KEY VALUE and --finetune.KEY VALUE: one key of pretrain_overrides / finetune_overrides, over the preset's
_NESTED = {'pretrain.': 'pretrain_overrides', 'finetune.': 'finetune_overrides'}


def load_compare_config(argv: Sequence[str] | None = None, overrides: dict | None = None) -> CompareConfig:
    """The comparison's config: defaults < the preset(s) of --config (configs/compare/) < --key value flags, then the
    entries of pretrain_overrides / finetune_overrides this command gives (`_typed_entries`: --pretrain.KEY /
    --finetune.KEY flags, a typed mapping on the command line or in `overrides`) merged into the preset's key by key
    (--finetune.task_overrides merged over the preset's as finetune.py merges a typed one, `_typed_task_overrides`)."""
    argv = cli_args() if argv is None else list(argv)  # (None: the command line; none in a notebook)
    overrides = dict(overrides or {})
    plain, typed = _typed_entries(argv, overrides)
    cfg = load_config(CompareConfig, plain, default_preset='demo', prog=PROG, overrides=overrides)
    _check_steps_given_once(cfg, typed['pretrain_overrides'])
    finetune = {entry: value for entry, (value, _, _) in typed['finetune_overrides'].items()}
    _typed_task_overrides(finetune, cfg.finetune_overrides)
    for key, entries in typed.items():  # each entry keeps its source: the preset's line, the command line, overrides
        for source in dict.fromkeys(source for _, _, source in entries.values()):
            values = {e: finetune.get(e, v) if key == 'finetune_overrides' else v
                      for e, (v, _, by) in entries.items() if by == source}
            cfg = with_entries(cfg, key, values, source)
    return cfg


def _typed_entries(argv: list[str], overrides: dict) -> tuple[list[str], dict[str, dict[str, tuple]]]:
    """`argv` without its --pretrain.KEY / --finetune.KEY flags and typed pretrain_overrides / finetune_overrides
    mappings (`overrides` loses its mappings too), and the entries they give: key -> entry -> (value, as typed, source).
    A typed mapping adds to the preset's, as the flags do (it replaced all of it in silence); `{}` (none at all) and a
    value that is not a mapping stay for `load_config`. An entry given twice on the command line takes the last, as
    `parse_cli` does, said in a warning; on the command line and in `overrides`, it is refused as `load_config` does."""
    plain, typed, i = [], {key: {} for key in _NESTED.values()}, 0

    def add(key: str, entries: dict, as_typed: str, source: str) -> None:
        for entry, value in entries.items():
            if entry in typed[key] and source != typed[key][entry][2]:
                raise ConfigError(f"{key}: {entry} given twice: {typed[key][entry][1]} and {as_typed}. Give it once.")
            if entry in typed[key]:
                warnings.warn(f"{key}: {entry} given twice on the command line ({typed[key][entry][1]}, then "
                              f"{as_typed}): the last is taken.", RunWarning, stacklevel=3)
            typed[key][entry] = (value, as_typed, source)
    while i < len(argv):
        arg, prefix = argv[i], next((p for p in _NESTED if argv[i].startswith('--' + p)), None)
        has_value = '=' not in arg and i + 1 < len(argv) and not argv[i + 1].startswith('--')
        name = arg[2:].split('=', 1)[0].replace('-', '_')
        if prefix is None and name not in typed:
            plain.append(arg)
            i += 1
            continue
        ((key, value),) = parse_cli(argv[i:i + 1 + has_value]).items()
        as_typed = ' '.join(argv[i:i + 1 + has_value])
        if prefix is not None: add(_NESTED[prefix], {key[len(prefix):]: value}, as_typed, 'command line')
        elif isinstance(mapping := load_yaml(value, f'--{name}'), dict) and mapping: add(name, mapping, as_typed, 'command line')
        else: plain += argv[i:i + 1 + has_value]
        i += 1 + has_value
    for name in typed:
        if isinstance(mapping := overrides.get(name), dict) and mapping:
            add(name, overrides.pop(name), f"the overrides' {name} {mapping!r}", 'overrides')
    return plain, typed


def _check_steps_given_once(cfg: CompareConfig, pretrain: dict[str, tuple]) -> None:
    "A reference's `steps` typed beside a typed pretrain_overrides steps, which then sets the warm-up's fraction alone."
    if 'steps' not in pretrain or not cfg.steps or 'steps' not in typed_keys(cfg): return
    raise ConfigError(f"steps: --steps {cfg.steps} sets the reference variant's steps, and {pretrain['steps'][1]} "
                      f"would then only change its warm-up's fraction: give one of them.")


def _typed_task_overrides(typed: dict, preset: dict) -> None:
    """A typed --finetune.task_overrides (`typed`: the --finetune.KEY flags) merged over the comparison preset's
    (`preset`: its finetune_overrides) as finetune.py merges a typed one over its preset's
    (`FinetuneConfig.command_line_wins`): task by task and key by key, and a per-task key typed beside it
    (--finetune.epochs 1) replacing that key in the preset's entries, said in its warning (STS-B trained demo.yaml's 3
    epochs after --finetune.epochs 1 in silence). The flags' part of the merge is passed on to finetune.py as typed."""
    if isinstance(typed.get('task_overrides'), str):  # the flag's text, as YAML
        typed['task_overrides'] = load_yaml(typed['task_overrides'], '--finetune.task_overrides')
    if not isinstance(typed.get('task_overrides'), dict): return  # absent, or a bad value the config check names
    base = {'task_overrides': preset.get('task_overrides', {})}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always', RunWarning)
        merged = FinetuneConfig.command_line_wins({**preset, **typed}, set(typed), base)
    for w in caught: warnings.warn(f'finetune_overrides: {w.message}', w.category, stacklevel=3)
    typed['task_overrides'] = merged['task_overrides']


def _status(plan: Plan, run) -> str:
    "What a run of the plan is, as the real comparison would find it: done, to do, or refused (and by what)."
    if pretrain_done(plan, run):
        if plan.finetune is None: return 'pretrained (no fine-tuning)'
        return 'fine-tuned' if finetune_done(plan, run) else 'pretrained'
    record, started = read_record(run.run_dir / RECORD), find_checkpoints(run.pretrain_dir, run.run_name, run.seed)
    last = run.pretrain_dir / checkpoint_name(run.run_name, run.seed, 1.0)
    state = 'finished' if record.get('done') or last.is_file() else 'interrupted'
    keys = changed_keys(record, run.pretrain_args, settings(run.variant.config)) if record.get('args') else []
    if keys and (record.get('done') or started): return f"{state} with other {', '.join(keys)}: refused"
    if record.get('corpus') is not None and record['corpus'] != corpus_data(plan, run):
        return f'{state} on a corpus edited since: refused (pretrain.py --resume)'
    if state == 'finished': return 'finished: checked again (pretrain.py --resume)'  # an export gone, an older record
    return 'interrupted' if started else 'to do'


def plan_text(plan: Plan) -> str:
    "The plan: each variant's steps, warm-up, FLOPs per step and per run, each run's status, and the commands."
    cfg = plan.cfg
    ref = next(v for v in plan.variants if v.name == cfg.reference_name)
    budget = (f'equal FLOPs, those of {ref.name} at {ref.steps:,} steps' if cfg.budget == 'flops'
              else f'equal steps, {ref.steps:,}')
    lines = [f'comparison {cfg.name} in {plan.root}: {len(plan.variants)} variant(s) x {len(cfg.seeds)} seed(s); '
             f'budget: {budget}', '',
             f"{'variant':<20} {'steps':>12} {'warmup':>8} {'FLOPs/step':>11} {'FLOPs/run':>10}  status per seed"]
    for v in plan.variants:
        status = ', '.join(f'{r.seed}: {_status(plan, r)}' for r in plan.runs_of(v.name))
        lines.append(f'{v.name:<20} {v.steps:>12,} {v.warmup_steps:>8,} {v.flops_per_step:>11.3e} '
                     f'{v.total_flops:>10.3e}  {status}')
    total = sum(v.total_flops for v in plan.variants) * len(cfg.seeds)
    lines += ['', f'pretraining in all: {total:.3e} FLOPs', *_settings_notes(plan), '', 'commands (the first seed):']
    for r in plan.runs[:len(plan.variants)]:
        lines.append(f'  python pretrain.py {shlex.join(r.pretrain_args)}')
    if plan.finetune is not None:
        lines += [f'  python finetune.py {shlex.join(plan.runs[0].finetune_args)}',
                  f"fine-tuning: {', '.join(plan.tasks)}, {plan.finetune.runs} run(s) per task per pretrained model"]
        if len(cfg.finetune_at) > 1:
            at = ', '.join(f'{f:g}' for f in sorted(cfg.finetune_at))
            lines.append(f'  and per checkpoint at {at} of each pretraining run ({len(cfg.finetune_at)} fine-tunings '
                         f'per run; the .pth checkpoints, e.g. {plan.runs[0].points[0].model.name})')
    return '\n'.join(lines)


def _settings_notes(plan: Plan) -> list[str]:
    """What the plan's figures rest on: the variants counted at `vocab_size`, their tokenizers still to be trained;
    the common keys a variant's presets set instead (a variant's own settings beat pretrain_overrides)."""
    assumed = [v for v in plan.variants if v.vocab_assumed]
    lines = [f"FLOPs of {', '.join(v.name for v in assumed)} counted at vocab_size "
             f"{' / '.join(dict.fromkeys(str(v.vocab) for v in assumed))}: their runs train their tokenizer, its size "
             "known once trained (the comparison trains it before its first run)"] if assumed else []
    chains = {s.name: s.config for s in plan.cfg.variant_specs()}
    return lines + [f"variant {v.name}: its presets ({chains[v.name]}) set {', '.join(v.over_common)} over "
                    "pretrain_overrides" for v in plan.variants if v.over_common]


def _save_config(cfg: CompareConfig, root: Path) -> None:
    """The resolved comparison config, loadable again with --config, beside the table: from any folder the same jobs,
    the files its jobs read and the preset files of its chains named by absolute path (its own path keys are already:
    `CheckedConfig`), as its jobs keep theirs (`resolved_entries`); hub names and shipped presets by name."""
    values = {k: v for k, v in config_to_dict(cfg).items() if k not in ('config', 'dry_run', 'table_only', 'only')}
    values |= {'pretrain_config': _chain_files(cfg.pretrain_config, PretrainConfig),
               'finetune_config': _chain_files(cfg.finetune_config, FinetuneConfig),
               'pretrain_overrides': resolved_entries(PretrainConfig, cfg.pretrain_overrides),
               'finetune_overrides': resolved_entries(FinetuneConfig, cfg.finetune_overrides),
               'variants': {name: _variant_files(value) for name, value in cfg.variants.items()}}
    atomic_write_text(yaml.safe_dump(values, sort_keys=False, allow_unicode=True), root / 'compare.yaml')


def _variant_files(value):
    "A `variants` entry as written (a preset chain, a mapping, nothing), its preset files and its jobs' paths absolute."
    if isinstance(value, str): return _chain_files(value, PretrainConfig)
    if not isinstance(value, dict): return value
    chain, overrides = value.get('config'), value.get('overrides')
    return {**value, **({'config': _chain_files(chain, PretrainConfig)} if isinstance(chain, str) else {}),
            **({'overrides': resolved_entries(PretrainConfig, overrides)} if isinstance(overrides, dict) else {})}


def _chain_files(chain: str, job) -> str:
    "A preset chain of the job config class `job` with each file it names that is not a shipped preset by its path."
    shipped, out = project_dir(job.PRESETS), []
    for name in (n.strip() for n in chain.split(',') if n.strip()):
        with warnings.catch_warnings():  # (a file beside a shipped name: said when the comparison read the chain)
            warnings.simplefilter('ignore', RunWarning)
            file = resolve_preset(name, shipped)
        out.append(name if file == shipped / f'{name}.yaml' else str(file.absolute()))
    return ','.join(out)


def _check_outputs(plan: Plan) -> None:
    """Every folder the comparison and its jobs write, checked before the first launch (a job checks its own only when
    it starts, maybe hours in): the comparison's folder, its jobs' output folders and their caches; and no folder where
    the comparison writes a file (`COMPARISON_FILES`) or a job's record and log go."""
    writable_dir(plan.root, 'output_dir')
    writable_files(plan.root, COMPARISON_FILES, 'output_dir')
    for run in plan.runs:
        writable_files(run.run_dir, (RECORD, 'pretrain.log'), 'output_dir')
        for point in run.points if plan.finetune is not None else ():
            writable_files(plan.group_dir(point), (RECORD, 'finetune.log'), 'output_dir')
    folders = [plan.runs[0].pretrain_dir]
    if plan.finetune is not None:
        args = parse_cli(plan.runs[0].finetune_args)
        folders += [Path(args['output_dir']), *([Path(args['test_output_dir'])] if plan.finetune.predict else [])]
    for folder in folders: writable_dir(folder, 'output_dir', create=False)
    for cache in dict.fromkeys(v.config.cache_dir for v in plan.variants):
        writable_dir(cache, 'pretrain.cache_dir', create=False)
    if plan.finetune is not None: writable_dir(plan.finetune.cache_dir, 'finetune.cache_dir', create=False)


def _run_jobs(cfg: CompareConfig, plan: Plan, launch: Launcher, log: Callable[[str], None]) -> None:
    "Pretrain and fine-tune each variant and seed not done yet, seed by seed, rebuilding the table after each."
    _save_config(cfg, plan.root)
    for run in (r for r in plan.runs if not cfg.only or r.variant.name in cfg.only):
        try:
            run_pretraining(plan, run, launch, log)
            if plan.finetune is not None: run_finetuning(plan, run, launch, log)
        except KeyboardInterrupt as e:  # Ctrl-C, or a stop signal (`stop_on_signals`), which its job got too
            raise TrainingStopped(f'by {stopped_by(e)} during {run.label}; finished runs are kept, and so is what the '
                                  f'job it was running saved as it stopped (its log says what). {go_on()}') from None
        write_table(plan)


def _track_summary(cfg: CompareConfig, plan: Plan) -> None:
    """The table, curve and plot to the comparison's own tracked run, named as the comparison, in its jobs' group (no
    trackers: nothing). Its ids are kept in `tracking.json`, so that a later start goes on in the same run."""
    if not tracker_names(cfg.logger): return
    ids_file = plan.root / TRACKING_IDS
    ids = json.loads(ids_file.read_text()) if ids_file.is_file() else None
    run = TrackedRun(cfg.name, cfg.tracking_group or cfg.name, tuple(cfg.tracking_tags), config_to_dict(cfg),
                     value_sources(cfg), plan.root / 'tensorboard', cfg.neptune_project)
    tracked = start_trackers(cfg.logger, run, ids)
    atomic_write_text(json.dumps(tracked.ids), ids_file)
    tables = ['table.csv', *(['curve.csv'] if plan.finetune is not None and len(cfg.finetune_at) > 1 else [])]
    tracked.summary([plan.root / t for t in tables], [f for f in [plan.root / 'plot.png'] if f.is_file()])
    tracked.end()


def run_comparison(cfg: CompareConfig, launch: Launcher | None = None, log: Callable[[str], None] = print):
    """Plan (every config resolved and checked before anything runs), then pretrain and fine-tune each variant and
    seed not done yet (seed by seed, so that every variant has a result early), rebuilding the table after each.
    Returns the plan and the table (None for a dry run)."""
    plan = make_plan(cfg)
    if cfg.dry_run:
        log(plan_text(plan))
        return plan, None
    _check_outputs(plan)
    check_trackers(cfg.logger)  # before the first job: each would refuse the same trackers only when it starts
    log_to(plan.root)  # the comparison's own output (each job's is in its pretrain.log, finetune.log)
    launch = launch or subprocess_launcher()
    if not cfg.table_only:
        # one comparison of a name at a time: a second would launch jobs into the runs the first is training
        lock_run_dir(plan.root, 'comparison', 'name')
        try:
            if train_tokenizers(plan, log): plan = make_plan(cfg)  # its FLOPs and budget at the trained sizes
            _run_jobs(cfg, plan, launch, log)
        finally: release_run_dir(plan.root)
    else: check_as_planned(plan)
    table, text = write_table(plan)
    _track_summary(cfg, plan)
    log(f'\n{text}\n\ntable: {plan.root / "table.csv"}, {plan.root / "table.md"}; plot: {plan.root / "plot.png"}')
    return plan, table


def main(argv: Sequence[str] | None = None) -> None:
    friendly_errors()
    args = list(sys.argv[1:] if argv is None else argv)
    cfg = load_compare_config(args)
    try: run_comparison(cfg)
    except RunFailed as e:
        print(f'error: {e}', file=sys.stderr, flush=True)
        raise SystemExit(1) from None


if __name__ == '__main__':
    main()
