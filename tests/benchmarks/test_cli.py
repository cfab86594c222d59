"""benchmarks/bench/cli.py: the bench command's results, profile and precision."""
import pytest
import torch

from electra.config.cli import load_config
from electra.config.pretrain import PretrainConfig
from electra.objective.masking import max_predictions
from benchmarks.bench import cli, flops
from electra.training.device import resolve_precision
from tests.support.tiny import V

pytestmark = pytest.mark.usefixtures('one_thread')


@pytest.mark.parametrize('what', ['pretrain', 'finetune'])
def test_bench_command_writes_parsable_results_and_profile(what, tmp_path, capsys):
    # the demo preset, tiny batches: checks the command's plumbing and its arithmetic, not any speed
    out = tmp_path / 'b.json'
    cli.main([what, '--preset', 'demo', '--batch_size', '4', '--max_length', '32', '--vocab_size', str(V),
                '--rounds', '2', '--steps', '1', '--precision', 'fp32', '--profile', '--device', 'cpu', '--json', str(out)])
    printed = capsys.readouterr().out
    res = __import__('json').loads(out.read_text())
    assert set(res['results']) == {'baseline', 'fast'} and res['env']['device'] == 'cpu'
    base, fast = res['results']['baseline'], res['results']['fast']
    # the headline ratio is the median of the per-round ratios of the walls the JSON also holds
    ratios = [b / f for b, f in zip(base['wall_per_round'], fast['wall_per_round'])]
    assert fast['speedup_per_round'] == pytest.approx(ratios) and len(ratios) == 2
    assert fast['speedup_vs_baseline'] == pytest.approx(sum(ratios) / 2)  # the median of two is their mean
    assert fast['s_per_step'] == pytest.approx(sorted(fast['wall_per_round'])[0] / 2 + sorted(fast['wall_per_round'])[1] / 2)
    assert 'profile of fast' in printed and 'aten::' in printed
    assert 'fast path fp32 (as asked (--precision)), baseline fp32' in printed
    assert res['config']['precision_reason'] == 'as asked (--precision)'
    if what == 'pretrain':
        cfg = load_config(PretrainConfig, ['--config', 'demo', '--batch_size', '4', '--max_length', '32'],
                                preset_dir='configs/pretrain')
        P = max_predictions(cfg.mask_prob, 32)
        assert res['flops']['fast'] == flops.pretrain_flops(cfg, 4, 32, V, P)
        assert fast['steps_per_s'] == pytest.approx(1 / fast['s_per_step'])
        assert fast['tokens_per_s'] == pytest.approx(4 * 32 / fast['s_per_step'])
        assert res['loss_check']['abs_diff'] < 1e-4 and res['config']['precision'] == 'fp32'
    else:
        assert fast['examples_per_s'] == pytest.approx(4 / fast['s_per_step'])


@pytest.mark.parametrize('native', [True, False])
def test_bench_says_which_precision_the_cpu_path_uses_and_why(monkeypatch, native):
    monkeypatch.setattr(cli, 'cpu_bf16_supported', lambda: native)
    args = cli.parse_args(['pretrain', '--device', 'cpu'])
    assert (args.precision, args.precision_reason) == (('bf16', 'auto: this CPU multiplies bf16 natively (AVX512-BF16/AMX)')
                                                       if native else ('auto', 'auto: this CPU has no native bf16, so fp32'))
    if not native: assert resolve_precision(args.precision, torch.device('cpu')) == 'fp32'
