"""benchmarks/bench/scaling.py: the process counts, batches, rates and efficiencies of the scaling benchmark, and
one real run of it on the CPU (gloo, 1 and 2 processes)."""
import json

import pytest
import torch

from electra.data.tokenizer import load_tokenizer
from benchmarks.bench import cli, scaling
from tests.support import forked


@pytest.mark.parametrize('n, procs', [(0, [1]), (1, [1]), (2, [1, 2]), (3, [1, 2, 3]), (6, [1, 2, 4, 6]),
                                      (8, [1, 2, 4, 8]), (12, [1, 2, 4, 8, 12]), (16, [1, 2, 4, 8, 16])])
def test_default_procs_are_one_the_powers_of_two_and_the_count(n, procs):
    assert scaling.default_procs(n) == procs


def test_procs_are_parsed_sorted_once_each_and_checked():
    assert scaling.parse_procs('4,1,2,2') == [1, 2, 4]
    assert scaling.parse_procs(' 8 , 3 ') == [3, 8]
    for bad in ['0,2', 'two', '', '-1']:
        with pytest.raises(ValueError): scaling.parse_procs(bad)


def test_arguments_default_per_device_and_pass_other_keys_to_the_jobs(monkeypatch):
    monkeypatch.setattr(scaling, 'cores', lambda: 6)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 8)
    cpu = cli.parse_args(['scaling', '--device', 'cpu', '--compile', 'false'])
    assert (cpu.what, cpu.preset, cpu.mode, cpu.batch_size) == ('scaling', 'small', 'weak', None)
    assert (cpu.steps, cpu.warmup, cpu.procs, cpu.extra) == (20, 5, [1, 2, 4, 6], ['--compile', 'false'])
    gpu = cli.parse_args(['scaling', '--device', 'cuda', '--mode', 'strong'])
    assert (gpu.steps, gpu.warmup, gpu.procs, gpu.mode, gpu.extra) == (100, 20, [1, 2, 4, 8], 'strong', [])
    assert cli.parse_args(['scaling', '--device', 'cuda', '--procs', '2,1']).procs == [1, 2]
    for bad in [['--procs', '16'], ['--output_dir', 'x'], ['--log_every', '5'], ['--steps', '0']]:
        with pytest.raises(SystemExit): cli.parse_args(['scaling', '--device', 'cuda', *bad])
    with pytest.raises(SystemExit): cli.parse_args(['--device', 'cpu', 'scaling'])  # its options come after it
    assert cli.parse_args(['pretrain', '--device', 'cpu']).steps == 1  # the step benchmarks keep their defaults


def test_batches_weak_keep_the_process_share_strong_keep_the_global_batch():
    assert scaling.batches('weak', 32, 4) == (32, 128)
    assert scaling.batches('strong', 128, 4) == (32, 128)
    assert scaling.batches('strong', 128, 1) == (128, 128)
    with pytest.raises(ValueError, match='does not split over 3'): scaling.batches('strong', 128, 3)


def test_efficiency_is_examples_per_second_over_k_times_the_single_process_rate():
    rows = [{'procs': 1, 'examples_per_s': 100.0}, {'procs': 2, 'examples_per_s': 180.0},
            {'procs': 4, 'examples_per_s': 300.0}]
    assert [r['efficiency'] for r in scaling.with_efficiency(rows)] == pytest.approx([1.0, 0.9, 0.75], abs=1e-12)
    # without 1 process, relative to the smallest count's rate per process: 300 / (4 x 180 / 2)
    two = scaling.with_efficiency(rows[1:])
    assert [r['efficiency'] for r in two] == pytest.approx([1.0, 300 / 360], abs=1e-12)
    assert two[1]['examples_per_s'] == 300.0 and 'efficiency' not in rows[2]  # the rows themselves are kept


METRICS = """step,loss,gen_loss,disc_loss,lr,gen_accuracy,disc_accuracy,replaced_precision,replaced_recall,\
replaced_fraction,steps_per_s,skipped_steps
5,41.6,7.2,0.68,1.6e-05,0,0.56,0.16,0.50,0.14,2.5,0
10,40.1,7.2,0.65,2.4e-05,0,0.77,0.19,0.19,0.14,20,0
15,37.7,7.2,0.61,2.1e-05,0.01,0.85,0.23,0.01,0.14,25,0
20,35.6,7.1,0.56,4.7e-06,0.04,0.85,1,0.001,0.14,20,0
"""


def test_the_timed_rate_is_steps_over_the_summed_intervals_after_the_warmup():
    rows = scaling.read_metrics(METRICS)
    assert rows == [{'step': 5, 'steps_per_s': 2.5}, {'step': 10, 'steps_per_s': 20.0},
                    {'step': 15, 'steps_per_s': 25.0}, {'step': 20, 'steps_per_s': 20.0}]
    # 15 steps in 5/20 + 5/25 + 5/20 = 0.7 s: not the mean of the rates (21.67), nor with the warm-up row (2 s more)
    assert scaling.timed_rate(rows, 5) == (pytest.approx(15 / 0.7, rel=1e-12), 15)
    assert scaling.timed_rate(rows[::-1], 10) == (pytest.approx(10 / 0.45, rel=1e-12), 10)  # any row order
    assert scaling.timed_rate(rows, 0) == (pytest.approx(20 / 2.7, rel=1e-12), 20)
    with pytest.raises(ValueError, match='no metrics row after the 20 warm-up steps'): scaling.timed_rate(rows, 20)


def test_the_vocabulary_has_the_presets_size_and_covers_the_corpus(tmp_path):
    corpus, vocab = scaling.write_data(tmp_path, 2000)
    lines = vocab.read_text().splitlines()
    assert len(lines) == len(set(lines)) == 2000 and lines[:5] == ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
    assert lines[-1].startswith('[unused') and 'farmer' in lines and "'" in lines
    tok = load_tokenizer(str(vocab))
    assert len(tok) == 2000
    ids = tok(corpus.read_text().splitlines()[:200], add_special_tokens=False)['input_ids']
    assert tok.unk_token_id not in {i for s in ids for i in s} and sum(map(len, ids)) > 1000
    assert scaling.vocab_entries('b a, a', 8) == ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', ',', 'a', 'b']
    assert scaling.vocab_entries('b a, a', 6) == ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', ',']


def test_the_job_runs_warmup_plus_steps_with_a_row_at_the_end_of_the_warmup(tmp_path, monkeypatch):
    monkeypatch.setattr(scaling, 'cores', lambda: 2)
    args = cli.parse_args(['scaling', '--device', 'cpu', '--preset', 'demo', '--steps', '12', '--warmup', '8',
                           '--compile', 'false'])
    cmd = scaling.job_command(args, 2, 64, tmp_path, tmp_path / 'c.txt', tmp_path / 'v.txt')
    at = {k: cmd[cmd.index(k) + 1] for k in ['--nproc_per_node', '--steps', '--batch_size', '--log_every', '--compile']}
    assert at == {'--nproc_per_node': '2', '--steps': '20', '--batch_size': '64', '--log_every': '4',
                  '--compile': 'false'}
    assert cmd[1:4] == ['-m', 'torch.distributed.run', '--standalone'] and '--checkpoint_at=' in cmd
    assert cmd[cmd.index('--eval_examples') + 1] == '0' and cmd[cmd.index('--tokenizer') + 1] == str(tmp_path / 'v.txt')


def test_scaling_command_runs_one_and_two_processes_on_the_cpu(tmp_path, capsys, monkeypatch):
    # a check of the plumbing on gloo, not of any speed: 2 processes on 2 shared cores do not scale. One thread per
    # process, as OMP_NUM_THREADS says: the suite's other worker has the other core (threads waiting on a busy core spin)
    monkeypatch.setenv('OMP_NUM_THREADS', '1')
    monkeypatch.setattr(scaling, 'subprocess', forked.subprocess_forked)  # its jobs forked (tests/support/forked.py)
    out = tmp_path / 's.json'
    cli.main(['scaling', '--device', 'cpu', '--preset', 'demo', '--procs', '1,2', '--steps', '6', '--warmup', '2',
              '--workdir', str(tmp_path / 'work'), '--json', str(out)])
    res = json.loads(out.read_text())
    one, two = res['results']
    assert [r['procs'] for r in (one, two)] == [1, 2] and [r['global_batch'] for r in (one, two)] == [32, 64]
    assert one['steps_per_s'] > 0 and two['steps_per_s'] > 0 and one['timed_steps'] == two['timed_steps'] == 6
    assert two['examples_per_s'] == pytest.approx(64 * two['steps_per_s'], rel=1e-12)
    assert two['tokens_per_s'] == pytest.approx(64 * 64 * two['steps_per_s'], rel=1e-12)
    assert one['efficiency'] == 1.0 and one['threads_per_process'] == two['threads_per_process'] == 1
    assert two['efficiency'] == pytest.approx(two['examples_per_s'] / (2 * one['examples_per_s']), rel=1e-12)
    assert res['env']['torch'] == torch.__version__ and res['env']['backend'] == 'gloo'
    # the rate comes from the job's own metrics.csv: two steps of warm-up, then rows every 2 steps
    rows = scaling.read_metrics(next((tmp_path / 'work' / 'procs2').glob('*/metrics.csv')).read_text())
    assert [r['step'] for r in rows] == [2, 4, 6, 8]
    assert two['steps_per_s'] == pytest.approx(scaling.timed_rate(rows, 2)[0], rel=1e-12)
    assert 'efficiency' in capsys.readouterr().out
