"""The GLUE fine-tuning job's config: every key `finetune.py` takes, with the official small-model recipe as defaults.

Hyperparameters can be set per task with `task_overrides` (a mapping from task name to keys of `TASK_KEYS`);
`cfg.for_task(name)` gives the config a task's runs use. The defaults follow the official fine-tuning
(google-research/electra, configure_finetuning.py): 3 epochs, 10 for RTE and STS-B.
"""
from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from electra.config.errors import ConfigError, RunWarning, did_you_mean, need
from electra.config.fields import DIST_TIMEOUT_MAX, SEED_END, choice_field, field
from electra.config.file_names import how_names_differ, name_key, safe_name
from electra.config.paths import Owned, check_apart, check_case_apart, local_paths, path
from electra.config.registries import TASK_CATALOGUE, fill
from electra.config.shared_keys import TRACKER_KEYS, check_logger, optimizer_keys, threads_field, tracker_keys
from electra.config.values import CheckedConfig, config_from_dict, entry_sources, typed_keys, value_sources
from electra.config.yaml_reader import key_place

__all__ = ['FinetuneConfig', 'TASK_KEYS', 'RESULT_KEYS', 'INPUT_KEYS', 'JOB_KEYS', 'GLUE_TASKS', 'DATA_NAMES',
           'LOSS_REDUCTIONS', 'is_task_file', 'TaskCatalogue', 'register_task_catalogue', 'merged_overrides']

# every GLUE task, the default `tasks`, in the order of the task table (finetuning/tasks/glue/tasks.py)
GLUE_TASKS = ('CoLA', 'SST-2', 'MRPC', 'STS-B', 'QQP', 'MNLI', 'QNLI', 'RTE', 'WNLI', 'AX')
# the `data` values that name a source rather than a folder: the hub's GLUE (nyu-mll/glue), the project's sample tasks
DATA_NAMES = ('hub', 'demo')
# how a run turns each example's loss into the batch's (finetuning/loss.py)
LOSS_REDUCTIONS = ('sum', 'mean', 'token')

# keys a task may override in `task_overrides`
TASK_KEYS = ('lr', 'layer_lr_decay', 'layer_lr_mode', 'epochs', 'batch_size', 'eval_batch_size', 'max_length',
             'warmup_fraction', 'schedule', 'decay_power', 'weight_decay', 'adam_beta1', 'adam_beta2', 'adam_eps',
             'clip_grad', 'dropout', 'double_unordered', 'drop_empty', 'max_train_samples', 'stsb_scale',
             'length_bucketing', 'length_buckets', 'loss_reduction')

# Every key of the job by what a finished run's row is matched on when the sweep runs again (`finetuning/inputs.py`):
# each key is in exactly one of these three (tests/config/test_finetune.py). A row is reused only when the run's
# values of RESULT_KEYS (`precision` as it resolves on this device, `device` as its type, `double_unordered` as it
# applies to the task) and the torchrun job's number of processes are the row's. `length_buckets`, `compile`,
# `device` and the processes are among them although with every dropout 0 a run is the same with any of them (to
# float rounding): with dropout on, its masks follow the padded shape, a compiled step draws them from inductor's own
# stream, a GPU from its own generator, each process for its own rows: another draw (docs/fidelity.md) ...
RESULT_KEYS = ('lr', 'layer_lr_decay', 'layer_lr_mode', 'epochs', 'batch_size', 'max_length', 'warmup_fraction',
               'schedule', 'decay_power', 'weight_decay', 'adam_beta1', 'adam_beta2', 'adam_eps', 'clip_grad', 'dropout',
               'double_unordered', 'drop_empty', 'max_train_samples', 'stsb_scale', 'length_bucketing',
               'length_buckets', 'compile', 'loss_reduction', 'precision', 'device')
# ... and what these give the run is the row's: the model and the task's data by content (a copy elsewhere is the
# same), a task file by its settings (not its path or formatting), `seed` or `seeds` as the run's own seed,
# `task_overrides` as the task's values of RESULT_KEYS.
INPUT_KEYS = ('model', 'data', 'tasks', 'seed', 'seeds', 'task_overrides')
# The rest change where and how a job runs, not a run's numbers beyond float rounding: the GPU's index, threads, worker
# processes (`num_workers`, `parallel_runs`: each run whole in one process, tests/finetuning/test_workers.py), the
# compile mode of a compiled step, the evaluation batch (dev scoring has no dropout; padding is masked); `stack_runs`
# too, as a stacked run is the run with another draw of its dropout masks (docs/fidelity.md) and which stack a run
# joins depends on the runs left to do; the runs' number, selection and predictions come after the runs.
JOB_KEYS = ('config', 'runs', 'group', 'output_dir', 'test_output_dir', 'cache_dir', 'predict', 'num_workers',
            'parallel_runs', 'stack_runs', 'compile_mode', 'dist_timeout', 'threads', *TRACKER_KEYS,
            'select', 'ensemble_k', 'eval_batch_size', 'save_pretrained')


@dataclass(frozen=True)
class TaskCatalogue:
    """What checking `tasks` needs of the task kinds, which live above config: electra.finetuning registers it when
    imported (`register_task_catalogue`), which the first check imports (`registries`: the package names it), so
    config imports no job."""
    named: Callable[..., Any]      # (name, key, files) -> the GLUE task (`predicted_by`, `hf_text`), or a ConfigError
                                   # suggesting among the GLUE tasks and `files` (the job's task files by name)
    read_file: Callable[..., Any]  # path -> a task file's checked spec (`name`, `kind`, `hparams`, `text`)


_CATALOGUE: list[TaskCatalogue] = []


def register_task_catalogue(catalogue: TaskCatalogue) -> None:
    "Make `catalogue` the one that `FinetuneConfig` checks its tasks with."
    _CATALOGUE[:] = [catalogue]


def _catalogue() -> TaskCatalogue:
    if not _CATALOGUE: fill(TASK_CATALOGUE)  # a config checked before anything of fine-tuning was imported
    return _CATALOGUE[0]


def is_task_file(entry: str) -> bool:
    """Whether a `tasks` entry is a task file (YAML) rather than a GLUE task's name, by what it is: anything but a GLUE
    name that exists here, whatever its name (`my_task`, `tasks.json`; a folder, refused when read), or a name ending in
    .yaml or .yml (refused when read if there is no such file)."""
    entry = str(entry)
    return entry not in GLUE_TASKS and (Path(entry).exists() or entry.endswith(('.yaml', '.yml')))


QA_KINDS = ('squad', 'mrqa')  # the task kinds whose answers come from one run (electra/finetuning/tasks/qa)


def qa_no_ensemble(k: int, name: str) -> ConfigError:
    "The refusal of an ensemble of a QA task's runs, checked before any work (`check_task_kinds`) and by the task."
    return ConfigError(f"ensemble_k: {k}, but the answers of QA task {name} come from one run: ensembles are for "
                       f"classification and tagging tasks. Use --ensemble_k 1 (or predict: false), or put the QA task in "
                       f"a job of its own.")


def merged_overrides(base: dict, typed: dict) -> dict:
    "`typed` task_overrides merged over `base`, task by task and key by key: what is typed wins value by value."
    return {**base, **{t: {**base[t], **v} if isinstance(base.get(t), dict) and isinstance(v, dict) else v
                       for t, v in typed.items()}}


@dataclass
@optimizer_keys(after='warmup_fraction', weight_decay=0.0,
                weight_decay_help='decoupled weight decay (0 as in the paper and the replication; the official code '
                                  'uses 0.01)')
@tracker_keys(after='threads', tensorboard='<output_dir>/<group>/tensorboard/',
              runs='one tracked run per task, run and seed', group='group (a comparison sets its name)',
              tags=' (each run also gets task=<task>)',
              artifacts="each run's weights (<task>_<i>.pth), its save_pretrained folder where one is written and the "
                        "group's model card")
class FinetuneConfig(CheckedConfig):
    # the shipped presets `--config NAME` reads (`cli.load_config`, from Python too; not a key: unannotated)
    PRESETS = 'configs/finetune'
    # -- job
    config: str = field('demo', 'preset name in configs/finetune/ or a path to a YAML file')
    model: path = field('checkpoints/pretrain/demo_11081_100%.pth',
                       "pretrained discriminator: a pretrain.py .pth checkpoint, a save_pretrained directory or a hub "
                       "name such as google/electra-small-discriminator")
    data: path = field('hub', "'hub' (nyu-mll/glue), 'demo' (the project's sample tasks, written to cache_dir), a directory "
                             "in the GLUE download layout (<dir>/CoLA/train.tsv, ...) or of saved hub copies (<dir>/cola/)",
                       names=DATA_NAMES.__contains__)
    tasks: list[path] = field(list(GLUE_TASKS), 'tasks to fine-tune and predict: GLUE names (AX is predicted with the MNLI '
                                              'model) or task files (YAML: your own classification, regression or multi-label data, '
                                              'token tagging, SQuAD or MRQA; see the README)', min_items=1,
                              names=GLUE_TASKS.__contains__)
    runs: int = field(10, 'fine-tuning runs per task, each from the same pretrained weights with its own seed', gt=0)
    seed: int = field(0, 'run i uses seed + i (unless `seeds` is given)', ge=0, lt=SEED_END)
    seeds: list[int] = field([], 'explicit seed of each run (at least `runs` of them)', ge=0, lt=SEED_END,
                             empty='run i uses seed + i')
    group: str = field('demo', 'name of this sweep: outputs go to <output_dir>/<group>/ and <test_output_dir>/<group>/')
    output_dir: path = field('checkpoints/glue', 'fine-tuned weights (<group>/<task>_<i>.pth), the results table and the summary',
                             writes=True)
    test_output_dir: path = field('test_outputs', 'test predictions (<group>/<file>.tsv) and glue_submission.zip',
                                  writes=True)
    cache_dir: path = field('cache', 'token cache and the demo data', writes=True)
    predict: bool = field(True, 'after the runs, write the test predictions of the selected runs and the zip')
    device: str = field('auto', "'auto' (cuda if available), 'cpu', 'cuda' or 'cuda:N'")
    precision: str = choice_field('auto', ['auto', 'fp32', 'bf16', 'fp16'],
                                  'auto: bf16 on GPUs that have it, else fp16 on GPU; fp32 on CPU (bf16 also runs on '
                                  'a CPU with native bf16: AVX512-BF16, AMX)')
    num_workers: int = field(0, 'DataLoader worker processes', ge=0, zero='batches are loaded in the main process')
    parallel_runs: int = field(0, 'runs trained at once, each in a worker process of its own taking runs from a shared '
                                  'queue, on the visible GPUs in turn', ge=0, zero='one per visible GPU, 1 on the CPU')
    stack_runs: int = field(0, 'runs of a task trained together in one model pass (torch.func.vmap over their stacked '
                               'weights), each the run it is alone but for its dropout masks (docs/fidelity.md); '
                               '1: one run at a time', ge=0,
                            zero='all runs of a task on a GPU as far as its free memory holds them, 1 on the CPU')
    compile: bool = field(False, "each training step (forward, loss, backward, each run's clipping, Adam) as one graph, "
                                 'torch.compile(fullgraph=True) (torch >= 2.11; one process, fp32 or bf16); needs '
                                 'length_buckets, so that a few shapes compile; a stack pads every step to batch_size '
                                 "rows; with dropout on, inductor's own draw of the masks (docs/fidelity.md)")
    compile_mode: str = choice_field('default', ['default', 'reduce-overhead', 'max-autotune', 'max-autotune-no-cudagraphs'],
                                     "torch.compile mode with `compile`: 'reduce-overhead' replays each step as a CUDA "
                                     'graph (GPU), without the per-kernel launch cost of a small model')
    dist_timeout: int = field(1800, 'seconds a process of a torchrun job waits for the others before it stops the job',
                              gt=0, le=DIST_TIMEOUT_MAX)
    threads: int | str = threads_field()
    # -- selection
    select: str = choice_field('best', ['best', 'median'],
                           'run used for the test predictions: the best dev score (replication) or the median run '
                           '(with ensemble_k above 1 the top k, whatever it says: said in a warning)')
    ensemble_k: int = field(1, 'average the logits of the top k runs by dev score for the test predictions (1: no '
                                'ensemble)', ge=1)
    save_pretrained: str = choice_field('picked', ['picked', 'all', 'none'],
                                        "runs also written as a transformers folder (save_pretrained, <task>_<i>/ beside "
                                        "<task>_<i>.pth) where the head is transformers' own: the runs `select` and "
                                        "`ensemble_k` pick, every run, or none")
    # -- hyperparameters (the paper's Table 7; configure_finetuning.py); each may be set per task in `task_overrides`
    lr: float = field(3e-4, 'peak learning rate of the head (small 3e-4, base 1e-4, large 5e-5)', gt=0)
    layer_lr_decay: float = field(0.8, 'layer-wise learning-rate decay d (0.9 for large, 1 disables)', gt=0, le=1)
    layer_lr_mode: str = choice_field('official', ['official', 'intended'],
                                  "'official': top layer lr*d^2, embeddings lr*d^(L+2) (google-research/electra model/optimization.py `_get_layer_lrs`); "
                                  "'intended': top layer lr*d, embeddings lr*d^(L+1)")
    epochs: int = field(3, 'passes over the training set', gt=0)
    batch_size: int = field(32, 'training examples per step', gt=0)
    eval_batch_size: int = field(128, 'examples per batch when predicting dev and test sets', gt=0)
    max_length: int = field(128, 'tokens per example, [CLS] and [SEP] included (BERT truncation of the longer segment)',
                            ge=8, le=512)
    warmup_fraction: float = field(0.1, 'warm-up steps as a fraction of all training steps', ge=0, lt=1,
                                   zero='no warm-up')
    # (here: schedule, decay_power, weight_decay, adam_beta1, adam_beta2, adam_eps, clip_grad: `optimizer_keys`)
    loss_reduction: str = choice_field('sum', list(LOSS_REDUCTIONS),
                                       "the examples' losses summed over the batch, as the official run_finetuning.py "
                                       "(clipping then acts on batch_size times the mean's gradient), or 'mean' as "
                                       "PyTorch and the replication; 'token' (tagging): the mean over labelled words")
    dropout: float = field(0.1, 'dropout on the [CLS] vector before the output layer', ge=0, lt=1)
    length_bucketing: bool = field(False, 'train on batches of examples of similar length (less padding, faster; batches '
                                          'differ from the official random ones: docs/fidelity.md)')
    length_buckets: list[int] = field([], 'pad every batch up to the smallest of these lengths that holds it, e.g. '
                                          '[32, 64, 128]: a few fixed shapes for compiled code instead of one per '
                                          'batch length (padding is masked: the same results with every dropout '
                                          "0, another draw of the dropout masks otherwise; a row records it)", gt=0,
                                      empty='each batch padded to its longest example')
    stsb_scale: float = field(5.0, 'STS-B scores are learned divided by this: 5 as the official code (targets in [0, 1]); '
                                   '1 learns the raw 0-5 scores as the replication does. Predictions are always 0-5',
                                gt=0)
    double_unordered: bool = field(True, 'train on both segment orders for tasks whose segments are unordered (MRPC, STS-B); '
                                         'switch it on for another pair task in task_overrides')
    drop_empty: bool = field(True, 'drop training rows with an empty or blank text (QQP has some; task files too), '
                                     'said in a warning with their count')
    max_train_samples: int = field(0, 'use only this many training examples, a fixed random subset (for quick trials; '
                                      'more than a task has: all of them, with a warning)', ge=0, zero='all of them')
    task_overrides: dict = field({'RTE': {'epochs': 10}, 'STS-B': {'epochs': 10}},
                                 f"per-task settings, e.g. {{RTE: {{epochs: 10}}}}; keys: {', '.join(TASK_KEYS)}. A key "
                                 "given on the command line replaces the preset's per-task values of it and a task "
                                 "file's (said); typed, merged over the preset's task by task and key by key ({} "
                                 "for none)",
                                 entries=TASK_KEYS)

    @classmethod
    def command_line_wins(cls, values: dict, given: set, preset: dict | None = None,
                          sources: dict | None = None) -> dict:
        """What this command typed (the command line, a notebook's overrides) wins over the preset's task_overrides
        value by value. A per-task key given (`--epochs 1`) is meant for every task: it replaces that key in the
        preset's task_overrides, said in a warning (RTE trained the preset's 10 epochs after --epochs 1 without a
        word). task_overrides typed are merged over the preset's (`preset`: the values the presets gave), task by task
        and key by key: a typed `{MRPC: {epochs: 1}}` dropped the preset's `RTE: {epochs: 10}` in silence. A typed
        `{}` asks for none at all."""
        default = next(f for f in dataclasses.fields(cls) if f.name == 'task_overrides').default_factory()
        typed = values.get('task_overrides', {}) if 'task_overrides' in given else {}
        if 'task_overrides' in given and (preset is None or typed == {}): return values  # (typed {}: none at all)
        base = (preset if 'task_overrides' in given else values).get('task_overrides', default)
        if not isinstance(base, dict) or not isinstance(typed, dict): return values  # validate names the bad value
        kept, replaced = {}, []
        for task, keys in base.items():
            if isinstance(keys, dict):
                mine = typed.get(task) if isinstance(typed.get(task), dict) else {}
                replaced += [(task, k, v) for k, v in keys.items() if k in given and k not in mine]
                keys = {k: v for k, v in keys.items() if k not in given}
            if keys != {}: kept[task] = keys
        if replaced:  # `sources`: how each key was given ('command line', the default, or a notebook's 'overrides')
            how = {k: (sources or {}).get(k, 'command line') for k in sorted({k for _, k, _ in replaced})}
            flags = ', '.join(f'--{k} {values[k]}' if by == 'command line' else f'{k}={values[k]!r} ({by})'
                              for k, by in how.items())
            there = 'on the command line' if set(how.values()) == {'command line'} else 'in the overrides'
            was = '; '.join(f'{task} {k}: {v}' for task, k, v in replaced)
            warnings.warn(f"{flags} applies to every task: it replaces the preset's task_overrides ({was}). To keep a "
                          f"per-task value, give task_overrides {there} too.", RunWarning, stacklevel=2)
        return {**values, 'task_overrides': merged_overrides(kept, typed)}

    def validate(self) -> None:
        "The rules that relate several keys (each key's own domain is declared beside it, and checked when read)."
        self._check_task_files_found()
        files = self.file_tasks()  # reads and checks each task file
        for name in self.tasks:
            if not is_task_file(name): _catalogue().named(name)
        self._check_each_task_once()
        need('AX' not in self.tasks or 'MNLI' in self.tasks, 'tasks', 'AX is predicted with the MNLI model: add MNLI to tasks.')
        need(not self.seeds or len(self.seeds) >= self.runs, 'seeds', f'give at least `runs` ({self.runs}) seeds, or none.')
        twice = next((s for i, s in enumerate(self.seed_list) if s in self.seed_list[:i]), None)
        need(twice is None, 'seeds', f'{twice} is listed twice ({self.seed_list}); seeds must differ.')
        need(self.seed + self.runs <= SEED_END or bool(self.seeds), 'seed', f'run i uses seed + i: seed {self.seed} '
             f'with {self.runs} runs goes past numpy\'s seeds (below 2**32). Give a smaller seed.')
        safe_name(self.group, 'group')
        check_logger(self.logger)
        need(self.model != '', 'model', 'give a .pth checkpoint, a save_pretrained directory or a hub name.')
        need(self.ensemble_k <= self.runs, 'ensemble_k', f'must be at most runs ({self.runs}), got {self.ensemble_k}.')
        if self.ensemble_k > 1 and self.select != 'best':  # `select_runs`: an ensemble is the top k, whatever select says
            warnings.warn(f"select: {self.select} does not apply with ensemble_k {self.ensemble_k}: the test predictions "
                          f"average the top {self.ensemble_k} runs by dev score whatever select says, and "
                          f"save_pretrained's picked runs are those {self.ensemble_k}. Set ensemble_k 1 to submit the "
                          f"{self.select} run.", RunWarning, stacklevel=2)
        self._validate_hparams()
        self._validate_overrides(files)

    def _check_task_files_found(self) -> None:
        """A task file not found named as written, the path looked for and where `tasks` was set: a relative path in a
        preset is read from the current folder, not the preset's, which the user may not expect."""
        for entry in (e for e in self.tasks if is_task_file(e) and not Path(e).exists()):
            rule = '' if Path(entry).is_absolute() else (f' (a relative path is read from the current folder, '
                                                         f'{Path.cwd()}, wherever it is written)')
            raise ConfigError(f"{value_sources(self)['tasks']}: tasks: {entry!r} is no task file: there is none at "
                              f"{Path(entry).absolute()}{rule}. Give GLUE names or task YAML files; the demo's task "
                              "files are written by `python -m electra.finetuning.tasks.demo cache/demo_tasks`.")

    def _check_each_task_once(self) -> None:
        """Each task once, named with what gives it twice: a GLUE name listed twice, one task file by two paths, two
        task files of one `name`, or two names that differ only in case or Unicode form (their runs, results rows and
        test files would be one on macOS, and on Windows for case)."""
        seen: dict[str, tuple[str, str]] = {}  # the name's `name_key` -> the name and the entry of `tasks` giving it
        for entry, name in zip(self.tasks, self.task_names):
            if name_key(name) not in seen:
                seen[name_key(name)] = name, entry
                continue
            other, first = seen[name_key(name)]
            if other != name:
                how, where = how_names_differ(other, name)
                raise ConfigError(f"tasks: the task names {other!r} ({first}) and {name!r} ({entry}) differ {how}: "
                                  f"their files (<task>_<i>.pth, <task>.tsv) would be one {where}; rename one.")
            if not is_task_file(entry): raise ConfigError(f'tasks: {name} is listed twice; list each task once.')
            if Path(first).resolve() == Path(entry).resolve():
                named = '' if first == entry else f' ({first}, {entry})'  # (a path, or the path of a link to it)
                raise ConfigError(f'tasks: the task file {Path(entry).resolve()} is listed twice{named}; list each task '
                                  'once.')
            raise ConfigError(f"tasks: the task files {first} and {entry} both name the task {name!r}; give each its "
                              "own `name`.")

    def inputs(self) -> list[tuple[str, str]]:
        """(key, path) of every local file and folder the job reads: the model, the GLUE data folder, each task file
        and the data files it names."""
        files = [(f'tasks ({spec.name})', str(f)) for spec in self.file_tasks().values() for f in spec.files.values()]
        return [*local_paths('model', [self.model]), *local_paths('data', [self.data] if self.data not in DATA_NAMES
                                                                  else []),
                *local_paths('tasks', [t for t in self.tasks if is_task_file(t)]), *files]

    def check_folders(self) -> None:
        """The folders the job writes apart from what it reads (config/paths.py): its group's folders and cache_dir
        outside its inputs, no input in its group's folders. A model pretraining exported under checkpoints/ is read
        while the runs go to checkpoints/glue/<group>/: another job's output is an input like any other."""
        groups = [('output_dir', Path(self.output_dir) / self.group)]
        if self.predict: groups.append(('test_output_dir', Path(self.test_output_dir) / self.group))
        check_apart([*groups, ('cache_dir', self.cache_dir)], [Owned(k, f, '--group') for k, f in groups], self.inputs())
        for _, folder in groups: check_case_apart('group', folder.parent, self.group, 'group', str)

    def _validate_overrides(self, files: dict) -> None:
        "`task_overrides`: tasks of this job (GLUE names or task files' names) with per-task keys, checked."
        need(isinstance(self.task_overrides, dict), 'task_overrides', 'expected a mapping of task name to settings.')
        for name, values in self.task_overrides.items():
            task = None if name in files else _catalogue().named(str(name), key='task_overrides',
                                                                 files={n: f.path for n, f in files.items()})
            if task is not None and task.predicted_by:
                raise ConfigError(f"task_overrides: {name} has no training runs (it is predicted with the "
                                  f"{task.predicted_by} model); override {task.predicted_by} instead.")
            if not isinstance(values, dict):
                raise ConfigError(f"task_overrides.{name}: expected a mapping of key: value, got {values!r}.")
            for key in values:
                if key not in TASK_KEYS:
                    raise ConfigError(f"task_overrides.{name}: '{key}' cannot be set per task."
                                      f"{did_you_mean(str(key), TASK_KEYS)} "
                                      f"Per-task keys: {', '.join(TASK_KEYS)}.")
            pair = len(getattr(files[name], 'text', ())) == 2 if task is None else task.hf_text[1] is not None
            if values.get('double_unordered') and not pair:
                raise ConfigError(f"task_overrides.{name}: double_unordered needs a sentence-pair task; {name} has one segment.")
            try: self.for_task(name)  # type- and range-checks the overrides
            except ConfigError as e:
                raise ConfigError(str(e) if str(e).startswith('task_overrides') else f'task_overrides.{name}: {e}') from None

    def _validate_hparams(self) -> None:
        need(not self.length_buckets or max(self.length_buckets) >= self.max_length, 'length_buckets',
             f'the largest ({max(self.length_buckets, default=0)}) must hold max_length ({self.max_length}), or the '
             f'longest batches keep lengths of their own: add {self.max_length}.')
        need(not self.compile or bool(self.length_buckets), 'length_buckets',
             'compile needs a few fixed lengths to pad batches to, e.g. [32, 64, 128] (with max_length last): each '
             'new batch length would compile the step again.')
        need(not self.compile or self.precision != 'fp16', 'precision', "compile runs the step in one graph in fp32 or "
                                                                      "bf16; fp16's loss scaling skips steps on the host. "
                                                                      'Use --precision bf16, or drop --compile.')

    def file_tasks(self) -> dict:
        "The tasks of `tasks` given as task files (YAML): their checked `FileTaskSpec`s by name (no data read)."
        return {t.name: t for t in (_catalogue().read_file(e) for e in self.tasks if is_task_file(e))}

    @property
    def task_names(self) -> list[str]:
        "The names of `tasks`: GLUE names as given, a task file's `name` (default: its stem)."
        return [_catalogue().read_file(e).name if is_task_file(e) else e for e in self.tasks]

    @property
    def seed_list(self) -> list[int]:
        "The seed of each run."
        return list(self.seeds[:self.runs]) if self.seeds else [self.seed + i for i in range(self.runs)]

    def for_task(self, name: str) -> 'FinetuneConfig':
        """This config with the task's own values, each by one rule (README, "Tasks beyond GLUE"): what this invocation
        typed (the command line, a notebook's overrides; its `task_overrides` first) wins over the preset's
        `task_overrides`, which win over the task file's own values, which win over the task kind's defaults (QA and
        tagging: the official lengths), which win over the preset's keys and the defaults: as the official
        configure_finetuning.py `FinetuningConfig`, where a task's defaults (squad: max_seq_length 512, 2 epochs;
        chunk: 256) replace the general ones and only passed-in hparams replace them. `value_sources` of the result
        says where each value came from (a task file's with its line)."""
        spec = self.file_tasks().get(name) if any(map(is_task_file, self.tasks)) else None
        typed = typed_keys(self)
        kind = {k: v for k, v in getattr(spec, 'defaults', {}).items() if k not in typed}
        own = {k: v for k, v in getattr(spec, 'hparams', {}).items() if k not in typed}
        overrides = self.task_overrides.get(name, {})
        with warnings.catch_warnings():  # the job's keys' warnings were said when the job's config was read
            warnings.simplefilter('ignore', RunWarning)
            cfg = config_from_dict(FinetuneConfig, {**kind, **own, **overrides, 'task_overrides': {}},
                                   source=f'task_overrides.{name}', base=self)
        cfg._sources.update({k: f"the {spec.kind} kind's default" for k in kind if k not in {**own, **overrides}})
        cfg._sources.update({k: key_place(spec.path, k) for k in own if k not in overrides})
        cfg._sources.update(dict.fromkeys(overrides, self._entry_source(name)))  # the command line's, or a preset line
        return cfg

    def _entry_source(self, name: str) -> str:
        "Where task `name`'s entry of task_overrides came from: 'task_overrides.<name> (<its file and line, or the command line>)'."
        return f"task_overrides.{name} ({entry_sources(self, 'task_overrides').get(name, 'default')})"

    def command_line_over_task_files(self) -> list[str]:
        """A line for the log of each task file whose own values this invocation's typed keys, or task_overrides (typed
        or a preset's), replace (`for_task`)."""
        sources, typed, lines = value_sources(self), typed_keys(self), []
        for name, spec in self.file_tasks().items():
            entry, place = self.task_overrides.get(name, {}), self._entry_source(name)
            hit = {k: (entry[k], place) if k in entry else (getattr(self, k), f'the {sources[k]}')
                   for k in spec.hparams if k in entry or k in typed}
            if hit: lines.append(f'{name}: ' + '; '.join(f'{k} {value} from {where} replaces {k}: {spec.hparams[k]} of '
                                                         f'its task file ({key_place(spec.path, k)})'
                                                         for k, (value, where) in hit.items()))
        return lines

    def check_task_kinds(self) -> None:
        "Settings that only some task kinds take, checked against each task (a task's own config cannot: it lacks the others)."
        files = self.file_tasks()
        for name in self.task_names:
            kind = getattr(files.get(name), 'kind', 'GLUE')
            if kind != 'tagging' and self.for_task(name).loss_reduction == 'token':
                where = f'task_overrides.{name}.' if 'loss_reduction' in self.task_overrides.get(name, {}) else ''
                raise ConfigError(f"{where}loss_reduction: 'token' averages over a tagging task's labelled words; {name} "
                                  f"is a {kind} task: use sum or mean for it (task_overrides.{name}.loss_reduction).")
            task_cfg = self.for_task(name)
            if kind in QA_KINDS and task_cfg.predict and task_cfg.ensemble_k > 1: raise qa_no_ensemble(task_cfg.ensemble_k, name)

    def hparams(self) -> dict:
        "The per-task keys and their values (what a run's results depend on, with the model and data)."
        return {k: getattr(self, k) for k in TASK_KEYS}
