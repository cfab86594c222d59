"""electra/experiments/compare.py (and its plan, runs and table modules, and electra/config/compare.py): the steps at
equal FLOPs against pretrain_step_flops, the command lines read back by the drivers' own config loading, the table
against scores written by hand, resuming (finished runs skipped, an interrupted one launched again), failing early
(a bad key before any launch, naming the variant) and clearly (a failed job names its log); and one real comparison
through pretrain.py and finetune.py on the demo data."""
from __future__ import annotations

import contextlib
import io
import itertools
import json
import math
import re
import runpy
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from electra.config.cli import load_config, parse_cli
from electra.config.compare import CompareConfig
from electra.config.errors import ConfigError
from electra.config.finetune import FinetuneConfig
from electra.config.pretrain import PretrainConfig
from electra.config.values import config_from_dict
from electra.experiments.compare import COMPARISON_FILES, load_compare_config, main, run_comparison
from electra.experiments.plan import make_plan
from electra.experiments.runs import RECORD, RunFailed, finetune_done, pretrain_done, subprocess_launcher
from electra.finetuning.results import ResultsTable
from electra.finetuning.tasks.glue.demo import write_demo_glue
from electra.pretrained.export import model_fingerprint
from electra.objective.flops import pretrain_step_flops
from electra.runtime.errors import TrainingStopped

REPO = Path(__file__).resolve().parents[2]
TINY = {'hidden_size': 32, 'num_hidden_layers': 1, 'num_attention_heads': 1, 'intermediate_size': 64,
        'embedding_size': 32, 'eval_examples': 0, 'device': 'cpu'}


def comparison(tmp_path, **kw) -> CompareConfig:
    "Two variants given by overrides only (no objective preset needed), two seeds, fine-tuning on STS-B and MRPC."
    values = dict(name='t', output_dir=str(tmp_path / 'out'), pretrain_config='demo',
                  pretrain_overrides={**TINY, 'steps': 100, 'warmup_steps': 10},
                  variants={'electra': {'config': ''}, 'uniform': {'overrides': {'uniform_generator': True}}},
                  seeds=[1, 2], finetune_config='demo', tasks=['STS-B', 'MRPC'],
                  finetune_overrides={'runs': 2, 'predict': False, 'device': 'cpu', 'task_overrides': {}})
    return config_from_dict(CompareConfig, {**values, **kw})


def pretrain_cfg(*argv) -> PretrainConfig:
    return load_config(PretrainConfig, list(argv), preset_dir='configs/pretrain')


# -- the plan

@pytest.mark.parametrize('budget, reference, steps', [('flops', '', 0), ('flops', 'uniform', 0), ('flops', '', 1000),
                                                      ('steps', '', 0)])
def test_steps_at_equal_flops_against_a_hand_computation(tmp_path, budget, reference, steps):
    plan = make_plan(comparison(tmp_path, budget=budget, reference=reference, steps=steps))
    common = ['--config', 'demo', *[f'--{k}={v}' for k, v in TINY.items()]]
    flops = {'electra': pretrain_step_flops(e := pretrain_cfg(*common), e.vocab_size),
             'uniform': pretrain_step_flops(u := pretrain_cfg(*common, '--uniform_generator', 'true'), u.vocab_size)}
    assert flops['uniform'] < flops['electra']  # no generator network: a cheaper step
    ref = reference or 'electra'
    n = steps or 100
    for v in plan.variants:
        expected = n if budget == 'steps' else round(n * flops[ref] / flops[v.name])
        assert (v.steps, v.flops_per_step) == (expected, flops[v.name]), v.name
        assert v.warmup_steps == round(10 * expected / 100)  # 10% of the run, as the common overrides give
        assert v.total_flops == v.steps * v.flops_per_step
        assert (v.config.steps, v.config.warmup_steps) == (v.steps, v.warmup_steps)
    if budget == 'flops':
        totals = [v.total_flops for v in plan.variants]
        assert abs(totals[0] - totals[1]) <= max(flops.values())  # equal to within one step's rounding
        assert plan.variants[0].steps != plan.variants[1].steps


def test_the_commands_read_back_as_the_planned_configs(tmp_path):
    "Lists and mappings survive the command line: pretrain.py and finetune.py build exactly the planned configs."
    a, b = tmp_path / 'a.txt', tmp_path / 'b dir'
    a.write_text('x\n')
    b.mkdir()
    cfg = comparison(tmp_path, pretrain_overrides={**TINY, 'corpus': [str(a), str(b)], 'checkpoint_at': [0.5, 1.0],
                                                   'steps': 50, 'warmup_steps': 5},
                     finetune_overrides={'runs': 3, 'task_overrides': {'STS-B': {'epochs': 2}}, 'predict': False})
    plan = make_plan(cfg)
    run = plan.runs_of('uniform')[1]
    got = pretrain_cfg(*run.pretrain_args)
    assert (got.corpus, got.checkpoint_at, got.uniform_generator) == ([str(a), str(b)], [0.5, 1.0], True)
    assert (got.run_name, got.seed, got.steps, got.resume) == ('t_uniform', 2, run.variant.steps, True)
    assert Path(got.output_dir) == tmp_path / 'out' / 't' / 'pretrain' and run.run_dir == Path(got.output_dir) / 't_uniform_2'
    ft = load_config(FinetuneConfig, run.finetune_args, preset_dir='configs/finetune')
    assert (ft.model, ft.tasks, ft.group, ft.runs) == (str(run.model), ['STS-B', 'MRPC'], 'uniform_2', 3)
    # merged over the finetune preset's (demo: RTE 10 epochs)
    assert ft.task_overrides == {'RTE': {'epochs': 10}, 'STS-B': {'epochs': 2}}
    assert Path(ft.output_dir) == tmp_path / 'out' / 't' / 'finetune'
    assert [r.label for r in plan.runs] == ['electra (seed 1)', 'uniform (seed 1)', 'electra (seed 2)', 'uniform (seed 2)']



@pytest.mark.parametrize('keys, group, tags', [
    ({}, 't', []),
    ({'tracking_group': 'g', 'tracking_tags': ['sweep=a', 'smoke'], 'neptune_project': 'me/x',
      'tracking_artifacts': True}, 'g', ['sweep=a', 'smoke'])])
def test_every_job_gets_the_comparison_s_tracker_keys(tmp_path, keys, group, tags):
    """The trackers' keys are the same five in the three configs: the comparison's go to each job, its group (else the
    comparison's name), its tags before the job's own, its Neptune project and artifacts."""
    plan = make_plan(comparison(tmp_path, logger=['mlflow'], **keys))
    run = plan.runs_of('uniform')[1]
    pre, ft = pretrain_cfg(*run.pretrain_args), load_config(FinetuneConfig, run.finetune_args, preset_dir='configs/finetune')
    for got in (pre, ft):
        assert (got.logger, got.tracking_group, got.neptune_project, got.tracking_artifacts) == (
            ['mlflow'], group, keys.get('neptune_project', ''), keys.get('tracking_artifacts', False))
    assert pre.tracking_tags == [*tags, 'variant=uniform', 'seed=2'] and ft.tracking_tags[:len(tags) + 2] == [
        *tags, 'variant=uniform', 'seed=2']

def test_the_comparison_s_tasks_replace_its_fine_tuning_preset_s_task_file_unread(tmp_path, monkeypatch):
    "The preset demo_tasks names cache/demo_tasks/reviews.yaml, absent from an empty folder; the comparison's tasks win."
    monkeypatch.chdir(tmp_path)
    assert make_plan(comparison(tmp_path, finetune_config='demo_tasks', tasks=['STS-B'])).tasks == ['STS-B']
    with pytest.raises(ConfigError, match=r"finetune_config / finetune_overrides / tasks: .*configs/finetune/"
                                          r"demo_tasks\.yaml: line \d+: tasks: 'cache/demo_tasks/reviews\.yaml' is no "
                                          r"task file: there is none at "):
        make_plan(comparison(tmp_path, finetune_config='demo_tasks', tasks=[]))


def test_checkpoints_to_fine_tune_are_added_to_the_runs_checkpoint_at(tmp_path):
    "finetune_at fractions the runs would not save are added to checkpoint_at; the .pth checkpoints are the models."
    plan = make_plan(comparison(tmp_path, finetune_at=[0.3, 0.5, 1.0],
                                pretrain_overrides={**TINY, 'steps': 100, 'warmup_steps': 10, 'checkpoint_at': [0.5, 1.0]}))
    run = plan.runs_of('electra')[1]
    assert pretrain_cfg(*run.pretrain_args).checkpoint_at == [0.3, 0.5, 1.0]
    assert [(p.fraction, p.step, p.group) for p in run.points] == [
        (0.3, round(0.3 * run.variant.steps), 'electra_2_at30pct'), (0.5, round(0.5 * run.variant.steps), 'electra_2_at50pct'),
        (1.0, run.variant.steps, 'electra_2')]
    ft = load_config(FinetuneConfig, run.points[0].args, preset_dir='configs/finetune')
    assert (Path(ft.model), ft.group) == (run.pretrain_dir / 't_electra_2_30%.pth', 'electra_2_at30pct')
    assert Path(load_config(FinetuneConfig, run.finetune_args, preset_dir='configs/finetune').model) == run.model
    default = make_plan(comparison(tmp_path, finetune_at=[0.25, 1.0]))  # the default checkpoint_at has 0.25 already
    assert '--checkpoint_at' not in default.runs[0].pretrain_args


@pytest.mark.parametrize('change, match', [
    ({'variants': {'electra': {}, 'bert': {'overrides': {'hiden_size': 64}}}},
     r"variant 'bert' \(--config demo\): overrides: unknown key 'hiden_size'. Did you mean 'hidden_size'\? "
     r"`python pretrain.py --help` lists its keys."),
    ({'variants': {'electra': {}, 'bert': {'config': 'no_such_variant'}}},
     r"variant 'bert' \(--config demo,no_such_variant\): --config: unknown preset 'no_such_variant'"),
    ({'variants': {'electra': {}, 'big': {'overrides': {'num_attention_heads': 3}}}},
     r"variant 'big' .*num_attention_heads: hidden_size 32 is not divisible by 3 heads"),
    ({'pretrain_overrides': {'batch_sise': 8}}, r"pretrain_config / pretrain_overrides: .*'batch_sise'"),
    ({'pretrain_overrides': {'corpus': ['no/such/corpus.txt']}}, r"corpus: no such file or folder 'no/such/corpus.txt'"),
    ({'finetune_overrides': {'epoch': 2}}, r"finetune_config / finetune_overrides / tasks: .*'epoch'. Did you mean 'epochs'"),
    ({'tasks': ['STS-C']}, r'finetune_config / finetune_overrides / tasks: .*STS-C'),
    ({'finetune_overrides': {'loss_reduction': 'token'}},
     r"finetune_config / finetune_overrides / tasks: loss_reduction: 'token' averages over a tagging task's"),
])
def test_a_bad_setting_fails_before_anything_is_launched(tmp_path, change, match):
    calls = []
    with pytest.raises(ConfigError, match=match):
        run_comparison(comparison(tmp_path, **change), launch=lambda cmd, log: calls.append(cmd) or 0, log=lambda s: None)
    assert calls == [] and not (tmp_path / 'out').exists()


def latin1_vocab(tmp_path) -> str:
    (tmp_path / 'vocab.txt').write_bytes('[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\ncaf\u00e9\n'.encode('latin-1'))
    return str(tmp_path / 'vocab.txt')


@pytest.mark.parametrize('change, match', [
    (lambda t: {'pretrain_overrides': {**TINY, 'tokenizer': 'no/such/vocab.txt'}},
     r"pretrain_config / pretrain_overrides: tokenizer: no such file or folder 'no/such/vocab.txt'"),
    (lambda t: {'variants': {'electra': {}, 'warm': {'overrides': {'init_from': 'no/such/t_electra_1_100%.pth'}}}},
     r"variant 'warm': init_from: no such file or folder 'no/such/t_electra_1_100%.pth'"),
    (lambda t: {'pretrain_overrides': {**TINY, 'tokenizer': latin1_vocab(t)}}, r'vocab.txt: line 6: not UTF-8 text'),
], ids=['tokenizer', 'init_from', 'latin-1-vocab'])
def test_a_missing_or_unreadable_local_file_fails_before_anything_is_launched(tmp_path, change, match):
    "Before: the plan passed (C22 of the sweep), and the run failed when its pretraining started."
    calls = []
    with pytest.raises(ConfigError, match=match):
        run_comparison(comparison(tmp_path, **change(tmp_path)), launch=lambda cmd, log: calls.append(cmd) or 0,
                       log=lambda s: None)
    assert calls == [] and not (tmp_path / 'out').exists()


@pytest.mark.parametrize('change, match', [
    ({'variants': {'a': {'overrides': {'seed': 3}}}}, r'variants.a.overrides: seed is set by the comparison itself'),
    ({'variants': {'a': {'overrides': {'steps': 3}}}}, r'variants.a.overrides: steps is set by the comparison'),
    ({'variants': {'a': {'conifg': 'bert'}}}, r"variants.a: unknown key\(s\) conifg"),
    ({'variants': {'a/b': {}}}, r"variants: 'a/b' holds '/', which separates folders"),
    ({'variants': {}}, r'variants: give at least one variant'),
    ({'reference': 'bert'}, r"reference: 'bert' is not a variant"),
    ({'finetune_overrides': {'model': 'x'}}, r'finetune_overrides: model is set by the comparison'),
    ({'pretrain_overrides': {'threads': 2}}, r'pretrain_overrides: threads is set by the comparison itself .*CPU threads'),
    ({'seeds': [1, 1]}, r'seeds: seeds must differ'),
    ({'finetune_at': [0.5]}, r'finetune_at: 1.0 \(the finished run\) must be among the fractions'),
    ({'finetune_at': [0, 1]}, r"key 'finetune_at': \[0\.0, 1\.0\] is not a non-empty list of numbers in \(0, 1\] \(fractions"),
    ({'seeds': [-1]}, r"key 'seeds': \[-1\] is not a non-empty list of whole numbers in \[0, 2\*\*32\) \(pretraining seeds"),
    ({'finetune_at': [0.5, 0.5, 1]}, r'finetune_at: a fraction is listed twice'),
    ({'finetune_at': [0.5, 1], 'finetune': False}, r'finetune_at: fine-tuning is off'),
])
def test_the_comparison_config_refuses_what_it_cannot_run(tmp_path, change, match):
    with pytest.raises(ConfigError, match=match):
        comparison(tmp_path, **change)


def test_a_variant_twice_is_refused(tmp_path):
    "Two variants of one name: the last replaced the first, which was never run; 'only' twice; names equal but for case."
    path = tmp_path / 'mine.yaml'
    path.write_text("variants:\n  electra: {config: ''}\n  bert: {config: bert}\n  electra: {overrides: {mask_prob: 0.25}}\n")
    with pytest.raises(ConfigError, match=rf"^{path}: key 'electra' is given twice, on lines 2 and 4"):
        load_compare_config(['--config', str(path)])
    with pytest.raises(ConfigError, match=r"^only: electra is listed twice"):
        comparison(tmp_path, only=['electra', 'uniform', 'electra'])
    with pytest.raises(ConfigError, match=r"^variants: 'Electra' and 'electra' differ only in case: their run folders "
                                          r"would be one on a case-insensitive file system \(macOS, Windows\)\. Rename one\."):
        comparison(tmp_path, variants={'Electra': {'config': ''}, 'electra': {'config': 'bert'}})
    with pytest.raises(ConfigError, match=r"^variants: 'revi\u00e9w' and 'revie\u0301w' differ only in Unicode form "
                                          r"\(NFC, NFD: .*\): their run folders would be one on macOS, whose file "
                                          r"systems do not tell the forms apart\. Rename one\."):
        comparison(tmp_path, variants={'revi\u00e9w': {'config': ''}, 'revie\u0301w': {'config': 'bert'}})


def test_a_two_stage_run_s_flops_are_those_its_steps_spend_in_the_plan_and_the_table(tmp_path):
    """Two-stage training's first two_stage_switch steps train the generator alone (3 x its forward), the rest run it
    frozen (1 x) beside the discriminator (3 x). The plan's and the table's FLOPs/run were steps x the mean per step:
    45 steps switching at 22 were counted as if 22.5 trained the generator alone (a half step the run never took),
    0.34% below what the run spent and what the curve's row at fraction 1 says for the same run."""
    from electra.objective.flops import pretrain_flops
    cfg = comparison(tmp_path, variants={'electra': {'config': ''}, 'two': {'overrides': {
                         'two_stage': 0.5, 'generator_size': 1.0, 'tie_weights': 'none'}}},
                     steps=45, budget='steps', finetune_at=[0.5, 1.0])
    plan = make_plan(cfg)
    two = next(v for v in plan.variants if v.name == 'two')
    parts = pretrain_flops(two.config, two.config.batch_size, two.config.max_length, two.vocab,
                           int((0.15 + 0.005) * two.config.max_length))  # the official max_predictions_per_seq
    gen = parts['generator_encoder'] + parts['generator_head']
    disc = parts['discriminator_encoder'] + parts['discriminator_head']
    assert (two.steps, two.config.two_stage_switch) == (45, 22)  # round(22.5): Python rounds half to even
    by_hand = 22 * 3 * gen + 23 * (gen + 3 * disc)
    assert two.total_flops == pytest.approx(by_hand, rel=1e-12) and two.total_flops != two.steps * two.flops_per_step
    for run in (r for r in plan.runs if r.variant.name == 'two'):  # the curve's row at fraction 1: the same number
        assert run.final.flops == two.total_flops


def test_a_warm_up_kept_as_a_fraction_of_a_short_run_is_never_rounded_away(tmp_path):
    """The warm-up keeps its fraction of each variant's steps: 10 of 100 at 4 steps is 0.4, rounded to none, so the
    run started at the peak rate where its preset warms up (the same kind as fine-tuning's R28a-2)."""
    plan = make_plan(comparison(tmp_path, steps=4, budget='steps'))
    assert [(v.steps, v.warmup_steps) for v in plan.variants] == [(4, 1), (4, 1)]
    none = make_plan(comparison(tmp_path, steps=4, budget='steps',
                                pretrain_overrides={**TINY, 'steps': 100, 'warmup_steps': 0}))
    assert [v.warmup_steps for v in none.variants] == [0, 0]  # a preset without a warm-up keeps none


def test_two_finetune_at_fractions_on_one_checkpoint_step_are_refused_naming_the_variant(tmp_path):
    """At 40 steps 0.251 and 0.254 are both step 10: the same weights were fine-tuned twice and drawn as two points of
    the curve, said only in a pretraining job's log."""
    cfg = comparison(tmp_path, steps=40, budget='steps', finetune_at=[0.251, 0.254, 1.0])
    with pytest.raises(ConfigError, match=r"^finetune_at: 0\.251 and 0\.254 fall on one checkpoint step \(10 of 40\) "
                                          r"of variant electra: the same weights would be fine-tuned twice\. Give "
                                          r"fractions at least a step apart \(1/40 of the run here\), or more steps\.$"):
        make_plan(cfg)
    assert [p.step for p in make_plan(comparison(tmp_path, steps=40, budget='steps',
                                                 finetune_at=[0.25, 0.5, 1.0])).runs[0].points] == [10, 20, 40]


def test_command_line_keys_and_presets(tmp_path, capsys):
    "--pretrain.KEY / --finetune.KEY add to the preset's overrides; every preset loads; --help lists the keys."
    cfg = load_compare_config(['--config', 'demo', '--pretrain.steps', '50', '--finetune.runs=3', '--seeds', '1,2',
                               '--variants', '{a: "", b: {overrides: {uniform_generator: true}}}'])
    assert cfg.pretrain_overrides['steps'] == '50' and cfg.pretrain_overrides['eval_examples'] == 0
    assert cfg.finetune_overrides['runs'] == '3' and cfg.finetune_overrides['predict'] is False
    assert cfg.seeds == [1, 2] and [s.name for s in cfg.variant_specs()] == ['a', 'b']
    presets = sorted(p.stem for p in (REPO / 'configs' / 'compare').glob('*.yaml'))
    assert {'demo', 'paper_table5', 'training_algorithms', 'generator_size', 'tying', 'stsb_cpu'} <= set(presets)
    for name in presets:
        cfg = load_compare_config(['--config', name])
        presets_there = all((REPO / 'configs/pretrain' / f'{p}.yaml').is_file()
                            for s in cfg.variant_specs() for p in s.config.split(',') if p)
        if presets_there:  # the variants' objective presets exist: the whole plan resolves (corpus: the demo's)
            make_plan(load_compare_config(['--config', name, '--pretrain.corpus', 'demo', '--finetune.data', 'demo']))
    with pytest.raises(SystemExit):
        main(['--help'])
    assert '--pretrain_overrides' in capsys.readouterr().out


# -- running, with a launcher that fakes the jobs

SCORES = {  # (variant, pretraining seed) -> task -> the dev score of fine-tuning runs 0 and 1
    ('electra', 1): {'STS-B': [80, 82], 'MRPC': [76, 70]}, ('electra', 2): {'STS-B': [84, 86], 'MRPC': [74, 72]},
    ('uniform', 1): {'STS-B': [70, 71], 'MRPC': [60, 60]}, ('uniform', 2): {'STS-B': [72, 73], 'MRPC': [60, 60]},
}


MADE = itertools.count()  # the models the fake pretraining makes, each unlike the others


class FakeJobs:
    "Records each command; a pretraining exports a discriminator, a fine-tuning writes SCORES to its results table."

    def __init__(self, fail: str = ''):
        self.calls, self.fail = [], fail

    def __call__(self, cmd: list[str], log: Path) -> int:
        script, args = Path(cmd[1]).name, parse_cli(cmd[2:])
        self.calls.append((script, args))
        log.write_text(f'{script} running\nerror: something broke\n')
        if self.fail and self.fail in (f"{args.get('run_name')}_{args.get('seed')}", args.get('group')): return 1
        if script == 'pretrain.py':
            export = Path(args['output_dir']) / f"{args['run_name']}_{args['seed']}" / 'discriminator'
            export.mkdir(parents=True)
            (export / 'config.json').write_text(json.dumps({'made': next(MADE)}))  # each pretraining another model
            return 0
        table = ResultsTable(Path(args['output_dir']) / args['group'] / 'results.csv')
        for task, scores in self.scores(args['group']).items():
            for run, score in enumerate(scores):
                table.add({'task': task, 'run': run, 'seed': run, 'score': score, 'settings': 'x',
                           'model_fingerprint': model_fingerprint(args['model'])})
        table.add({'task': 'MRPC', 'run': 2, 'seed': 2, 'score': 0.0, 'settings': 'x'})  # beyond `runs`: not counted
        table.add({'task': 'RTE', 'run': 0, 'seed': 0, 'score': 0.0, 'settings': 'x'})   # not a task of the comparison
        return 0

    def scores(self, group: str) -> dict:
        "A fine-tuning group's dev scores: task -> those of runs 0 and 1."
        variant, seed = group.rsplit('_', 1)
        return SCORES[(variant, int(seed))]


class FakeCheckpointJobs(FakeJobs):
    "Pretraining also writes each checkpoint of its checkpoint_at; a checkpoint's fine-tuning scores 10 points less."

    def __call__(self, cmd: list[str], log: Path) -> int:
        from electra.training.checkpoint import checkpoint_name
        script, args = Path(cmd[1]).name, parse_cli(cmd[2:])
        if script == 'pretrain.py':
            out = Path(args['output_dir'])
            out.mkdir(parents=True, exist_ok=True)
            for f in map(float, str(args.get('checkpoint_at', '0.0625,0.125,0.25,0.5,1.0')).split(',')):
                (out / checkpoint_name(args['run_name'], int(args['seed']), f)).write_bytes(b'')
        return super().__call__(cmd, log)

    def scores(self, group: str) -> dict:
        final, _, at = group.partition('_at')
        return {task: [x - 10 * bool(at) for x in xs] for task, xs in super().scores(final).items()}


def launched(jobs: FakeJobs) -> list[str]:
    return [f"{s}:{a.get('run_name', a.get('group'))}:{a.get('seed', '')}" for s, a in jobs.calls]


def test_the_table_holds_the_scores_and_a_rerun_skips_what_is_done(tmp_path):
    cfg = comparison(tmp_path)
    jobs = FakeJobs()
    plan, table = run_comparison(cfg, launch=jobs, log=lambda s: None)
    assert launched(jobs) == ['pretrain.py:t_electra:1', 'finetune.py:electra_1:', 'pretrain.py:t_uniform:1',
                              'finetune.py:uniform_1:', 'pretrain.py:t_electra:2', 'finetune.py:electra_2:',
                              'pretrain.py:t_uniform:2', 'finetune.py:uniform_2:']
    root = tmp_path / 'out' / 't'
    csv = pd.read_csv(root / 'table.csv').set_index('variant')
    e, u = csv.loc['electra'], csv.loc['uniform']
    # electra STS-B: 80 82 84 86 -> mean 83, sample std sqrt(20/3); MRPC: 76 70 74 72 -> 73, sqrt(20/3)
    assert (e['STS-B'], e['STS-B_runs'], e['MRPC']) == (83, 4, 73)
    assert e['STS-B_std'] == pytest.approx(math.sqrt(20 / 3), abs=1e-5) and e['MRPC_std'] == pytest.approx(math.sqrt(20 / 3), abs=1e-5)
    # the average over tasks of each run: 78 76 79 79 -> 78, sample std sqrt(6/3)
    assert e['average'] == 78 and e['average_std'] == pytest.approx(math.sqrt(2), abs=1e-5)
    assert (u['STS-B'], u['STS-B_std'], u['MRPC'], u['MRPC_std'], u['average']) == pytest.approx((71.5, math.sqrt(5 / 3), 60, 0, 65.75), abs=1e-5)
    for name, v in zip(('electra', 'uniform'), plan.variants):
        row = csv.loc[name]
        assert (row['steps'], row['pretrain_runs']) == (v.steps, 2)
        assert row['pretrain_flops'] == pytest.approx(v.steps * v.flops_per_step, rel=1e-5)
        walls = [json.loads((r.run_dir / RECORD).read_text())['wall_seconds'] for r in plan.runs_of(name)]
        assert row['wall_seconds'] == pytest.approx(sum(walls) / 2, abs=1e-3)
    md = (root / 'table.md').read_text()
    assert '| variant | steps | pretrain FLOPs | wall time | STS-B (spearman) | MRPC (accuracy) | average |' in md
    assert f"| electra | {plan.variants[0].steps:,} |" in md and '| 83.00 ± 2.58 | 73.00 ± 2.58 | 78.00 ± 1.41 |' in md
    assert (root / 'plot.png').read_bytes()[:4] == b'\x89PNG' and (root / 'compare.yaml').is_file()
    record = json.loads((plan.runs[1].run_dir / RECORD).read_text())
    assert record['done'] and record['total_flops'] == plan.variants[1].total_flops and record['steps'] == plan.variants[1].steps
    again = FakeJobs()
    _, table2 = run_comparison(cfg, launch=again, log=lambda s: None)
    assert again.calls == [] and table2.equals(table)
    with pytest.raises(ConfigError, match=r"variant 'electra' seed 1 was pretrained .* with other settings \(steps '100' then, '120' now"):
        run_comparison(comparison(tmp_path, steps=120), launch=again, log=lambda s: None)
    assert again.calls == []


def test_a_run_pretrained_again_is_fine_tuned_again(tmp_path):
    "Its folder deleted to redo it, as the refusal of changed settings says: the old fine-tuning is of another model."
    cfg = comparison(tmp_path, seeds=[1])
    run_comparison(cfg, launch=FakeJobs(), log=lambda s: None)
    shutil.rmtree(make_plan(cfg).runs[0].run_dir)
    again = FakeJobs()
    run_comparison(cfg, launch=again, log=lambda s: None)
    assert launched(again) == ['pretrain.py:t_electra:1', 'finetune.py:electra_1:']
    # a fine-tuned checkpoint deleted afterwards (to save space): its results stand
    plan = make_plan(cfg)
    shutil.rmtree(plan.runs[1].model)
    assert finetune_done(plan, plan.runs[1])


def test_a_comparison_folder_moved_fine_tunes_nothing_again_but_rewrites_what_names_its_old_paths(tmp_path):
    """A comparison folder moved (`mv`) and run again was all "done before; skipped": its groups' records, cards and
    summaries named the old folder's paths. The fine-tuning of a group whose recorded model is not where that model
    is now is launched again (finetune.py skips its finished runs by content and writes its card and summary with
    the paths of now) and recorded there; then nothing is launched."""
    cfg = comparison(tmp_path, seeds=[1])
    run_comparison(cfg, launch=FakeJobs(), log=lambda s: None)
    (tmp_path / 'out').rename(tmp_path / 'moved')
    moved = comparison(tmp_path, seeds=[1], output_dir=str(tmp_path / 'moved'))
    again = FakeJobs()
    run_comparison(moved, launch=again, log=lambda s: None)
    assert launched(again) == ['finetune.py:electra_1:', 'finetune.py:uniform_1:']
    plan = make_plan(moved)
    for run in plan.runs:
        record = json.loads((plan.group_dir(run.final) / RECORD).read_text())
        assert record['model'] == str(run.final.model) and str(tmp_path / 'moved') in record['model']
    last = FakeJobs()
    run_comparison(moved, launch=last, log=lambda s: None)
    assert last.calls == []


def test_compare_yaml_names_its_files_by_absolute_path_and_plans_the_same_jobs_from_any_folder(tmp_path, monkeypatch):
    """compare.yaml, "loadable again with --config", kept the jobs' paths as typed in the overrides and the preset
    chains: loaded from another folder holding a `dup/a.txt` and a `mine.yaml` of its own, it planned jobs over those.
    Now each names what the comparison read (the jobs' own configs are absolute too), a hub corpus and a shipped preset
    by name, and the plan from the other folder is the one from the first."""
    from electra.data.demo import write_demo_corpus
    first, other = tmp_path / 'first', tmp_path / 'other'
    for folder, steps in ((first, 40), (other, 7)):
        write_demo_corpus(folder / 'dup' / 'a.txt', n_docs=20)
        (folder / 'mine.yaml').write_text(f'steps: {steps}\n')
        (folder / 'glue').mkdir()
    monkeypatch.chdir(first)
    vocab = tmp_path / 'vocab.txt'  # the hub variant's own tokenizer: the comparison trains none on a hub corpus here
    vocab.write_text(''.join(w + '\n' for w in ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'a', 'b']))
    cfg = comparison(tmp_path, seeds=[1], pretrain_config='demo,./mine.yaml', finetune=False, tasks=[],
                     pretrain_overrides={**TINY, 'corpus': 'dup/a.txt'},
                     variants={'electra': '', 'hub': {'overrides': {'corpus': ['hub:wikitext', 'dup/a.txt'],
                                                                'tokenizer': str(vocab)}}},
                     finetune_overrides={'data': 'glue', 'runs': 1})
    hub_steps = run_comparison(cfg, launch=FakeJobs(), log=lambda s: None)[0].variants[1].steps
    assert hub_steps > 40  # at equal FLOPs: its 7-token vocabulary's steps are cheaper
    saved = tmp_path / 'out' / 't' / 'compare.yaml'
    monkeypatch.chdir(other)
    again = load_compare_config(['--config', str(saved)])
    corpus = str(first / 'dup' / 'a.txt')
    assert (again.pretrain_config, again.pretrain_overrides['corpus']) == (f"demo,{first / 'mine.yaml'}", [corpus])
    assert again.variants['hub']['overrides']['corpus'] == ['hub:wikitext', corpus]
    assert again.finetune_overrides['data'] == str(first / 'glue')
    planned = make_plan(again).variants
    assert [(v.steps, v.config.corpus) for v in planned] == [(40, [corpus]), (hub_steps, ['hub:wikitext', corpus])]


def test_a_record_of_an_earlier_version_naming_a_path_relatively_is_the_same_settings_from_its_folder(tmp_path,
                                                                                                      monkeypatch):
    """A job's record keeps its config's values, whose local paths are absolute now; an earlier version recorded them
    as typed (`dup/a.txt`). Run again from its folder, such a comparison is done (it was refused as pretrained "with
    other settings"); from a folder where the path names another file, its corpus by content is not the run's: not
    done (and the job, launched again, refuses to resume on another corpus)."""
    from electra.data.demo import write_demo_corpus
    for folder, docs in (('first', 20), ('other', 30)): write_demo_corpus(tmp_path / folder / 'dup' / 'a.txt', n_docs=docs)
    monkeypatch.chdir(tmp_path / 'first')
    cfg = comparison(tmp_path, seeds=[1], variants={'electra': ''}, finetune=False,
                     pretrain_overrides={**TINY, 'steps': 100, 'warmup_steps': 10, 'corpus': 'dup/a.txt'})
    plan, _ = run_comparison(cfg, launch=FakeJobs(), log=lambda s: None)
    path = plan.runs[0].run_dir / RECORD
    record = json.loads(path.read_text())
    assert record['values']['corpus'] == [str(tmp_path / 'first' / 'dup' / 'a.txt')]
    (digest,) = record['corpus'].values()
    path.write_text(json.dumps({**record, 'values': {**record['values'], 'corpus': ['dup/a.txt']},
                                'corpus': {'dup/a.txt': digest}}))
    again = FakeJobs()
    run_comparison(cfg, launch=again, log=lambda s: None)
    assert again.calls == []
    assert pretrain_done(plan, plan.runs[0])
    monkeypatch.chdir(tmp_path / 'other')
    elsewhere = make_plan(cfg)
    assert not pretrain_done(elsewhere, elsewhere.runs[0])


def test_a_finished_fine_tuning_whose_data_were_edited_since_is_launched_again(tmp_path):
    """The record of a finished fine-tuning keys it by its data's content, as finetune.py's rows are: the comparison
    skipped it on its arguments and the model alone, and reported the old scores of data edited since."""
    cache = tmp_path / 'fcache'
    cfg = comparison(tmp_path, seeds=[1], finetune_overrides={'runs': 2, 'predict': False, 'device': 'cpu',
                                                              'task_overrides': {}, 'cache_dir': str(cache)})
    write_demo_glue(cache / 'demo_glue')  # what finetune.py writes there first (the jobs here are stand-ins)
    run_comparison(cfg, launch=FakeJobs(), log=lambda s: None)
    unchanged = FakeJobs()
    run_comparison(cfg, launch=unchanged, log=lambda s: None)
    assert launched(unchanged) == []
    train = cache / 'demo_glue' / 'STS-B' / 'train.tsv'
    train.write_text(train.read_text() + train.read_text().splitlines(True)[-1])  # one example more
    edited = FakeJobs()
    run_comparison(cfg, launch=edited, log=lambda s: None)
    assert launched(edited) == ['finetune.py:electra_1:', 'finetune.py:uniform_1:']


@pytest.mark.parametrize('blocked, kw, key', [
    ('out/t/finetune', {}, 'output_dir'),                    # where finetune.py writes, after the first pretraining
    ('out/t/finetune_predictions', {'finetune_overrides': {'runs': 2, 'predict': True}}, 'output_dir'),
    ('fcache', {'finetune_overrides': {'runs': 2, 'cache_dir': 'FILE/c'}}, 'finetune.cache_dir'),
    ('pcache', {'pretrain_overrides': {**TINY, 'steps': 100, 'warmup_steps': 10, 'cache_dir': 'FILE/c'}},
     'pretrain.cache_dir')])
def test_a_folder_a_job_of_the_comparison_cannot_make_stops_it_before_any_launch(tmp_path, blocked, kw, key):
    blocker = tmp_path / blocked
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text('x')
    kw = {k: {n: v.replace('FILE', str(blocker)) if isinstance(v, str) else v for n, v in d.items()} for k, d in kw.items()}
    jobs = FakeJobs()
    with pytest.raises(ConfigError, match=rf"^{re.escape(key)}: cannot write to '{blocker}.*' \('{blocker}' is a file, "
                                          rf"not a folder\)\. Choose a writable directory with --{re.escape(key)}"):
        run_comparison(comparison(tmp_path, **kw), launch=jobs, log=lambda s: None)
    assert jobs.calls == []


@pytest.mark.parametrize('name', ['table.md', 'plot.png', 'compare.yaml', 'log.txt', 'pretrain.log', 'finetune.log',
                                  'compare.json'])
def test_a_folder_where_the_comparison_or_a_job_of_it_writes_a_file_stops_it_before_any_launch(tmp_path, name):
    """The comparison's table, plot, record and log, and each job's log and record: a folder in the way refused before
    the first launch, naming it. Before: a traceback when the table was first written, after the first job."""
    cfg = comparison(tmp_path)
    plan = make_plan(cfg)
    run = plan.runs[0]
    folder = {'pretrain.log': run.run_dir, 'finetune.log': plan.group_dir(run.final)}.get(name, plan.root)
    blocked = folder / name
    if name == 'compare.json': blocked = plan.group_dir(run.points[-1]) / name
    blocked.mkdir(parents=True)
    jobs = FakeJobs()
    with pytest.raises(ConfigError, match=rf"^output_dir: cannot write to '{re.escape(str(blocked))}' \(it is a folder, "
                                          r"not a file\)\. Move that folder away, or choose another directory with "
                                          r"--output_dir\.$"):
        run_comparison(cfg, launch=jobs, log=lambda s: None)
    assert jobs.calls == []


def test_checkpoints_along_the_runs_make_a_curve_of_score_against_compute(tmp_path):
    cfg = comparison(tmp_path, finetune_at=[0.5, 1.0])
    jobs = FakeCheckpointJobs()
    plan, table = run_comparison(cfg, launch=jobs, log=lambda s: None)
    assert launched(jobs)[:3] == ['pretrain.py:t_electra:1', 'finetune.py:electra_1:', 'finetune.py:electra_1_at50pct:']
    assert len(jobs.calls) == 4 * 3
    root = tmp_path / 'out' / 't'
    curve = pd.read_csv(root / 'curve.csv')
    assert list(zip(curve['variant'], curve['fraction'])) == [('electra', 0.5), ('electra', 1.0), ('uniform', 0.5),
                                                              ('uniform', 1.0)]
    for v in plan.variants:
        half, whole = (curve[(curve['variant'] == v.name) & (curve['fraction'] == f)].iloc[0] for f in (0.5, 1.0))
        assert (half['step'], whole['step']) == (round(v.steps / 2), v.steps)
        assert half['pretrain_flops'] == pytest.approx(round(v.steps / 2) * v.flops_per_step, rel=1e-5)
        final = table.set_index('variant').loc[v.name]
        assert whole['pretrain_flops'] == pytest.approx(final['pretrain_flops'], rel=1e-5)
        # the finished run's row is the main table's; the checkpoint's scores are 10 lower, spreads the same
        for col in ('STS-B', 'MRPC', 'average'):
            assert (whole[col], half[col]) == pytest.approx((final[col], final[col] - 10), abs=1e-4)
            assert half[f'{col}_std'] == pytest.approx(final[f'{col}_std'], abs=1e-4)
    assert table.set_index('variant').loc['electra', 'STS-B'] == 83  # the main table: the finished runs only
    md = (root / 'table.md').read_text()
    assert '## Along pretraining' in md and '| variant | fraction | step | pretrain FLOPs | STS-B (spearman) |' in md
    assert f"| electra | 0.5 | {round(plan.variants[0].steps / 2):,} |" in md and '| 73.00 ± 2.58 | 63.00 ± 2.58 |' in md
    assert (root / 'plot.png').read_bytes()[:4] == b'\x89PNG'
    # every file the comparison wrote in its folder is one checked before the first launch (the log: by the driver)
    written = {p.name for p in root.iterdir() if p.is_file() and not p.name.startswith('.')}
    assert written == set(COMPARISON_FILES) - {'log.txt', 'tracking.json'}
    again = FakeCheckpointJobs()
    run_comparison(cfg, launch=again, log=lambda s: None)
    assert again.calls == []
    (plan.runs[0].pretrain_dir / 't_electra_1_50%.pth').unlink()
    (plan.finetune_dir / 'electra_1_at50pct' / RECORD).unlink()
    with pytest.raises(RunFailed, match=r"fine-tuning of variant 'electra' seed 1 at 0.5 of pretraining \(step 5.\): "
                                        r"its checkpoint .*t_electra_1_50%.pth is missing"):
        run_comparison(cfg, launch=again, log=lambda s: None)


def test_a_failed_job_names_its_log_and_a_rerun_launches_only_what_is_left(tmp_path, capsys):
    cfg = comparison(tmp_path, seeds=[1])
    jobs = FakeJobs(fail='t_uniform_1')
    with pytest.raises(RunFailed, match=r"pretraining of variant 'uniform' seed 1 failed \(exit status 1\); its output is "
                                         rf"in {tmp_path}/out/t/pretrain/t_uniform_1/pretrain.log(.|\n)*error: something broke"):
        run_comparison(cfg, launch=jobs, log=lambda s: None)
    record = json.loads((tmp_path / 'out/t/pretrain/t_uniform_1' / RECORD).read_text())
    assert (record['done'], record['attempts']) == (False, 1)
    table = pd.read_csv(tmp_path / 'out/t/table.csv').set_index('variant')  # what was done so far, already tabulated
    assert table.loc['electra', 'STS-B'] == 81 and math.isnan(table.loc['uniform', 'STS-B'])
    jobs = FakeJobs(fail='uniform_1')  # now its fine-tuning fails
    with pytest.raises(RunFailed, match=r"fine-tuning of variant 'uniform' seed 1 failed .*/out/t/finetune/uniform_1/finetune.log"):
        run_comparison(cfg, launch=jobs, log=lambda s: None)
    assert launched(jobs) == ['pretrain.py:t_uniform:1', 'finetune.py:uniform_1:']
    jobs = FakeJobs()
    run_comparison(cfg, launch=jobs, log=print)
    assert launched(jobs) == ['finetune.py:uniform_1:']
    out = capsys.readouterr().out
    assert 'pretrain electra (seed 1): done before; skipped' in out and '| uniform |' in out and '| 70.50 ± 0.71 |' in out
    assert json.loads((tmp_path / 'out/t/pretrain/t_uniform_1' / RECORD).read_text())['attempts'] == 2


def test_a_job_killed_by_a_signal_is_named_so_with_how_to_go_on(tmp_path):
    "A job killed (`kill -9`, the out-of-memory killer): Popen's status is minus the signal, not a failure of its own."
    with pytest.raises(RunFailed) as e:
        run_comparison(comparison(tmp_path), launch=lambda cmd, log: -9, log=lambda s: None)
    assert str(e.value).startswith(
        f"pretraining of variant 'electra' seed 1 was killed by signal 9 (SIGKILL: kill -9, or the system out of "
        f"memory); its output is in {tmp_path}/out/t/pretrain/t_electra_1/pretrain.log. Run the same command again to "
        "go on from its last checkpoint or finished runs. Its last lines:\n")


def test_ctrl_c_stops_with_the_command_to_go_on_and_a_dry_run_launches_nothing(tmp_path, capsys):
    def interrupted(cmd, log): raise KeyboardInterrupt
    with pytest.raises(TrainingStopped, match=r'by Ctrl-C during electra \(seed 1\); finished runs are kept, .*Run the same command'):
        run_comparison(comparison(tmp_path), launch=interrupted, log=lambda s: None)
    # the job alone got the Ctrl-C (pretrain.py checkpoints and exits with 130): a stop too, not a failure
    with pytest.raises(TrainingStopped, match=r"pretraining of variant 'electra' seed 1 was stopped by Ctrl-C or a stop signal"):
        run_comparison(comparison(tmp_path), launch=lambda cmd, log: 130, log=lambda s: None)
    jobs = FakeJobs()
    plan, table = run_comparison(comparison(tmp_path, dry_run=True), launch=jobs)
    out = capsys.readouterr().out
    assert jobs.calls == [] and table is None
    u = plan.variants[1]
    cells = [f'{u.steps:,}', f'{u.warmup_steps:,}', f'{u.flops_per_step:.3e}', f'{u.total_flops:.3e}', '1: to do, 2: to do']
    assert re.search(r'^uniform +' + ' +'.join(map(re.escape, cells)) + '$', out, re.M), out
    assert 'python pretrain.py --config demo' in out and '--uniform_generator true' in out
    assert f'pretraining in all: {2 * sum(v.total_flops for v in plan.variants):.3e} FLOPs' in out


def pretrain_in_process(cmd: list[str], log: Path) -> int:
    "A launcher running the real pretrain.py in this process (as tests/support/pretrain.py does): its exit status."
    old = sys.argv
    sys.argv = [cmd[1], *cmd[2:]]
    try:
        with contextlib.redirect_stdout(io.StringIO()) as out:
            runpy.run_path(cmd[1], run_name='__main__')
        status = 0
    except SystemExit as e:
        status = e.code or 0
    finally:
        sys.argv = old
    log.write_text(out.getvalue())
    return status


def test_a_finished_pretraining_the_comparison_did_not_record_is_left_as_it_is(tmp_path):
    """The comparison killed after its pretraining job ended, before it recorded it as done: the rerun's
    `pretrain.py --resume` finds the run finished and leaves its checkpoints and export as they are (it used to export
    an untrained model over them); the record then says done."""
    cfg = comparison(tmp_path, variants={'electra': {'config': ''}}, seeds=[1], finetune=False,
                     pretrain_overrides={**TINY, 'steps': 8, 'warmup_steps': 2, 'batch_size': 8, 'max_length': 32,
                                         'vocab_size': 500, 'checkpoint_at': [0.5, 1.0],
                                         'cache_dir': str(tmp_path / 'cache')})
    plan, _ = run_comparison(cfg, launch=pretrain_in_process, log=lambda s: None)
    run = plan.runs[0]
    record = json.loads((run.run_dir / RECORD).read_text())
    (run.run_dir / RECORD).write_text(json.dumps({**record, 'done': False}))  # as if killed before recording it
    written = {p: p.read_bytes() for p in sorted(run.pretrain_dir.rglob('*')) if p.is_file() and p.suffix != '.json'
               and p.name not in ('pretrain.log', 'log.txt')}  # the logs, which a rerun adds to
    assert any(p.name == 'model.safetensors' for p in written) and any(p.suffix == '.pth' for p in written)
    run_comparison(cfg, launch=pretrain_in_process, log=lambda s: None)
    assert {p: p.read_bytes() for p in written} == written
    assert 'run t_electra_1 finished at step 8; nothing to do' in (run.run_dir / 'pretrain.log').read_text()
    assert json.loads((run.run_dir / RECORD).read_text())['done']


def pretrain_as_a_user_runs_it(cmd: list[str], log: Path) -> int:
    "`pretrain_in_process`, with a refusal ended as the driver's `main` ends it: its `error:` line in the log, status 2."
    try: return pretrain_in_process(cmd, log)
    except ConfigError as e:
        log.write_text(f'error: {e}\n')
        return 2


def test_a_finished_pretraining_whose_corpus_was_edited_since_stops_the_comparison_in_one_line(tmp_path):
    """Fresh eyes round 3 (R3-2): the corpus file edited (same path, other text), the rerun said 'pretrain electra
    (seed 1): done before; skipped' and tabled the old run beside runs of the new text. Now the finished run is
    launched again and its --resume refuses the corpus, which stops the comparison with that line; the dry run says so,
    as it says what a changed setting does (it said 'interrupted')."""
    from electra.data.demo import write_demo_corpus
    corpus = write_demo_corpus(tmp_path / 'text' / 'corpus.txt', n_docs=300)
    cfg = comparison(tmp_path, variants={'electra': {'config': ''}}, seeds=[1], finetune=False,
                     pretrain_overrides={**TINY, 'steps': 4, 'warmup_steps': 1, 'batch_size': 8, 'max_length': 32,
                                         'vocab_size': 500, 'checkpoint_at': [1.0], 'corpus': [str(corpus)],
                                         'cache_dir': str(tmp_path / 'cache')})
    run_comparison(cfg, launch=pretrain_as_a_user_runs_it, log=lambda s: None)
    said = []
    run_comparison(cfg, launch=pretrain_as_a_user_runs_it, log=said.append)
    assert 'pretrain electra (seed 1): done before; skipped' in said
    corpus.write_text(corpus.read_text().replace(' the ', ' a ', 1))
    dry = []
    run_comparison(config_from_dict(CompareConfig, {'dry_run': True}, base=cfg), log=dry.append)
    assert re.search(r'^electra .*  1: finished on a corpus edited since: refused \(pretrain\.py --resume\)$',
                     '\n'.join(dry), re.M), dry
    with pytest.raises(RunFailed) as e:
        run_comparison(cfg, launch=pretrain_as_a_user_runs_it, log=lambda s: None)
    dry = []  # the refused job's record still holds the corpus the run was trained on
    run_comparison(config_from_dict(CompareConfig, {'dry_run': True}, base=cfg), log=dry.append)
    assert re.search(r'  1: finished on a corpus edited since: refused \(pretrain\.py --resume\)$', '\n'.join(dry), re.M)
    run = make_plan(cfg).runs[0]
    assert str(e.value) == (f"pretraining of variant 'electra' seed 1 was refused (its output: {run.run_dir / 'pretrain.log'}): "
                            f"{run.pretrain_dir / 't_electra_1_100%.pth'}: cannot resume: the corpus ['{corpus}'] is not "
                            "the one this run was trained on (the examples built from it differ from the checkpoint's, "
                            f"from ['{corpus}']: a file edited, added or removed, or `deduplicate` other than the run's). "
                            "Restore that corpus to continue the run, start another with --run_name NAME, or start this "
                            "one over with --overwrite true.")
    dry = []
    run_comparison(config_from_dict(CompareConfig, {'dry_run': True, 'steps': 6}, base=cfg), log=dry.append)
    assert re.search(r'^electra .*  1: finished with other steps, warmup_steps: refused$', '\n'.join(dry), re.M), dry


# -- the real thing

def test_a_real_comparison_through_the_drivers_and_a_rerun_that_launches_nothing(tmp_path):
    """pretrain.py (20 steps of a 1-layer model on the demo corpus) and finetune.py (1 epoch of the demo STS-B) of the
    finished run and of its checkpoint at step 10, the `.pth` pretrain.py wrote."""
    cfg = comparison(tmp_path, variants={'uniform': {'overrides': {'uniform_generator': True}}}, seeds=[3], threads=1,
                     finetune_at=[0.5, 1.0],
                     tasks=['STS-B'], pretrain_overrides={**TINY, 'steps': 20, 'warmup_steps': 2, 'batch_size': 8,
                                                          'log_every': 10, 'cache_dir': str(tmp_path / 'cache')},
                     finetune_overrides={'runs': 1, 'epochs': 1, 'predict': False, 'device': 'cpu', 'max_length': 64,
                                         'cache_dir': str(tmp_path / 'cache'), 'task_overrides': {}})
    calls, real = [], subprocess_launcher()

    def launch(cmd, log):
        calls.append(cmd)
        return real(cmd, log)
    plan, table = run_comparison(cfg, launch=launch, log=lambda s: None)
    assert len(calls) == 3, calls
    assert all(cmd[-2:] == ['--threads', '1'] or cmd[-3:-1] == ['--threads', '1'] for cmd in calls), calls
    assert '(fp32, 1 CPU thread (threads 1)) x 1 process(es)' in (plan.runs[0].run_dir / 'pretrain.log').read_text()
    row = table.iloc[0]
    assert row['variant'] == 'uniform' and row['steps'] == 20 and row['STS-B_runs'] == 1 and math.isfinite(row['STS-B'])
    assert 'steps to run' in (plan.runs[0].run_dir / 'pretrain.log').read_text()
    assert (plan.runs[0].model / 'config.json').is_file() and (tmp_path / 'out/t/plot.png').is_file()
    half = pd.read_csv(tmp_path / 'out/t/curve.csv').iloc[0]
    assert (half['fraction'], half['step'], half['STS-B_runs']) == (0.5, 10, 1) and math.isfinite(half['STS-B'])
    assert half['STS-B'] != row['STS-B']  # another model fine-tuned
    _, again = run_comparison(cfg, launch=launch, log=lambda s: None)
    assert len(calls) == 3 and again.equals(table)


def test_a_comparison_already_going_on_is_refused_before_anything_is_launched(tmp_path):
    """Two comparisons of one name at once: the second launched its first pretraining into the run the first was
    training, which refused it, and the comparison ended 'failed (exit status 2)' with the cause in a job's log. It
    is refused at once now, naming the process; a finished comparison leaves no lock."""
    import subprocess
    other = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
    try:
        (tmp_path / 'out' / 't').mkdir(parents=True)
        (tmp_path / 'out' / 't' / '.lock').write_text(f'{other.pid} {__import__("socket").gethostname()}\n')
        jobs = FakeJobs()
        with pytest.raises(ConfigError, match=rf"{tmp_path}/out/t/.lock: comparison t is already running \(PID "
                                              rf"{other.pid} on "):
            run_comparison(comparison(tmp_path, seeds=[1]), launch=jobs, log=lambda s: None)
        assert launched(jobs) == []
    finally:
        other.kill()
        other.wait()
    run_comparison(comparison(tmp_path, seeds=[1]), launch=FakeJobs(), log=lambda s: None)  # the dead process's lock
    assert not (tmp_path / 'out' / 't' / '.lock').exists()


def test_a_comparison_reads_each_data_file_of_its_fine_tuning_once(tmp_path, monkeypatch):
    "Its task data are keyed by content for every run and checkpoint; a large training set is hashed once, not each time."
    import electra.runtime.files as files
    cache, hashed = tmp_path / 'fcache', []
    cfg = comparison(tmp_path, seeds=[1], finetune_overrides={'runs': 2, 'predict': False, 'device': 'cpu',
                                                              'task_overrides': {}, 'cache_dir': str(cache)})
    write_demo_glue(cache / 'demo_glue')
    real = files.file_sha256
    monkeypatch.setattr(files, 'file_sha256', lambda path: hashed.append(Path(path).resolve()) or real(path))
    run_comparison(cfg, launch=FakeJobs(), log=lambda s: None)  # two variants: each checked, then launched
    assert len(hashed) == len(set(hashed)) and (cache / 'demo_glue' / 'STS-B' / 'train.tsv').resolve() in hashed


def test_a_typed_overrides_mapping_is_merged_over_the_presets_as_the_dotted_flags_are(tmp_path):
    """Before: --pretrain_overrides '{warmup_steps: 7}' replaced the preset's whole mapping, its steps 300 and
    eval_examples 0 dropped in silence, and --finetune_overrides '{runs: 3}' its predict: false and STS-B's 3 epochs.
    Now merged key by key, each entry with its own source; a typed {} still asks for none."""
    from electra.config.values import value_sources
    preset = Path('configs/compare/demo.yaml').read_text().splitlines()
    line = lambda key: next(n for n, text in enumerate(preset, 1) if text.startswith(f'  {key}:'))
    cfg = load_compare_config(['--output_dir', str(tmp_path), '--pretrain_overrides', '{warmup_steps: 7}',
                               '--finetune_overrides={runs: 3, task_overrides: {STS-B: {lr: 0.002}}}'])
    assert cfg.pretrain_overrides == {'steps': 300, 'warmup_steps': 7, 'eval_examples': 0}
    assert cfg.finetune_overrides == {'runs': 3, 'predict': False, 'task_overrides': {'STS-B': {'epochs': 3, 'lr': 0.002}}}
    assert value_sources(cfg)['pretrain_overrides'] == (f"steps: configs/compare/demo.yaml: line {line('steps')}; "
                                                        f"warmup_steps: command line; eval_examples: "
                                                        f"configs/compare/demo.yaml: line {line('eval_examples')}")
    notebook = load_compare_config([], overrides={'output_dir': str(tmp_path), 'pretrain_overrides': {'steps': 40}})
    assert notebook.pretrain_overrides == {'steps': 40, 'warmup_steps': 30, 'eval_examples': 0}
    assert value_sources(notebook)['pretrain_overrides'].startswith('steps: overrides; warmup_steps: configs/')
    assert load_compare_config(['--output_dir', str(tmp_path), '--pretrain_overrides', '{}']).pretrain_overrides == {}


@pytest.mark.parametrize('argv, said, steps', [
    (['--pretrain.steps', '50', '--pretrain_overrides', '{steps: 100}'],
     "--pretrain.steps 50, then --pretrain_overrides {steps: 100}", 100),
    (['--pretrain_overrides={steps: 100}', '--pretrain.steps', '50'],
     "--pretrain_overrides={steps: 100}, then --pretrain.steps 50", '50'),
    (['--pretrain.steps', '5', '--pretrain.steps', '7'], "--pretrain.steps 5, then --pretrain.steps 7", '7')])
def test_an_overrides_key_given_twice_on_the_command_line_takes_the_last_and_says_so(tmp_path, argv, said, steps):
    "Before: the dotted flag won in either order, without a word; now the last, as for any flag given twice."
    from electra.config.errors import RunWarning
    with pytest.warns(RunWarning, match=rf"^pretrain_overrides: steps given twice on the command line "
                                        rf"\({re.escape(said)}\): the last is taken\.$"):
        cfg = load_compare_config(['--output_dir', str(tmp_path), *argv])
    assert cfg.pretrain_overrides['steps'] == steps


def test_an_overrides_key_on_the_command_line_and_in_the_overrides_is_refused_naming_both(tmp_path):
    with pytest.raises(ConfigError, match=r"^finetune_overrides: runs given twice: --finetune\.runs 1 and the "
                                          r"overrides' finetune_overrides \{'runs': 3\}\. Give it once\.$"):
        load_compare_config(['--output_dir', str(tmp_path), '--finetune.runs', '1'],
                            overrides={'finetune_overrides': {'runs': 3}})


def test_the_reference_steps_and_a_pretrain_steps_typed_together_are_refused(tmp_path):
    """Before: --steps 20 --pretrain.steps 50 ran 20 steps with the warm-up fraction of 50 steps that never ran (12 of
    20 where --steps 20 alone gave 2)."""
    with pytest.raises(ConfigError, match=r"^steps: --steps 20 sets the reference variant's steps, and "
                                          r"--pretrain\.steps 50 would then only change its warm-up's fraction: give "
                                          r"one of them\.$"):
        load_compare_config(['--output_dir', str(tmp_path), '--steps', '20', '--pretrain.steps', '50'])


def test_the_nested_overrides_say_where_each_entry_came_from(tmp_path):
    """Before: --pretrain.cache_dir made all of pretrain_overrides 'command line', its steps, warmup_steps and
    eval_examples too (configs/compare/demo.yaml's). Now each entry's own source: the preset's with its line, the flag's."""
    from electra.config.values import value_sources
    preset = Path('configs/compare/demo.yaml').read_text().splitlines()
    line = {k: next(n for n, text in enumerate(preset, 1) if text.startswith(f'  {k}:'))
            for k in ('steps', 'warmup_steps', 'eval_examples')}
    cfg = load_compare_config(['--output_dir', str(tmp_path / 'cmp'), '--pretrain.cache_dir', str(tmp_path / 'cache')])
    assert cfg.pretrain_overrides == {'steps': 300, 'warmup_steps': 30, 'eval_examples': 0, 'cache_dir': str(tmp_path / 'cache')}
    assert value_sources(cfg)['pretrain_overrides'] == '; '.join(
        [*(f'{k}: configs/compare/demo.yaml: line {n}' for k, n in line.items()), 'cache_dir: command line'])
    finetune_key = next(n for n, text in enumerate(preset, 1) if text.startswith('finetune_overrides:'))
    assert value_sources(cfg)['finetune_overrides'] == f'configs/compare/demo.yaml: line {finetune_key}'  # untouched


def test_a_job_the_comparison_launches_says_where_each_value_came_from(tmp_path, monkeypatch):
    """Before: a job got the comparison's values as its own command line and recorded each as `command line` (its
    trackers' config, its card), though configs/compare/demo.yaml gave most. Now each value's source in the comparison
    (its preset's line, its command line), or what of the comparison made it; the job's own presets keep their lines.
    Each job's process (the real launcher's) gets them, and its config loaded from its command line with them says so."""
    from electra.config.cli import SOURCES_VAR
    from electra.config.values import value_sources
    preset = Path('configs/compare/demo.yaml').read_text().splitlines()

    def at(key):  # the first line of the comparison's preset that sets `key` (a variant's: its own line)
        line = next(n for n, text in enumerate(preset, 1) if text.lstrip().startswith(f'{key}:'))
        return f'configs/compare/demo.yaml: line {line} (through the comparison demo)'
    typed, real, seen = 'command line (through the comparison demo)', subprocess_launcher(), {}

    class Jobs(FakeJobs):
        def scores(self, group): return {'STS-B': [80, 82]}

        def __call__(self, cmd, log):
            real([sys.executable, '-c', f'import os; print(os.environ.get({SOURCES_VAR!r}, "{{}}"))'], log)
            handed = log.read_text().splitlines()[-1]  # what the job's own process gets
            pre, args = Path(cmd[1]).name == 'pretrain.py', parse_cli(cmd[2:])
            with monkeypatch.context() as m:
                m.setenv(SOURCES_VAR, handed)
                cfg = load_config(PretrainConfig if pre else FinetuneConfig, cmd[2:],
                                  preset_dir='configs/pretrain' if pre else 'configs/finetune')
            seen[args.get('run_name', args.get('group'))] = (args, value_sources(cfg))
            return super().__call__(cmd, log)
    cfg = load_compare_config(['--output_dir', str(tmp_path / 'cmp'), '--pretrain.cache_dir', str(tmp_path / 'cache'),
                               '--finetune.cache_dir', str(tmp_path / 'cache')])
    run_comparison(cfg, launch=Jobs(), log=lambda s: None)
    assert sorted(seen) == ['demo_electra', 'demo_uniform_generator', 'electra_1', 'uniform_generator_1']
    made = lambda what: f'the comparison demo: {what}'
    pretrain = {'config': at('pretrain_config'), 'eval_examples': at('eval_examples'), 'cache_dir': typed,
                'steps': made('its budget (flops)'), 'warmup_steps': made('its budget (flops)'),
                'run_name': made('its name and variant'), 'seed': at('seeds'), 'output_dir': made('its output_dir and name'),
                'threads': at('threads'), 'resume': made('it resumes an interrupted run')}
    args, sources = seen['demo_uniform_generator']
    assert {k: sources[k] for k in args} == {**pretrain, 'uniform_generator': at('uniform_generator')}
    args, sources = seen['demo_electra']
    assert {k: sources[k] for k in args} == pretrain
    lines = Path('configs/pretrain/demo.yaml').read_text().splitlines()  # the job's own preset: its lines
    assert sources['hidden_size'] == f"configs/pretrain/demo.yaml: line {next(n for n, t in enumerate(lines, 1) if t.startswith('hidden_size:'))}"
    args, sources = seen['uniform_generator_1']
    ft_lines = Path('configs/finetune/demo.yaml').read_text().splitlines()
    ft_line = lambda text: next(n for n, t in enumerate(ft_lines, 1) if t.strip().startswith(text))
    assert {k: sources[k] for k in args} == {
        'config': at('finetune_config'), 'runs': at('runs'), 'predict': at('predict'),
        # the finetune preset's entries the comparison's task_overrides merge over keep their lines
        'task_overrides': f"RTE: configs/finetune/demo.yaml: line {ft_line('RTE:')}; STS-B: {at('task_overrides')}",
        'cache_dir': typed,
        'model': made('its pretraining of uniform_generator, seed 1'), 'tasks': at('tasks'),
        'group': made('its variant and seed'), 'output_dir': made('its output_dir and name'),
        'test_output_dir': made('its output_dir and name'), 'threads': at('threads')}
    monkeypatch.setenv(SOURCES_VAR, '["steps"]')  # set by hand, and wrong: one line saying so
    with pytest.raises(ConfigError) as e: load_config(PretrainConfig, [], preset_dir='configs/pretrain')
    assert str(e.value) == (f"""environment: {SOURCES_VAR}='["steps"]' is not a JSON mapping of key to source (a """
                            "comparison sets it for each job it launches): unset it.")


# -- fresh eyes, round 6

def test_a_std_over_one_run_is_written_empty(tmp_path):
    """R6b-5: one pretraining seed and one fine-tuning run: a sample std is undefined, so table.csv leaves it empty
    (as every undefined value), not 0; table.md shows no ±."""
    cfg = comparison(tmp_path, seeds=[1], finetune_overrides={'runs': 1, 'predict': False, 'device': 'cpu',
                                                               'task_overrides': {}})
    run_comparison(cfg, launch=FakeJobs(), log=lambda s: None)
    rows = {r['variant']: r for r in pd.read_csv(tmp_path / 'out/t/table.csv', dtype=str, keep_default_na=False)
            .to_dict('records')}
    e = rows['electra']  # STS-B 80, MRPC 76 (run 0 of seed 1): average 78
    assert (e['STS-B'], e['STS-B_runs'], e['MRPC'], e['average']) == ('80', '1', '76', '78')
    assert (e['STS-B_std'], e['MRPC_std'], e['average_std']) == ('', '', '')
    assert '| 80.00 | 76.00 | 78.00 |' in (tmp_path / 'out/t/table.md').read_text()


class FakeFileTaskJobs(FakeJobs):
    "Fine-tuning scores the task files qa (SQuAD 2.0) and pos (tagging, plain tags) instead of STS-B and MRPC."
    SCORES = {('electra', 1): {'qa': [27.5, 33.25], 'pos': [81.0, 84.5]}, ('electra', 2): {'qa': [15.0, 20.0],
              'pos': [90.25, 70.0]}, ('uniform', 1): {'qa': [34.0, 30.0], 'pos': [60.0, 66.0]},
              ('uniform', 2): {'qa': [38.5, 40.0], 'pos': [61.5, 62.0]}}

    def scores(self, group: str) -> dict:
        variant, seed = group.rsplit('_', 1)
        return self.SCORES[(variant, int(seed))]


def test_the_table_heads_each_task_by_the_score_metric_its_fine_tuning_names_and_says_what_the_average_s_spread_is(
        tmp_path):
    """A QA task's column was headed `(score)` (its spec names no metrics) where the group's summary says f1; a tagging
    file whose tags turn out plain would have been `(f1)`, its spec's default, for a score that is its accuracy."""
    from electra.finetuning.tasks.qa.demo import write_demo_squad
    write_demo_squad(tmp_path / 'squad', '2.0', {'train': 6, 'dev': 4})
    (tmp_path / 'qa.yaml').write_text('kind: squad\ntrain: squad/train.json\ndev: squad/dev.json\n', encoding='utf-8')
    (tmp_path / 'pos.txt').write_text('The DT\ncat NN\nsat VBD\n\nA DT\ndog NN\n', encoding='utf-8')
    (tmp_path / 'pos.yaml').write_text('kind: tagging\ntrain: pos.txt\ndev: pos.txt\n', encoding='utf-8')
    cfg = comparison(tmp_path, tasks=[str(tmp_path / 'qa.yaml'), str(tmp_path / 'pos.yaml')])
    run_comparison(cfg, launch=FakeFileTaskJobs(), log=lambda s: None)
    md = (tmp_path / 'out' / 't' / 'table.md').read_text().split('\n')
    rows = [[c.strip() for c in ln.strip('|').split('|')] for ln in md if ln.startswith('|')]
    assert rows[0] == ['variant', 'steps', 'pretrain FLOPs', 'wall time', 'qa (f1)', 'pos (accuracy)', 'average']
    assert ('Dev scores: mean ± sample std over all fine-tuning runs (2 per task per pretraining seed); average: the '
            'mean over tasks, ± the sample std over the fine-tuning runs (pretraining seed, run index) of their mean '
            'over tasks (run i of each task taken together).') in md[2]
    for row in rows[2:]:
        runs = [(seed, i) for seed in (1, 2) for i in (0, 1)]
        per_run = np.array([np.mean([FakeFileTaskJobs.SCORES[(row[0], seed)][t][i] for t in ('qa', 'pos')])
                            for seed, i in runs])
        qa = np.array([FakeFileTaskJobs.SCORES[(row[0], seed)]['qa'][i] for seed, i in runs])
        assert row[4] == f'{qa.mean():.2f} ± {qa.std(ddof=1):.2f}'
        assert row[6] == f'{per_run.mean():.2f} ± {per_run.std(ddof=1):.2f}'


def test_the_dry_run_never_says_fine_tuned_without_fine_tuning(tmp_path):
    "R6b-6: with `finetune: false` a finished run is pretrained, and nothing more; the dry run said '1: fine-tuned'."
    cfg = comparison(tmp_path, seeds=[1], finetune=False)
    run_comparison(cfg, launch=FakeJobs(), log=lambda s: None)
    dry = []
    run_comparison(config_from_dict(CompareConfig, {'dry_run': True}, base=cfg), log=dry.append)
    text = '\n'.join(dry)
    assert 'fine-tuned' not in text
    assert re.search(r'^electra .*  1: pretrained \(no fine-tuning\)$', text, re.M), text


def test_an_attempt_that_found_the_run_finished_adds_no_wall_time(tmp_path):
    """R6b-4: the comparison stopped after its pretraining job finished (its last checkpoint written) but before it
    recorded it; the rerun's `pretrain.py --resume` trains nothing ('finished at step N; nothing to do'), yet its
    seconds were added to the run's wall time, which table.md calls the time of a pretraining run."""
    import time
    cfg = comparison(tmp_path, variants={'electra': {'config': ''}}, seeds=[1], finetune=False)
    plan, _ = run_comparison(cfg, launch=FakeCheckpointJobs(), log=lambda s: None)
    path = plan.runs[0].run_dir / RECORD
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, 'done': False}))  # as if stopped before recording it

    def finds_it_finished(cmd, log):
        time.sleep(0.5)  # loading the data and checkpoint, to say there is nothing to do
        return 0
    run_comparison(cfg, launch=finds_it_finished, log=lambda s: None)
    again = json.loads(path.read_text())
    assert (again['done'], again['attempts'], again['wall_seconds']) == (True, 2, record['wall_seconds'])
    table = pd.read_csv(tmp_path / 'out/t/table.csv')
    assert table.loc[0, 'wall_seconds'] == record['wall_seconds']


def test_a_preset_file_edited_since_is_a_changed_setting_as_a_flag_is(tmp_path):
    """R6b-1: a variant's own preset file (`config: /path/mine.yaml`) or the fine-tuning preset file edited after the
    runs finished: the rerun said 'done before; skipped' and tabled runs of the old values. The values the files give
    now count as the flags do: the pretraining is refused (dry run: 'finished with other lr: refused'), the
    fine-tuning done again (dry run: 'pretrained')."""
    mine, ft = tmp_path / 'mine.yaml', tmp_path / 'ft.yaml'
    mine.write_text('lr: 0.0002\ntemperature: 3.0\n')
    ft.write_text('lr: 0.0001\n')
    cfg = comparison(tmp_path, variants={'mine': {'config': str(mine)}}, seeds=[1], finetune_config=f'demo,{ft}')
    jobs = FakeJobs()
    jobs.scores = lambda group: SCORES[('electra', 1)]
    run_comparison(cfg, launch=jobs, log=lambda s: None)

    def status() -> str:
        dry = []
        run_comparison(config_from_dict(CompareConfig, {'dry_run': True}, base=cfg), log=dry.append)
        return re.search(r'^mine .*  (1: .*)$', '\n'.join(dry), re.M)[1]
    assert status() == '1: fine-tuned'
    ft.write_text('lr: 0.0003\n')
    assert status() == '1: pretrained'
    again = FakeJobs()
    again.scores = lambda group: SCORES[('electra', 1)]
    run_comparison(cfg, launch=again, log=lambda s: None)
    assert launched(again) == ['finetune.py:mine_1:']
    mine.write_text('lr: 0.0003\ntemperature: 3.0\n')
    assert status() == '1: finished with other lr: refused'
    with pytest.raises(ConfigError, match=r"variant 'mine' seed 1 was pretrained .* with other settings \(lr 0\.0002 "
                                          r"then, 0\.0003 now \(from its preset files\)\)"):
        run_comparison(cfg, launch=again, log=lambda s: None)
    assert len(again.calls) == 1


def test_table_only_with_settings_other_than_the_runs_on_disk_is_refused_naming_the_run_and_the_change(tmp_path):
    """`table_only` rebuilt the table from the runs on disk under the steps and FLOPs of the flags of now (twice the
    compute for runs that trained 10 steps, scores of lr 1e-3 as those of 5e-4), nothing said. It now refuses a
    setting the runs on disk were not made with, naming the run, the change and the command that tabulates them; the
    same settings rebuild the same table."""
    cfg = comparison(tmp_path)
    _, table = run_comparison(cfg, launch=FakeJobs(), log=lambda s: None)
    root = tmp_path / 'out' / 't'
    (root / 'table.csv').unlink()
    idle = FakeJobs()
    _, again = run_comparison(comparison(tmp_path, table_only=True), launch=idle, log=lambda s: None)
    assert idle.calls == [] and again.equals(table) and (root / 'table.csv').is_file()
    before = (root / 'table.csv').read_bytes()
    with pytest.raises(ConfigError) as e:
        run_comparison(comparison(tmp_path, table_only=True, steps=120), launch=idle, log=lambda s: None)
    assert str(e.value).startswith("table_only: variant 'electra' seed 1 was pretrained with other settings "
                                   "(steps '100' then, '120' now; warmup_steps")  # uniform's too, at equal FLOPs
    assert ') and 3 other run(s) too: the table would give their scores at the settings of now' in str(e.value)
    assert f'--config {root / "compare.yaml"} --table_only true' in str(e.value)
    lr = comparison(tmp_path, table_only=True, finetune_overrides={**cfg.finetune_overrides, 'lr': 5e-4})
    with pytest.raises(ConfigError, match=r"table_only: variant 'electra' seed 1 was fine-tuned with other settings "
                                          r"\(lr .* then, '0.0005' now\)"):
        run_comparison(lr, launch=idle, log=lambda s: None)
    assert idle.calls == [] and (root / 'table.csv').read_bytes() == before
    # the command the refusal gives tabulates the runs as they were made
    (root / 'table.csv').unlink()
    _, named = run_comparison(load_compare_config(['--config', str(root / 'compare.yaml'), '--table_only', 'true']),
                              launch=idle, log=lambda s: None)
    assert idle.calls == [] and named.equals(table)
