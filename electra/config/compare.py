"""The comparison job's config: every key `python -m electra.experiments.compare` takes. A comparison pretrains each
objective variant (a pretrain preset chain plus overrides) at an equal budget, fine-tunes every pretrained model the
same way, and tabulates the dev scores (the paper's Table 5 and Figure 3). Presets are in `configs/compare/`."""
from __future__ import annotations

from dataclasses import dataclass

from electra.config.errors import ConfigError, need
from electra.config.fields import SEED_END, choice_field, field
from electra.config.file_names import how_names_differ, name_key, safe_name
from electra.config.paths import path
from electra.config.finetune import GLUE_TASKS
from electra.config.shared_keys import THREADS_HELP, TRACKER_KEYS, check_logger, threads_field, tracker_keys
from electra.config.values import CheckedConfig

__all__ = ['CompareConfig', 'VariantSpec', 'PRETRAIN_RESERVED', 'FINETUNE_RESERVED']

# keys the comparison sets on every pretraining and fine-tuning command itself
PRETRAIN_RESERVED = ('config', 'run_name', 'seed', 'output_dir', 'resume', 'overwrite', 'threads', *TRACKER_KEYS)
FINETUNE_RESERVED = ('config', 'model', 'tasks', 'group', 'output_dir', 'test_output_dir', 'threads', *TRACKER_KEYS)


@dataclass(frozen=True)
class VariantSpec:
    "One variant of a comparison: its name, the pretrain preset(s) appended to `pretrain_config`, its own overrides."
    name: str
    config: str
    overrides: dict


def _variant_spec(name, value) -> VariantSpec:
    "A `variants` entry: nothing (no extra preset), a preset string, or {config: ..., overrides: {...}}."
    where = f'variants.{name}'
    safe_name(name, 'variants')
    if value is None: value = {}
    if isinstance(value, str): value = {'config': value}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a preset name or a mapping {{config: PRESET, overrides: {{key: value}}}}, "
                          f"got {value!r}.")
    unknown = sorted(set(value) - {'config', 'overrides'})
    need(not unknown, where, f"unknown key(s) {', '.join(map(str, unknown))}: a variant has 'config' (pretrain presets "
                             "appended to pretrain_config) and 'overrides' (pretrain keys).")
    config, overrides = value.get('config') or '', value.get('overrides') or {}
    need(isinstance(config, str), f'{where}.config', f"expected a preset name (or several, comma-separated), got {config!r}.")
    need(isinstance(overrides, dict), f'{where}.overrides', f"expected a mapping of pretrain keys, got {overrides!r}.")
    _check_reserved(overrides, (*PRETRAIN_RESERVED, 'steps'), f'{where}.overrides')
    return VariantSpec(name, config.strip(), dict(overrides))


def _check_reserved(overrides: dict, reserved: tuple, where: str) -> None:
    taken = [k for k in overrides if k in reserved]
    need(not taken, where, f"{', '.join(map(str, taken))} is set by the comparison itself (run names, seeds, output "
                           "folders, the step budget, CPU threads and trackers: see the keys name, seeds, output_dir, "
                           f"budget, steps, tasks, threads, {', '.join(TRACKER_KEYS)}).")


@dataclass
@tracker_keys(after='threads', tensorboard="each job's folder, and <output_dir>/<name>/tensorboard/ for the table and "
                                           'plot', runs="every job's runs in one group (MLflow: one experiment), tagged "
                                                        'variant=<variant> and seed=<seed> (fine-tuning: also '
                                                        "at=<fraction>), beside a run of the comparison's own with its "
                                                        'table and plot', group='name',
              tags=" (each job's runs also get variant=<variant> and seed=<seed>)",
              artifacts="each job's exports, fine-tuned weights and model cards (--tracking_artifacts of every job)")
class CompareConfig(CheckedConfig):
    # the shipped presets `--config NAME` reads (`cli.load_config`, from Python too; not a key: unannotated)
    PRESETS = 'configs/compare'
    # -- job
    config: str = field('demo', 'preset name in configs/compare/ or a path to a YAML file')
    name: str = field('compare', 'name of the comparison: everything goes to <output_dir>/<name>/, runs are named '
                                 '<name>_<variant>')
    output_dir: path = field('checkpoints/compare', 'where comparisons are written', writes=True)
    # -- pretraining
    pretrain_config: str = field('small', 'pretrain preset(s) common to every variant: a name in configs/pretrain/, '
                                          'a YAML path, or several comma-separated (applied left to right)')
    pretrain_overrides: dict = field({}, 'pretrain keys common to every variant (corpus, sizes, batch_size, device, '
                                         "...), over pretrain_config; a key a variant's presets or overrides set is "
                                         "the variant's; typed (command line, overrides) or as --pretrain.KEY VALUE, "
                                         "added to the preset's key by key")
    variants: dict = field({}, "the variants in table order: name -> {config: pretrain preset(s) appended to "
                               "pretrain_config ('' for none), overrides: {pretrain key: value}}; a bare preset name "
                               "also works (bert: bert). A variant's own presets and overrides beat pretrain_overrides")
    only: list[str] = field([], 'run only these variants (the table still lists all); empty: all')
    budget: str = choice_field('flops', ['flops', 'steps'],
                               "'flops': every variant gets the pretraining FLOPs of `reference` (its steps scaled by "
                               "FLOPs per step, warm-up kept the same fraction of the run, at least a step where "
                               "its presets warm up); 'steps': the same steps")
    reference: str = field('', "the variant whose steps set the budget; empty: the first variant")
    steps: int = field(0, 'pretraining steps of the reference variant', ge=0,
                       zero='its own, from its presets and overrides')
    seeds: list[int] = field([1], 'pretraining seeds: every variant is pretrained once per seed', ge=0, lt=SEED_END,
                             min_items=1)
    # -- fine-tuning
    finetune: bool = field(True, 'fine-tune every pretrained model and tabulate the dev scores (false: pretrain only)')
    finetune_config: str = field('small', 'finetune preset (configs/finetune/) or YAML path for every fine-tuning')
    finetune_overrides: dict = field({}, 'finetune keys (data, runs, epochs, lr, device, task_overrides, ...); typed '
                                         '(command line, overrides) or as --finetune.KEY VALUE, added to the '
                                         "preset's key by key")
    tasks: list[path] = field([], "tasks to fine-tune on (GLUE names or task files); empty: the finetune config's tasks",
                              names=GLUE_TASKS.__contains__)
    finetune_at: list[float] = field([1.0], "fractions of each pretraining run whose checkpoint is fine-tuned, 1.0 (the "
                                            "finished run) among them: several give each variant's score against "
                                            "pretraining compute along its run, as the curves of the paper's Figure 3",
                                   gt=0, le=1, min_items=1)
    # -- running
    threads: int | str = threads_field(f'--threads of every job it launches, one at a time: {THREADS_HELP}')
    dry_run: bool = field(False, 'print the plan (variants, steps, FLOPs per step, total FLOPs, status) and stop')
    table_only: bool = field(False, 'launch nothing: rebuild the table and plot from what is on disk (settings a run '
                                    'there was not made with are refused)')

    def validate(self) -> None:
        "The rules that relate several keys or entries (each key's own domain is declared beside it, checked when read)."
        safe_name(self.name, 'name')
        check_logger(self.logger)
        need(bool(self.output_dir), 'output_dir', 'give a folder.')
        need(bool(self.pretrain_config.strip()), 'pretrain_config', "give a pretrain preset, e.g. 'small' or 'demo'.")
        _check_reserved(self.pretrain_overrides, PRETRAIN_RESERVED, 'pretrain_overrides')
        specs = self.variant_specs()
        need(bool(specs), 'variants', "give at least one variant, e.g. {electra: {config: ''}, bert: {config: bert}}.")
        names = [s.name for s in specs]
        need(not self.reference or self.reference in names, 'reference',
             f"'{self.reference}' is not a variant; choose one of {', '.join(names)}.")
        folded = {}
        for name in names:  # run folders are named by the variant: one folder on macOS (and Windows, for case)
            other = folded.setdefault(name_key(name), name)
            how, where = how_names_differ(other, name)
            need(other == name, 'variants', f"'{other}' and '{name}' differ {how}: their run folders would be one "
                                            f"{where}. Rename one.")
        unknown = [v for v in self.only if v not in names]
        need(not unknown, 'only', f"{', '.join(unknown)} is not a variant; choose among {', '.join(names)}.")
        twice = sorted({v for v in self.only if self.only.count(v) > 1})
        need(not twice, 'only', f"{', '.join(twice)} is listed twice; list each variant once.")
        need(len(set(self.seeds)) == len(self.seeds), 'seeds', f'seeds must differ, got {self.seeds}.')
        need(not self.finetune or bool(self.finetune_config.strip()), 'finetune_config',
             "give a finetune preset, e.g. 'small' or 'demo'.")
        _check_reserved(self.finetune_overrides, FINETUNE_RESERVED, 'finetune_overrides')
        need(all(',' not in t for t in self.tasks), 'tasks', 'a task name or file path cannot contain a comma.')
        need(1.0 in self.finetune_at, 'finetune_at',
             f"1.0 (the finished run) must be among the fractions, e.g. [0.25, 0.5, 1.0]; got {self.finetune_at}.")
        need(len(set(self.finetune_at)) == len(self.finetune_at), 'finetune_at', f'a fraction is listed twice: {self.finetune_at}.')
        need(self.finetune or self.finetune_at == [1.0], 'finetune_at', 'fine-tuning is off (finetune: false).')

    def variant_specs(self) -> list[VariantSpec]:
        "The variants in table order, each checked."
        need(isinstance(self.variants, dict), 'variants', 'expected a mapping of variant name to its settings.')
        return [_variant_spec(name, value) for name, value in self.variants.items()]

    @property
    def reference_name(self) -> str:
        return self.reference or next(iter(self.variants))
