"""The drivers run in-process with runpy, as a user runs them, and a tiny model size for pretrain.py."""
import os
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TINY = ['--steps', '24', '--batch_size', '8', '--max_length', '32', '--hidden_size', '32', '--num_hidden_layers', '2',
        '--num_attention_heads', '2', '--intermediate_size', '64', '--embedding_size', '32', '--generator_size', '0.5',
        '--vocab_size', '500', '--log_every', '6', '--warmup_steps', '4', '--lr', '5e-4', '--device', 'cpu',
        '--threads', '1']  # one thread: runs compared bit for bit sum in one order, whatever the load


def without(argv: list[str], flag: str) -> list[str]:
    "`argv` without `flag` and its value."
    i = argv.index(flag)
    return argv[:i] + argv[i + 2:]


def flags(*argv) -> list[str]:
    """`argv` (`--key value` pairs and bare flags, as the drivers read them) with a key given again in its first place
    with its last value: a tiny setup's flags, then a test's own (a driver warns of a key given twice)."""
    groups, i, argv = {}, 0, [str(a) for a in argv]
    while i < len(argv):
        n = 2 if '=' not in argv[i] and i + 1 < len(argv) and not argv[i + 1].startswith('--') else 1
        groups[argv[i][2:].split('=', 1)[0].replace('-', '_')] = argv[i:i + n]
        i += n
    return [a for group in groups.values() for a in group]


def run_driver(script: str, argv: list[str], cwd: Path = ROOT) -> dict:
    """Run the driver `script` (pretrain.py, finetune.py) in this process from `cwd`, as `python script *argv` would:
    its globals. No interpreter to start (several seconds a job); an error is raised as it is."""
    old_argv, old_cwd = sys.argv, os.getcwd()
    sys.argv = [script, *argv]
    os.chdir(cwd)
    try:
        return runpy.run_path(str(ROOT / script), run_name='__main__')
    finally:
        sys.argv = old_argv
        os.chdir(old_cwd)


def pretrain(tmp: Path, *argv: str, cwd: Path = ROOT) -> dict:
    "Run pretrain.py in this process (from `cwd`); returns the driver's globals (model, learn, run_dir, ...)."
    return run_driver('pretrain.py', flags('--output_dir', tmp / 'ckpt', '--cache_dir', tmp / 'cache', *argv), cwd)
