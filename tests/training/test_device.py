"""electra/training/device.py: the CPU threads a job takes (`threads: auto`), from its cores and the load on them."""
import warnings

import pytest

from electra.config.cli import load_config
from electra.config.compare import CompareConfig
from electra.config.errors import ConfigError, RunWarning
from electra.config.finetune import FinetuneConfig
from electra.config.pretrain import PretrainConfig
from electra.config.shared_keys import threads_setting
from electra.training import device
from electra.training.device import auto_threads, busy_cores, cpu_threads
from tests.support.config import load


@pytest.mark.parametrize('cores, busy, processes, expected', [
    (2, 0.0, 1, 2),    # idle: every core
    (2, 0.3, 1, 2),    # background noise is not a busy core
    (2, 0.5, 1, 1),    # half a core busy or more counts as busy
    (2, 1.0, 1, 1),    # one core spinning: one thread
    (2, 2.0, 1, 1),    # at least one
    (2, 5.0, 1, 1),    # /proc/stat cannot say more than 2, the load average can
    (16, 3.4, 1, 13),
    (16, 3.4, 2, 6),   # 13 free cores shared by 2 processes: 6 each, never oversubscribed
    (2, 0.0, 4, 1),    # more processes than cores: one each
])
def test_auto_threads_takes_the_free_cores_shared_out(cores, busy, processes, expected):
    assert auto_threads(cores, busy, processes) == expected


def test_proc_stat_ticks_per_cpu(tmp_path):
    "busy = all ticks but idle and iowait; the line of all CPUs together and other lines are not CPUs."
    stat = tmp_path / 'stat'
    stat.write_text('cpu  40 0 20 300 10 0 0 0 0 0\n'
                    'cpu0 10 1 5 80 4 0 0 0 0 0\n'
                    'cpu1 30 0 14 220 6 2 3 1 9 0\n'
                    'intr 12345 1 2\nctxt 999\n')
    assert device._cpu_ticks(stat) == {0: (16, 100), 1: (50, 276)}
    assert device._cpu_ticks(tmp_path / 'missing') == {}


def test_busy_cores_from_two_samples_less_this_process():
    """CPU 0 busy 25 of 25 ticks, CPU 1 5 of 25, CPU 2 (not this process's) left out: 1.2 cores; this process ran
    0.1 s of the 0.25 s: 0.4 of that is its own."""
    samples = iter([{0: (100, 1000), 1: (50, 1000), 2: (0, 100)}, {0: (125, 1025), 1: (55, 1025), 2: (10, 110)}])
    clock = iter([5.0, 5.1])
    got = busy_cores([0, 1], seconds=0.25, ticks=lambda: next(samples), clock=lambda: next(clock))
    assert got == pytest.approx(0.8, abs=1e-12)


def test_busy_cores_without_proc_stat_reads_the_load_average(monkeypatch):
    monkeypatch.setattr(device.os, 'getloadavg', lambda: (3.5, 1.0, 1.0))
    assert busy_cores([0, 1], seconds=0.0, ticks=dict) == 2.0  # capped at the cores there are
    monkeypatch.setattr(device.os, 'getloadavg', lambda: (0.7, 1.0, 1.0))
    assert busy_cores([0, 1, 2, 3], seconds=0.0, ticks=dict) == 0.7


@pytest.mark.parametrize('setting, env, load, processes, n, why', [
    ('auto', {}, 0.1, 1, 2, 'auto: 2 cores, 0.1 busy with other processes'),
    ('auto', {}, 1.0, 1, 1, 'auto: 2 cores, 1.0 busy with other processes'),
    (0, {}, 0.0, 2, 1, 'auto: 2 cores, 0.0 busy with other processes, shared by 2 processes'),
    ('AUTO', {'OMP_NUM_THREADS': '4'}, 9.9, 1, 4, 'auto: OMP_NUM_THREADS=4'),
    ('auto', {'OMP_NUM_THREADS': '4'}, 9.9, 3, 1, 'auto: OMP_NUM_THREADS=4, shared by 3 processes'),
    ('auto', {'OMP_NUM_THREADS': ''}, 0.0, 1, 2, 'auto: 2 cores, 0.0 busy with other processes'),
    (3, {'OMP_NUM_THREADS': '1'}, 9.9, 1, 3, 'threads 3'),  # a number given is the number taken
    (4, {}, 9.9, 2, 2, 'threads 4, shared by 2 processes'),
])
def test_cpu_threads_of_each_setting(setting, env, load, processes, n, why):
    got = cpu_threads(setting, processes, env=env, cpus=lambda: [0, 1], busy=lambda cpus: load)
    assert (got.n, got.why) == (n, why)
    assert str(got) == f"{n} CPU thread{'s' if n > 1 else ''} ({why})"


@pytest.mark.parametrize('setting, env, processes, said', [
    (8, {}, 1, "threads: 8 CPU threads on the 2 cores this process may run on: threads that share a core wait for each "
               "other at every step. Give at most 2, or threads auto (the cores left free)."),
    (4, {}, 2, "threads: 4 CPU threads (2 in each of 2 processes) on the 2 cores this process may run on: threads that "
               "share a core wait for each other at every step. Give at most 2, or threads auto (the cores left free)."),
    ('auto', {'OMP_NUM_THREADS': '6'}, 1, "OMP_NUM_THREADS: 6 CPU threads on the 2 cores this process may run on: "
                                          "threads that share a core wait for each other at every step. Give at most 2, "
                                          "or unset it for threads auto to take the cores left free."),
    ('auto', {'OMP_NUM_THREADS': 'abc'}, 1, "OMP_NUM_THREADS: 'abc' is not a positive whole number, so threads auto "
                                            "ignores it and takes the cores left free (2 here)."),
    ('auto', {'OMP_NUM_THREADS': '-3'}, 1, "OMP_NUM_THREADS: '-3' is not a positive whole number, so threads auto "
                                           "ignores it and takes the cores left free (2 here)."),
])
def test_more_threads_than_cores_and_an_omp_num_threads_auto_cannot_read_are_said(setting, env, processes, said):
    """R22a-6: `--threads 8` on 2 cores was taken without a word (the help says a thread on a busy core stalls every
    step), and OMP_NUM_THREADS=abc was dropped with only libgomp's own line, though auto reads it when set."""
    with pytest.warns(RunWarning) as warned:
        cpu_threads(setting, processes, env=env, cpus=lambda: [0, 1], busy=lambda cpus: 0.0)
    assert [str(w.message) for w in warned] == [said]
    with warnings.catch_warnings():  # as many as the cores, or auto's own choice: nothing to say
        warnings.simplefilter('error', RunWarning)
        for setting, env in ((2, {}), ('auto', {}), ('auto', {'OMP_NUM_THREADS': '2'}), ('auto', {'OMP_NUM_THREADS': ''})):
            cpu_threads(setting, 1, env=env, cpus=lambda: [0, 1], busy=lambda cpus: 0.0)


@pytest.mark.parametrize('value', ['two', '-1', '1.5'])
def test_threads_key_refuses_what_is_not_auto_or_a_count(value):
    with pytest.raises(ConfigError, match=r"^command line: key 'threads': .* is not auto or a whole number >= 0 \(0: auto; "
                                          r"CPU threads of the job"):
        load('--threads', value)


@pytest.mark.parametrize('cls, presets', [(PretrainConfig, 'configs/pretrain'), (FinetuneConfig, 'configs/finetune'),
                                          (CompareConfig, 'configs/compare')])
def test_every_job_takes_threads(cls, presets):
    "Each job's `threads`: auto by default (the fine-tuning demo presets fix 1), auto or 0 or a count; nothing else."
    assert threads_setting(load_config(cls, ['--config', 'small' if cls is not CompareConfig else 'stsb_cpu'],
                                       preset_dir=presets).threads) == 0
    for value, n in (('auto', 0), ('0', 0), ('3', 3)):
        assert threads_setting(load_config(cls, ['--threads', value], preset_dir=presets).threads) == n
    with pytest.raises(ConfigError, match=r"^command line: key 'threads': 'two' is not auto or a whole number >= 0 "):
        load_config(cls, ['--threads', 'two'], preset_dir=presets)


def test_a_resumed_run_keeps_its_threads_under_auto_only(monkeypatch):
    """Another number of threads sums in another order: a resume with `threads: auto` keeps the checkpoint's count
    (saying so and what auto would choose now); a number given on the command line wins over it, said where it differs."""
    import torch
    now = lambda setting, processes: device.CpuThreads(threads_setting(setting) or 2, 'what auto chooses now')
    monkeypatch.setattr(device, 'cpu_threads', now)
    before = torch.get_num_threads()
    try:
        kept = device.use_cpu_threads('auto', 1, resumed=3)
        assert (kept.n, torch.get_num_threads()) == (3, 3) and 'the 3 the run used before' in str(kept)
        assert 'now 2 would be chosen' in str(kept)
        given = device.use_cpu_threads(2, 1, resumed=3)  # said, where it was taken without a word
        assert (given.n, torch.get_num_threads()) == (2, 2)
        assert str(given) == ('2 CPU threads (what auto chooses now; the run used 3 before: another number of threads '
                              'sums in another order, so it goes on as another draw of the run, not bit for bit)')
        assert str(device.use_cpu_threads(3, 1, resumed=3)) == '3 CPU threads (what auto chooses now)'
        fresh = device.use_cpu_threads('auto', 1, resumed=None)
        assert fresh.n == 2 and str(fresh) == '2 CPU threads (what auto chooses now)'
    finally:
        torch.set_num_threads(before)
