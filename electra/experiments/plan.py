"""The plan of a comparison, made before anything runs: every variant's pretrain config resolved as pretrain.py will
resolve it (so a typo fails at once, naming the variant and the key), its steps at the budget, FLOPs per step, and
each pretraining run's and fine-tuning job's command line and folders."""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from electra.config.cli import load_config, preset_keys
from electra.config.compare import CompareConfig, VariantSpec
from electra.config.errors import ConfigError, RunWarning, need
from electra.config.file_names import safe_name
from electra.config.finetune import FinetuneConfig
from electra.config.paths import Owned, check_apart, check_case_apart
from electra.config.pretrain import PretrainConfig, corpus_name, percent
from electra.config.values import entry_sources, value_sources
from electra.data.tokenizer import load_tokenizer, trained_tokenizer
from electra.finetuning.tasks.glue.sources import open_source
from electra.finetuning.tasks.glue.tasks import TASKS
from electra.objective.flops import pretrain_flops_to_step, pretrain_step_flops
from electra.objective.model import padded_vocab_size
from electra.pretrained.generator import generator_net_config
from electra.runtime.files import FileDigests, path_inside
from electra.training.checkpoint import checkpoint_name, checkpoint_step
from electra.training.trackers import tracker_names

__all__ = ['cli_value', 'cli_pairs', 'VariantPlan', 'FinetunePoint', 'RunPlan', 'Plan', 'steps_at_budget', 'make_plan']


def cli_value(value, key: str) -> str:
    "A config value written as the command line of pretrain.py / finetune.py reads it back (`values._coerce`)."
    if isinstance(value, bool): return 'true' if value else 'false'
    if value is None: return 'none'
    if isinstance(value, dict): return yaml.safe_dump(value, default_flow_style=True, width=1 << 20).strip()
    if isinstance(value, (list, tuple)):
        items = [cli_value(v, key) for v in value]
        if any(',' in v for v in items):
            raise ConfigError(f"{key}: {value!r}: an entry holding a comma cannot be passed on the command line "
                              "(lists are comma-separated there); rename the file or folder.")
        return ','.join(items)
    return str(value)


def cli_pairs(values: dict, where: str = 'overrides') -> list[str]:
    "`--key value` for each item (`--key=value` where the value itself starts with --)."
    out = []
    for key, value in values.items():
        text = cli_value(value, f'{where}.{key}')
        out += [f'--{key}={text}'] if text.startswith('--') else [f'--{key}', text]
    return out


@dataclass(frozen=True)
class VariantPlan:
    "A variant at the comparison's budget: its preset chain, overrides, steps, warm-up and FLOPs."
    name: str
    preset: str            # the --config chain: pretrain_config, then the variant's presets
    overrides: dict        # pretrain_overrides then the variant's overrides (without steps and warmup_steps)
    steps: int
    warmup_steps: int
    flops_per_step: float  # the mean over the run (two-stage training's stages cost differently)
    total_flops: float     # what its steps spend (`pretrain_flops_to_step`: each stage at its own cost)
    config: PretrainConfig  # the resolved config of its first seed's run
    sources: dict          # where `preset` and each of `overrides` came from, as its jobs record it (`_through`)
    vocab: int             # the vocabulary rows its FLOPs count: its tokenizer's (padded: `pad_vocab_multiple`)
    vocab_assumed: bool    # `vocab` is `vocab_size`: its run trains its tokenizer, not trained yet (`_run_vocab`)
    over_common: tuple[str, ...] = ()  # the keys of pretrain_overrides its presets set instead (`_variant_base`)


@dataclass(frozen=True)
class FinetunePoint:
    "The fine-tuning of one checkpoint of a pretraining run: its fraction of the run, its step, model and job."
    fraction: float
    step: int              # the checkpoint's step (`checkpoint_step`, where pretrain.py saves it)
    flops: float           # the training FLOPs of the run's steps up to it (`pretrain_flops_to_step`)
    model: Path            # the exported discriminator (1.0) or the checkpoint <run_name>_<seed>_<pct>.pth
    group: str             # finetune.py's group: <finetune_dir>/<group>/results.csv
    args: list[str]        # finetune.py's command line
    sources: dict          # where each of its values came from, as finetune.py records it (`SOURCES_VAR`)


@dataclass(frozen=True)
class RunPlan:
    "One pretraining run (a variant and a seed) and the fine-tuning of its checkpoints, the finished run's last."
    variant: VariantPlan
    seed: int
    run_name: str
    pretrain_dir: Path     # pretrain.py's output_dir (checkpoints <run_name>_<seed>_<pct>.pth)
    pretrain_args: list[str]
    points: tuple[FinetunePoint, ...]  # by fraction; the last is 1.0
    pretrain_sources: dict  # where each of `pretrain_args` came from, as pretrain.py records it (`SOURCES_VAR`)

    @property
    def run_dir(self) -> Path: return _run_dir(self.pretrain_dir, self.run_name, self.seed)

    @property
    def model(self) -> Path: return self.run_dir / 'discriminator'

    @property
    def final(self) -> FinetunePoint: return self.points[-1]

    @property
    def group(self) -> str: return self.final.group

    @property
    def finetune_args(self) -> list[str]: return self.final.args

    def point(self, fraction: float) -> FinetunePoint: return next(p for p in self.points if p.fraction == fraction)

    @property
    def label(self) -> str: return f'{self.variant.name} (seed {self.seed})'


@dataclass(frozen=True)
class Plan:
    cfg: CompareConfig
    root: Path                     # <output_dir>/<name>
    variants: list[VariantPlan]
    runs: list[RunPlan]            # seed by seed, variants in table order
    finetune: FinetuneConfig | None
    tasks: list[str]               # the tasks with training runs (the table's columns)
    # the fine-tuning data's digests, each file read once for every run and checkpoint the comparison checks
    digests: FileDigests = field(default_factory=FileDigests, compare=False, repr=False)

    @property
    def finetune_dir(self) -> Path: return self.root / 'finetune'

    def group_dir(self, point: FinetunePoint) -> Path:
        "The folder of `point`'s fine-tuning (finetune.py's group), checked to be inside the comparison's."
        return path_inside(self.finetune_dir, point.group, key='output_dir')

    def runs_of(self, variant: str) -> list[RunPlan]:
        return [r for r in self.runs if r.variant.name == variant]


def _keys_hint(error: ConfigError, script: str) -> str:
    "The job's own message, its pointer to --help made a pointer to the job's --help (the keys are the job's)."
    text = str(error).replace('Run with --help for the list of keys.', f'`python {script} --help` lists its keys.')
    return text.replace('command line: ', 'overrides: ', 1)  # what the comparison passes on the command line


def _resolve(argv: list[str], where: str, quiet: bool = True) -> PretrainConfig:
    """The PretrainConfig pretrain.py builds from `argv`; a ConfigError names `where` (a variant, or the common keys).
    Its warnings (a warm-up as long as the run) are dropped when `quiet`, else repeated naming `where`."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always', RunWarning)
            cfg = load_config(PretrainConfig, argv, prog='pretrain.py')
    except ConfigError as e:
        raise ConfigError(f'{where}: {_keys_hint(e, "pretrain.py")}') from None
    for w in caught:
        if not quiet or not issubclass(w.category, RunWarning):
            warnings.warn(f'{where}: {w.message}', w.category, stacklevel=2)
    return cfg


def _looks_local(entry: str) -> bool:
    "Whether an init_from entry names a local file or folder: a .pth, or a path no hub name can be (org/name at most)."
    return entry.endswith('.pth') or entry.startswith(('/', '.', '~')) or entry.count('/') > 1


def _check_paths(cfg: PretrainConfig, where: str) -> None:
    """Every local file or folder a run reads exists (checked now, not when its run starts): its corpus entries, its
    tokenizer, the weights it starts from."""
    local = {'corpus': [e for e in cfg.corpus if not corpus_name(e)],
             'tokenizer': [cfg.tokenizer] if cfg.tokenizer else [],
             'init_from': [e.strip() for e in cfg.init_from.split(',') if _looks_local(e.strip())],
             'generator': [cfg.generator] if _looks_local(cfg.generator) else []}
    for key, entries in local.items():
        for entry in (e for e in entries if not Path(e).exists()):
            raise ConfigError(f"{where}: {key}: no such file or folder '{entry}' (from {Path.cwd()}). Set it with "
                              f"--pretrain.{key} PATH or pretrain_overrides: {{{key}: ...}}.")


def _frozen_generator(cfg: PretrainConfig):
    "The transformers config of a run's existing, frozen generator (its sizes count in the FLOPs), else None."
    return generator_net_config(cfg.generator) if cfg.generator else None


def _run_vocab(cfg: PretrainConfig, run_dir: Path, where: str) -> tuple[int, bool]:
    """The vocabulary rows a run's matmuls see, and whether they are assumed: its tokenizer's size, as pretrain.py
    reads it (a given `tokenizer`, a frozen generator's, else the one trained in its folder), padded to
    `pad_vocab_multiple` as its model is (`build_pretraining_model`); `vocab_size` (padded) while the tokenizer it
    trains is not trained yet, assumed (the comparison trains it before its first run: `runs.train_tokenizers`)."""
    if cfg.generator and not cfg.tokenizer: return _frozen_generator(cfg).vocab_size, False  # its own rows
    try: tok = load_tokenizer(cfg.tokenizer, cfg.lowercase, strip_accents=cfg.strip_accents) if cfg.tokenizer \
        else trained_tokenizer(run_dir)
    except ConfigError as e: raise ConfigError(f'{where}: {e}') from None
    size = cfg.vocab_size if tok is None else len(tok)
    return padded_vocab_size(size, cfg.pad_vocab_multiple), tok is None


def _run_dir(pretrain_dir: Path, run_name: str, seed: int) -> Path:
    "The folder of a pretraining run of the comparison (`RunPlan.run_dir`), as pretrain.py names it."
    return path_inside(pretrain_dir, f'{run_name}_{seed}', key='output_dir')


def _first_run_dir(cfg: CompareConfig, root: Path, variant: str) -> Path:
    "The folder of a variant's first seed's pretraining run (where its tokenizer is trained)."
    return _run_dir(root / 'pretrain', _run_name(cfg, variant), cfg.seeds[0])


def _run_name(cfg: CompareConfig, variant: str) -> str:
    return safe_name(f'{cfg.name}_{variant}', 'name, variants')


def steps_at_budget(budget: str, reference_steps: int, reference_flops: float, flops: float) -> int:
    "A variant's steps: the reference's, or those that spend the reference's FLOPs (at least 1)."
    if budget == 'steps': return reference_steps
    return max(1, round(reference_steps * reference_flops / flops))


def _variant_base(cfg: CompareConfig, spec: VariantSpec) -> tuple[str, dict, PretrainConfig, tuple[str, ...]]:
    """A variant's preset chain, merged overrides and config before the budget (its own steps and warm-up), and the
    keys of pretrain_overrides its presets set. A variant's own settings beat the common ones: pretrain_config <
    pretrain_overrides (and --pretrain.KEY) < the variant's presets < its overrides, so a common key its presets set
    is left off its command line (flags beat every preset)."""
    preset = ','.join(p for p in (cfg.pretrain_config.strip(), spec.config) if p)
    try: own = set(preset_keys(PretrainConfig, spec.config))
    except ConfigError as e: raise ConfigError(f"variant '{spec.name}' (--config {preset}): {e}") from None
    over = tuple(k for k in cfg.pretrain_overrides if k in own and k not in spec.overrides)
    overrides = {**{k: v for k, v in cfg.pretrain_overrides.items() if k not in over}, **spec.overrides}
    base = _resolve(['--config', preset, *cli_pairs(overrides, f'variants.{spec.name}.overrides')],
                    f"variant '{spec.name}' (--config {preset})")
    return preset, overrides, base, over


def _variant_plans(cfg: CompareConfig, root: Path) -> list[VariantPlan]:
    "Every variant resolved, its FLOPs per step counted, its steps and warm-up set by the budget."
    common = _resolve(['--config', cfg.pretrain_config, *cli_pairs(cfg.pretrain_overrides, 'pretrain_overrides')],
                      'pretrain_config / pretrain_overrides')  # a typo there is named as such, not as a variant's
    _check_paths(common, 'pretrain_config / pretrain_overrides')
    specs = {s.name: s for s in cfg.variant_specs()}
    bases = {name: _variant_base(cfg, spec) for name, spec in specs.items()}
    vocab = {name: _run_vocab(base, _first_run_dir(cfg, root, name), f"variant '{name}'")
             for name, (_, _, base, _) in bases.items()}
    flops = {name: pretrain_step_flops(base, vocab[name][0], _frozen_generator(base))
             for name, (_, _, base, _) in bases.items()}
    ref = bases[cfg.reference_name][2]
    ref_steps = cfg.steps or ref.steps
    plans = []
    for name, (preset, overrides, base, over) in bases.items():
        steps = steps_at_budget(cfg.budget, ref_steps, flops[cfg.reference_name], flops[name])
        # the same fraction of the run as its presets give, never rounded away: a short run would start at the peak
        warmup = max(1, round(base.warmup_steps * steps / base.steps)) if base.warmup_steps else 0
        kept = {k: v for k, v in overrides.items() if k not in ('steps', 'warmup_steps')}  # the budget's instead
        sources = _variant_sources(cfg, specs[name], kept)
        if cfg.finetune and not set(cfg.finetune_at) <= set(base.checkpoint_at):  # checkpoints to fine-tune
            kept['checkpoint_at'] = sorted(set(base.checkpoint_at) | set(cfg.finetune_at))
            sources['checkpoint_at'] = _made(cfg, "its finetune_at and the variant's checkpoint_at")
        argv = ['--config', preset, *cli_pairs(kept), '--steps', str(steps), '--warmup_steps', str(warmup),
                '--seed', str(cfg.seeds[0])]
        resolved = _resolve(argv, f"variant '{name}' (--config {preset})", quiet=False)
        _check_paths(resolved, f"variant '{name}'")
        spent = pretrain_flops_to_step(resolved, vocab[name][0], steps, _frozen_generator(resolved))
        plans.append(VariantPlan(name, preset, kept, steps, warmup, flops[name], spent, resolved, sources, *vocab[name],
                                 over))
    return plans


def _through(cfg: CompareConfig, key: str, entry: str | None = None) -> str:
    "Where the comparison's `key` (its `entry`) came from, as a job it passes the value to records it."
    where = value_sources(cfg)[key] if entry is None else entry_sources(cfg, key)[entry]
    return f'{where} (through the comparison {cfg.name})'


def _made(cfg: CompareConfig, what: str) -> str:
    "The source a job records of a value the comparison makes for it from `what` of its own."
    return f'the comparison {cfg.name}: {what}'


def _variant_sources(cfg: CompareConfig, spec: VariantSpec, overrides: dict) -> dict[str, str]:
    "Where a variant's preset chain and each of its `overrides` came from: the variant's own entry, or the common keys."
    own, common = _through(cfg, 'variants', spec.name), {k: _through(cfg, 'pretrain_overrides', k)
                                                         for k in cfg.pretrain_overrides}
    return {'config': _made(cfg, f'its pretrain_config and variant {spec.name}') if spec.config
            else _through(cfg, 'pretrain_config'),
            **{k: own if k in spec.overrides else common[k] for k in overrides}}


def _tracking_args(cfg: CompareConfig, tags: list[str]) -> list[str]:
    """The trackers of a job (none without `logger`): the comparison's group (tracking_group, else its name), its
    tracking_tags and `tags`, its neptune_project and tracking_artifacts."""
    if not tracker_names(cfg.logger): return []
    return ['--logger', ','.join(cfg.logger), '--neptune_project', cfg.neptune_project,
            '--tracking_group', cfg.tracking_group or cfg.name, '--tracking_tags',
            cli_value([*cfg.tracking_tags, *tags], 'tracking_tags'),
            '--tracking_artifacts', cli_value(cfg.tracking_artifacts, 'tracking_artifacts')]


def _tracking_sources(cfg: CompareConfig) -> dict[str, str]:
    "Where each of `_tracking_args` came from."
    if not tracker_names(cfg.logger): return {}
    return {'logger': _through(cfg, 'logger'), 'neptune_project': _through(cfg, 'neptune_project'),
            'tracking_group': _through(cfg, 'tracking_group') if cfg.tracking_group else _made(cfg, 'its name'),
            'tracking_tags': _made(cfg, 'its tracking_tags, variant and seed'),
            'tracking_artifacts': _through(cfg, 'tracking_artifacts')}


def _pretrain_args(cfg: CompareConfig, plan: VariantPlan, run_name: str, seed: int, out: Path) -> list[str]:
    return ['--config', plan.preset, *cli_pairs(plan.overrides), '--steps', str(plan.steps),
            '--warmup_steps', str(plan.warmup_steps), '--run_name', run_name, '--seed', str(seed),
            '--output_dir', str(out), '--threads', str(cfg.threads),
            *_tracking_args(cfg, [f'variant={plan.name}', f'seed={seed}']),
            '--resume']  # last, bare: pretrain.py's own continue command drops '--resume'


def _pretrain_sources(cfg: CompareConfig, plan: VariantPlan) -> dict[str, str]:
    "Where each of `_pretrain_args` came from."
    budget = _made(cfg, f'its budget ({cfg.budget})')
    return {**plan.sources, 'steps': budget, 'warmup_steps': budget, 'run_name': _made(cfg, 'its name and variant'),
            'seed': _through(cfg, 'seeds'), 'output_dir': _made(cfg, 'its output_dir and name'),
            'threads': _through(cfg, 'threads'), **_tracking_sources(cfg),
            'resume': _made(cfg, 'it resumes an interrupted run')}


def _finetune_overrides(cfg: CompareConfig) -> dict:
    """The finetune keys of every fine-tuning: finetune_overrides, where a per-task key given itself (--finetune.KEY,
    Python's overrides) replaces that key of the task_overrides a preset gave, as finetune.py's own rule does
    (`FinetuneConfig.command_line_wins`: a preset's task_overrides passed on as a flag would count as given and win
    in silence), said in its warning; task_overrides left empty by that are not passed on (finetune.py's rule then
    applies to its finetune_config's own)."""
    values, sources = dict(cfg.finetune_overrides), entry_sources(cfg, 'finetune_overrides')
    given = {k for k, where in sources.items() if where in ('command line', 'overrides')}
    if 'task_overrides' not in values or 'task_overrides' in given: return values
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always', RunWarning)
        kept = FinetuneConfig.command_line_wins(values, given)
    for w in caught: warnings.warn(f'finetune_overrides: {w.message}', w.category, stacklevel=2)
    if kept['task_overrides'] == {} != values['task_overrides']: del kept['task_overrides']
    return kept


def _finetune_args(cfg: CompareConfig, overrides: dict, model: Path, group: str, root: Path,
                   tags: list[str]) -> list[str]:
    tasks = ['--tasks', ','.join(cfg.tasks)] if cfg.tasks else []
    return ['--config', cfg.finetune_config, *cli_pairs(overrides, 'finetune_overrides'),
            '--model', str(model), *tasks, '--group', group, '--output_dir', str(root / 'finetune'),
            '--test_output_dir', str(root / 'finetune_predictions'), '--threads', str(cfg.threads),
            *_tracking_args(cfg, tags)]


def _finetune_sources(cfg: CompareConfig, overrides: dict, model: str) -> dict[str, str]:
    "Where each of `_finetune_args` came from; `model`: which pretraining of the comparison made the model."
    folders = _made(cfg, 'its output_dir and name')
    return {'config': _through(cfg, 'finetune_config'),
            **{k: _through(cfg, 'finetune_overrides', k) for k in overrides},
            'model': _made(cfg, model), **({'tasks': _through(cfg, 'tasks')} if cfg.tasks else {}),
            'group': _made(cfg, 'its variant and seed'), 'output_dir': folders, 'test_output_dir': folders,
            'threads': _through(cfg, 'threads'), **_tracking_sources(cfg)}


def _finetune_config(cfg: CompareConfig, argv: list[str]) -> tuple[FinetuneConfig, list[str]]:
    "The fine-tuning config every run gets (checked before anything runs), and its tasks that train."
    try:
        fcfg = load_config(FinetuneConfig, argv, prog='finetune.py')
        fcfg.check_task_kinds()
    except ConfigError as e:
        raise ConfigError(f'finetune_config / finetune_overrides / tasks: {_keys_hint(e, "finetune.py")}') from None
    glue = [TASKS[t] for t in fcfg.tasks if t in TASKS and not TASKS[t].predicted_by]
    if fcfg.data not in ('hub', 'demo') and glue:  # local GLUE files: each task's there (not found after pretraining)
        try: source = open_source(fcfg.data)
        except ConfigError as e: raise ConfigError(f'finetune_overrides: {e}') from None
        missing = [f'{t.name} {s}' for t in glue for s in ('train', *t.dev_splits) if not source.has(t, s)]
        need(not missing, 'finetune_overrides', f"data: {fcfg.data} has no {', '.join(missing)} (its tasks: set "
                                                f"`tasks` to those it holds).")
    return fcfg, [t for t in fcfg.task_names if not (t in TASKS and TASKS[t].predicted_by)]


def _points(cfg: CompareConfig, v: VariantPlan, run_name: str, seed: int, pretrain_dir: Path, root: Path,
            overrides: dict) -> tuple[FinetunePoint, ...]:
    """The checkpoints of one run to fine-tune, by fraction: the exported discriminator for 1.0 (group
    `<variant>_<seed>`), the checkpoint `.pth` before it (group `<variant>_<seed>_at<pct>pct`)."""
    points, at = [], {}
    for f in sorted(cfg.finetune_at):
        if (step := checkpoint_step(v.steps, f)) in at:  # the same weights: fine-tuned twice, two points of one state
            raise ConfigError(f"finetune_at: {at[step]:g} and {f:g} fall on one checkpoint step ({step} of {v.steps}) of "
                              f"variant {v.name}: the same weights would be fine-tuned twice. Give fractions at least "
                              f"a step apart (1/{v.steps} of the run here), or more steps.")
        at[step], final = f, f == 1.0
        model = (pretrain_dir / f'{run_name}_{seed}' / 'discriminator' if final
                 else pretrain_dir / checkpoint_name(run_name, seed, f))
        group = safe_name(f'{v.name}_{seed}' if final else f'{v.name}_{seed}_at{percent(f)}pct', 'variants')
        flops = pretrain_flops_to_step(v.config, v.vocab, step, _frozen_generator(v.config))
        tags = [f'variant={v.name}', f'seed={seed}', f'at={f:g}']
        made = f'its pretraining of {v.name}, seed {seed}' + ('' if final else f', at {f:g} of its steps')
        points.append(FinetunePoint(f, step, flops, model, group, _finetune_args(cfg, overrides, model, group, root, tags),
                                    _finetune_sources(cfg, overrides, made)))
    return tuple(points)


def make_plan(cfg: CompareConfig) -> Plan:
    """The whole comparison, resolved and checked: raises a ConfigError naming the variant and key before any launch."""
    root = path_inside(cfg.output_dir, cfg.name, key='output_dir')
    check_case_apart('name', cfg.output_dir, cfg.name, 'comparison', str)
    variants, runs, overrides = _variant_plans(cfg, root), [], _finetune_overrides(cfg) if cfg.finetune else {}
    for seed in cfg.seeds:
        for v in variants:
            run_name, pretrain_dir = _run_name(cfg, v.name), root / 'pretrain'
            runs.append(RunPlan(v, seed, run_name, pretrain_dir, _pretrain_args(cfg, v, run_name, seed, pretrain_dir),
                                _points(cfg, v, run_name, seed, pretrain_dir, root, overrides), _pretrain_sources(cfg, v)))
    fcfg, tasks = _finetune_config(cfg, runs[0].finetune_args) if cfg.finetune else (None, [])
    _check_apart(root, variants, fcfg)
    return Plan(cfg, root, variants, runs, fcfg, tasks)


def _check_apart(root: Path, variants: list[VariantPlan], fcfg: FinetuneConfig | None) -> None:
    """The comparison's folder apart from what its jobs read (config/paths.py): not inside a corpus, a tokenizer, the
    weights a variant starts from, the fine-tuning data or task files, and none of them inside it. (The fine-tuning
    reads the models the comparison's own pretraining writes there: that is each job's own check.)"""
    reads = [(f"{key} (variant '{v.name}')", given) for v in variants for key, given in v.config.inputs()]
    reads += [(f'finetune_overrides / tasks: {key}', given) for key, given in (fcfg.inputs() if fcfg else [])
              if key != 'model']
    check_apart([('output_dir', root)], [Owned('output_dir', root, '--name')], reads)
