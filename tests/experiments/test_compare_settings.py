"""The comparison's settings of each variant: its FLOPs counted at the vocabulary its run really has (a given tokenizer,
the one its run trains, padded rows), against a count by hand of the matmuls; a variant's own presets over the common
pretrain_overrides, and a record of the other precedence refused, not reused."""
from __future__ import annotations

import json

import pytest
from pathlib import Path

from electra.config.compare import CompareConfig
from electra.config.errors import RunWarning
from electra.config.values import config_from_dict
from electra.data.tokenizer import load_tokenizer
from electra.experiments.compare import load_compare_config, plan_text
from electra.experiments.plan import make_plan
from electra.experiments.runs import RECORD, train_tokenizers

WORDS = [f'w{i}' for i in range(300)]


def hand_step_flops(V: int, H=64, layers=2, F=256, E=64, gH=32, B=32, L=64, P=9) -> int:
    """The demo preset's ELECTRA step counted by hand: per token per layer 8H^2 + 4HF + 4LH (Q, K, V, output, FFN, the
    two attention products), 2EH per token where E != H, the RTD head 2H^2 + 2H per token, the generator (hidden gH,
    FFN 4 gH) and its head 2 gH E + 2 E V at each of the P masked positions; forward and backward, 3x."""
    T = B * L
    enc = lambda h, f: layers * T * (8 * h * h + 4 * h * f + 4 * L * h) + (2 * T * E * h if E != h else 0)
    return 3 * (enc(H, F) + T * (2 * H * H + 2 * H) + enc(gH, 4 * gH) + B * P * (2 * gH * E + 2 * E * V))


def cfg_of(tmp_path, pretrain: dict, variants: dict, **kw) -> CompareConfig:
    values = dict(name='v', output_dir=str(tmp_path / 'out'), pretrain_config='demo', finetune=False,
                  pretrain_overrides={'eval_examples': 0, 'device': 'cpu', 'cache_dir': str(tmp_path / 'cache'),
                                      **pretrain}, variants=variants)
    return config_from_dict(CompareConfig, {**values, **kw})


def tokenizer_dir(tmp_path) -> Path:
    "A saved tokenizer of 305 tokens with its tokenizer.json alone (no vocab.txt), as save_pretrained folders may be."
    vocab = tmp_path / 'vocab.txt'
    vocab.write_text(''.join(w + '\n' for w in ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', *WORDS]))
    folder = tmp_path / 'tok'
    load_tokenizer(str(vocab)).save_pretrained(str(folder))
    (folder / 'vocab.txt').unlink(missing_ok=True)
    return folder


def test_flops_and_budget_count_a_given_tokenizer_and_the_padded_rows(tmp_path):
    tok = tokenizer_dir(tmp_path)
    for multiple, V in ((0, 305), (64, 320)):
        plan = make_plan(cfg_of(tmp_path, {'tokenizer': str(tok), 'vocab_size': 30522, 'pad_vocab_multiple': multiple},
                                {'electra': '', 'h32': {'overrides': {'hidden_size': 32, 'intermediate_size': 128}}},
                                steps=300))
        electra, h32 = plan.variants
        assert electra.flops_per_step == hand_step_flops(V)
        assert h32.flops_per_step == hand_step_flops(V, H=32, F=128, gH=16)
        assert h32.steps == round(300 * hand_step_flops(V) / hand_step_flops(V, H=32, F=128, gH=16))
        assert 'counted at vocab_size' not in plan_text(plan)  # nothing planned at an assumed size


def test_a_trained_tokenizer_is_trained_first_and_planned_at_its_real_size(tmp_path):
    cfg = cfg_of(tmp_path, {}, {'electra': '', 'h32': {'overrides': {'hidden_size': 32, 'intermediate_size': 128}}},
                 steps=300)
    plan = make_plan(cfg)
    assert [v.flops_per_step for v in plan.variants] == [hand_step_flops(2000),
                                                         hand_step_flops(2000, H=32, F=128, gH=16)]
    assert ("FLOPs of electra, h32 counted at vocab_size 2000: their runs train their tokenizer, its size known once "
            "trained (the comparison trains it before its first run)") in plan_text(plan)
    said = []
    assert train_tokenizers(plan, said.append)
    assert said == [f'tokenizer of electra: trained, 1450 tokens (in {plan.runs[0].run_dir / "tokenizer"})',
                    f'tokenizer of h32: the same settings, 1450 tokens (in {plan.runs[1].run_dir / "tokenizer"})']
    plan = make_plan(cfg)  # the real comparison plans again, at the trained size (the table's FLOPs: these too)
    electra, h32 = plan.variants
    assert (electra.flops_per_step, h32.flops_per_step) == (hand_step_flops(1450), hand_step_flops(1450, H=32, F=128, gH=16))
    assert h32.steps == round(300 * hand_step_flops(1450) / hand_step_flops(1450, H=32, F=128, gH=16))
    assert 'counted at vocab_size' not in plan_text(plan)
    assert not train_tokenizers(plan, said.append)  # nothing left to train


def test_a_variant_preset_beats_the_common_overrides_and_flags(tmp_path):
    hi, nowarm = tmp_path / 'hi.yaml', tmp_path / 'nowarm.yaml'
    hi.write_text('lr: 0.002\nmask_prob: 0.25\n')
    nowarm.write_text('warmup_steps: 0\n')
    cfg = load_compare_config(['--config', 'demo', '--name', 'p', '--output_dir', str(tmp_path / 'out'),
                               '--finetune', 'false', '--pretrain.lr', '0.001', '--pretrain.mask_prob', '0.15',
                               '--variants', f'{{electra: "", hi: {{config: {hi}}}, hi_ovr: {{overrides: {{lr: 0.002, '
                                             f'mask_prob: 0.25}}}}, nowarm: {{config: {nowarm}}}}}'])
    plan = make_plan(cfg)
    electra, hi_plan, ovr, nw = plan.variants
    assert (electra.config.lr, electra.config.mask_prob) == (0.001, 0.15)
    for v in (hi_plan, ovr):
        assert (v.config.lr, v.config.mask_prob) == (0.002, 0.25), v.name
        assert v.flops_per_step == hand_step_flops(2000, P=16)  # int(0.255 * 64) masked positions
    assert '--lr' not in plan.runs_of('hi')[0].pretrain_args and hi_plan.steps == ovr.steps
    assert (nw.config.warmup_steps, electra.config.warmup_steps) == (0, 30)  # demo's common warmup_steps: 30 of 300
    text = plan_text(plan)
    assert f"variant hi: its presets ({hi}) set lr, mask_prob over pretrain_overrides" in text
    assert f"variant nowarm: its presets ({nowarm}) set warmup_steps over pretrain_overrides" in text


def test_a_run_made_under_the_other_precedence_is_refused_not_reused(tmp_path):
    hi = tmp_path / 'hi.yaml'
    hi.write_text('lr: 0.002\n')
    cfg = cfg_of(tmp_path, {'lr': 0.001, 'steps': 20, 'warmup_steps': 2}, {'electra': '', 'hi': {'config': str(hi)}})
    run = make_plan(cfg).runs_of('hi')[0]
    old_args = [*run.pretrain_args[:2], '--lr', '0.001', *run.pretrain_args[2:]]  # as an earlier version passed them
    run.run_dir.mkdir(parents=True)
    (run.run_dir / RECORD).write_text(json.dumps({'args': old_args, 'done': True}))
    assert "1: finished with other lr: refused" in plan_text(make_plan(cfg))


def test_a_finetune_flag_replaces_the_comparison_presets_task_overrides_of_its_key(tmp_path):
    """finetune.py's own rule (`FinetuneConfig.command_line_wins`) through the comparison: demo.yaml's
    finetune_overrides give task_overrides {STS-B: {epochs: 3}}, passed on as a flag, so --finetune.epochs 1 trained
    STS-B 3 epochs without a word; the user's own task_overrides are kept as given."""
    argv = ['--config', 'demo', '--output_dir', str(tmp_path / 'out'), '--finetune.epochs', '1']
    with pytest.warns(RunWarning, match=r"^finetune_overrides: --epochs 1 applies to every task: it replaces the preset's task_overrides "
                                        r"\(STS-B epochs: 3\)"):
        plan = make_plan(load_compare_config(argv))
    assert (plan.finetune.epochs, plan.finetune.task_overrides) == (1, {})
    assert plan.finetune.for_task('STS-B').epochs == 1 and '--task_overrides' not in plan.runs[0].finetune_args
    plan = make_plan(load_compare_config([*argv, '--finetune.task_overrides', '{STS-B: {epochs: 2}}']))
    assert plan.finetune.for_task('STS-B').epochs == 2  # given beside it: the user's own


def test_finetune_task_overrides_typed_are_merged_over_the_comparison_presets(tmp_path):
    """R18a-3 through the comparison: demo.yaml's finetune_overrides give task_overrides {STS-B: {epochs: 3}}; a typed
    --finetune.task_overrides '{STS-B: {lr: 1e-4}}' replaced them whole, and the job's own preset's 10 epochs of STS-B
    came back under finetune.py's merge. Merged task by task and key by key: STS-B keeps the comparison's 3 epochs."""
    from electra.config.cli import load_config
    from electra.config.finetune import FinetuneConfig
    argv = ['--config', 'demo', '--output_dir', str(tmp_path / 'out'), '--finetune.task_overrides', '{STS-B: {lr: 1e-4}}']
    plan = make_plan(load_compare_config(argv))
    assert (plan.finetune.for_task('STS-B').epochs, plan.finetune.for_task('STS-B').lr) == (3, 1e-4)
    job = load_config(FinetuneConfig, plan.runs[0].finetune_args, preset_dir='configs/finetune')  # as the job reads it
    assert (job.for_task('STS-B').epochs, job.for_task('STS-B').lr) == (3, 1e-4)


def test_a_finetune_key_typed_beside_task_overrides_replaces_the_comparison_presets_per_task_value(tmp_path):
    """`--finetune.epochs 1 --finetune.task_overrides '{STS-B: {lr: 1e-4}}'`: STS-B trained demo.yaml's 3 epochs, where
    `--finetune.epochs 1` alone (and finetune.py's `--epochs 1 --task_overrides ...`) replaces the preset's per-task
    epochs, said in a warning. The typed per-task values stay (lr), the preset's others too."""
    from electra.config.cli import load_config
    from electra.config.finetune import FinetuneConfig
    argv = ['--config', 'demo', '--output_dir', str(tmp_path / 'out'), '--finetune.epochs', '1',
            '--finetune.task_overrides', '{STS-B: {lr: 1e-4}}']
    with pytest.warns(RunWarning, match=r"--epochs 1 applies to every task: it replaces the preset's task_overrides "
                                        r"\(STS-B epochs: 3\)"):
        plan = make_plan(load_compare_config(argv))
    assert (plan.finetune.for_task('STS-B').epochs, plan.finetune.for_task('STS-B').lr) == (1, 1e-4)
    job = load_config(FinetuneConfig, plan.runs[0].finetune_args, preset_dir='configs/finetune')  # as the job reads it
    assert (job.for_task('STS-B').epochs, job.for_task('STS-B').lr) == (1, 1e-4)
    argv[-1] = '{STS-B: {lr: 1e-4, epochs: 2}}'  # typed per task: that task's own value wins over the flag for all
    plan = make_plan(load_compare_config(argv))
    assert (plan.finetune.for_task('STS-B').epochs, plan.finetune.for_task('STS-B').lr) == (2, 1e-4)
