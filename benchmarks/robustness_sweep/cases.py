"""The cases of the robustness sweep, by area: pretrain.py (P), finetune.py (F), task files (T: CSV/TSV/JSONL,
tagging, QA), the comparison (C), the converter (V), the notebooks (N), the environment (E), kills (K), full disks (D).
Each function gets a `Ctx` (its own folder, the shared fixtures) and returns what its command left (`Proc`); a case
that checks outputs sets `Proc.wrong` when they are wrong."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

from harness import REPO, Proc, case, kill_group, wait_for

LATIN1 = 'caf\xe9 na\xefve r\xe9sum\xe9\n'


def simple(id: str, area: str, fault: str, runner: str, *args, expect: str = 'error'):
    "A case that is one command with these flags over the area's tiny base command."
    case(id, area, fault, expect)(lambda c: getattr(c, runner)(*[a(c) if callable(a) else a for a in args]))


# ---------------------------------------------------------------- pretrain.py: values of the wrong type or range

simple('P01', 'pretrain', '--steps -5', 'pretrain', '--steps', '-5')
simple('P02', 'pretrain', '--steps 0', 'pretrain', '--steps', '0')
simple('P03', 'pretrain', '--steps abc', 'pretrain', '--steps', 'abc')
simple('P04', 'pretrain', '--steps 2.5', 'pretrain', '--steps', '2.5')
simple('P05', 'pretrain', '--lr 0', 'pretrain', '--lr', '0')
simple('P06', 'pretrain', '--lr nan', 'pretrain', '--lr', 'nan')
simple('P07', 'pretrain', '--batch_size 0', 'pretrain', '--batch_size', '0')
simple('P08', 'pretrain', '--max_length 1 (seq len 1)', 'pretrain', '--max_length', '1')
simple('P09', 'pretrain', '--max_length 1024 (more than max_position_embeddings 512)', 'pretrain', '--max_length', '1024')
simple('P10', 'pretrain', '--max_position_embeddings 32 with max_length 64', 'pretrain', '--max_position_embeddings', '32')
simple('P11', 'pretrain', '--num_attention_heads 3 (hidden 64)', 'pretrain', '--num_attention_heads', '3')
simple('P12', 'pretrain', '--generator_size 0', 'pretrain', '--generator_size', '0')
simple('P13', 'pretrain', '--dropout 1', 'pretrain', '--dropout', '1')
simple('P14', 'pretrain', '--mask_prob 0', 'pretrain', '--mask_prob', '0')
simple('P15', 'pretrain', '--vocab_size 50', 'pretrain', '--vocab_size', '50')
simple('P16', 'pretrain', '--log_every 0', 'pretrain', '--log_every', '0')
simple('P17', 'pretrain', '--checkpoint_at 2', 'pretrain', '--checkpoint_at', '2')
simple('P18', 'pretrain', '--num_proc -1', 'pretrain', '--num_proc', '-1')
simple('P19', 'pretrain', '--grad_accum_steps 3 with batch 8', 'pretrain', '--grad_accum_steps', '3')
simple('P20', 'pretrain', '--stpes 10 (misspelt key)', 'pretrain', '--stpes', '10')
simple('P21', 'pretrain', 'positional argument (pretrain.py demo)', 'pretrain', 'demo')
simple('P22', 'pretrain', '--precision fp8 (not a choice)', 'pretrain', '--precision', 'fp8')
simple('P23', 'pretrain', '--tie_weights all with generator_size 0.5', 'pretrain', '--tie_weights', 'all')
simple('P24', 'pretrain', '--corpus_weights 1,2 for one corpus', 'pretrain', '--corpus_weights', '1,2')
simple('P25', 'pretrain', '--device tpu', 'pretrain', '--device', 'tpu')
simple('P26', 'pretrain', '--device cuda on a machine without a GPU', 'pretrain', '--device', 'cuda')
simple('P27', 'pretrain', '--precision fp16 on the CPU', 'pretrain', '--precision', 'fp16', expect='error')
simple('P28', 'pretrain', "--run_name 'a/b' (a path in a run name)", 'pretrain', '--run_name', 'a/b')
simple('P29', 'pretrain', "--run_name '' (empty)", 'pretrain', '--run_name', '')
simple('P30', 'pretrain', '--sentence_split qq (no such language)', 'pretrain', '--sentence_split', 'qq')
simple('P31', 'pretrain', '--corpus_format xml', 'pretrain', '--corpus_format', 'xml')
simple('P32', 'pretrain', '--batch_size 4096 (more than the 2241 examples; one step)', 'pretrain', '--batch_size', '4096',
       '--steps', '1', expect='ok')
@case('P33', 'pretrain', '--eval_examples 100000 (more than the examples): a tenth held out, said', expect='ok')
def _(c):
    p = c.pretrain('--eval_examples', '100000')
    if p.rc == 0 and 'warning: eval_examples: 100000 asked' not in p.stderr: p.wrong = 'a tenth held out without a word'
    return p
simple('P34', 'pretrain', '--logger neptune without a project (NEPTUNE_MODE=offline)', 'pretrain', '--logger', 'neptune',
       expect='ok')


@case('P35', 'pretrain', '--steps 1 (shortest run)', expect='ok')
def _(c):
    p = c.pretrain('--steps', '1')
    if p.rc == 0 and not (c.p('out') / 'c_11081_100%.pth').is_file(): p.wrong = 'no final checkpoint'
    return p


@case('P36', 'pretrain', '--max_length 8 (shortest allowed)', expect='ok')
def _(c): return c.pretrain('--max_length', '8', '--eval_examples', '0')


# ---------------------------------------------------------------- pretrain.py: config files

@case('P40', 'pretrain', '--config a YAML that is a list')
def _(c): return c.pretrain('--config', c.write('list.yaml', '- steps: 5\n- lr: 0.1\n'))


@case('P41', 'pretrain', '--config malformed YAML (bad indentation)')
def _(c): return c.pretrain('--config', c.write('bad.yaml', 'steps: 5\n  lr: [0.1\n'))


@case('P42', 'pretrain', '--config YAML in latin-1')
def _(c): return c.pretrain('--config', c.write('l1.yaml', f'# {LATIN1}steps: 5\n', encoding='latin-1'))


@case('P43', 'pretrain', '--config YAML in UTF-16')
def _(c): return c.pretrain('--config', c.write('u16.yaml', 'steps: 5\n', encoding='utf-16'))


@case('P44', 'pretrain', '--config binary file named .yaml')
def _(c): return c.pretrain('--config', c.write('bin.yaml', bytes(range(256)) * 4))


@case('P45', 'pretrain', '--config a directory named x.yaml')
def _(c):
    c.p('dir.yaml', 'x').write_text('')
    return c.pretrain('--config', c.dir / 'dir.yaml')


@case('P46', 'pretrain', '--config no such preset (smal)')
def _(c): return c.pretrain('--config', 'smal')


@case('P47', 'pretrain', '--config YAML with a key of the wrong type (steps: many)')
def _(c): return c.pretrain('--config', c.write('t.yaml', 'steps: many\n'))


@case('P48', 'pretrain', '--config a YAML mapping with a non-string key (1: 2)')
def _(c): return c.pretrain('--config', c.write('k.yaml', '1: 2\n'))


@case('P49', 'pretrain', '--config demo,nonexistent (second preset missing)')
def _(c): return c.pretrain('--config', 'demo,nonexistent')


# ---------------------------------------------------------------- pretrain.py: corpus and tokenizer

@case('P50', 'pretrain', '--corpus a path that does not exist')
def _(c): return c.pretrain('--corpus', c.dir / 'nope.txt')


@case('P51', 'pretrain', '--corpus an empty file')
def _(c): return c.pretrain('--corpus', c.write('empty.txt', ''))


@case('P52', 'pretrain', '--corpus an empty directory')
def _(c):
    c.p('emptydir', 'x').parent.mkdir(exist_ok=True)
    return c.pretrain('--corpus', c.dir / 'emptydir')


@case('P53', 'pretrain', '--corpus a latin-1 text file')
def _(c): return c.pretrain('--corpus', c.write('l1.txt', LATIN1 * 50, encoding='latin-1'))


@case('P54', 'pretrain', '--corpus a UTF-16 text file')
def _(c): return c.pretrain('--corpus', c.write('u16.txt', 'the cat sat on the mat.\n' * 50, encoding='utf-16'))


@case('P55', 'pretrain', '--corpus a binary file')
def _(c): return c.pretrain('--corpus', c.write('bin.txt', os.urandom(20000)))


@case('P56', 'pretrain', '--corpus one line of 2 MB (over the 1 MiB line limit)')
def _(c): return c.pretrain('--corpus', c.write('long.txt', 'word ' * 400_000 + '\n'))


@case('P57', 'pretrain', '--corpus a text too small to fill one batch (3 short lines): batches repeat it, as documented',
      expect='ok')
def _(c):
    p = c.pretrain('--corpus', c.write('tiny.txt', 'a b c.\nd e f.\n\ng h i.\n'))
    if p.rc == 0 and not re.search(r'^\d+ training examples', p.stdout, re.M): p.wrong = 'the example count is not shown'
    return p


@case('P58', 'pretrain', '--corpus a .parquet file that is not parquet')
def _(c): return c.pretrain('--corpus', c.write('t.parquet', 'not parquet at all\n'))


@case('P59', 'pretrain', '--corpus a .jsonl table of two string columns, neither named text')
def _(c): return c.pretrain('--corpus', c.write('t.jsonl', '{"body": "a b c", "title": "d"}\n' * 20))


@case('P60', 'pretrain', '--tokenizer a vocab.txt that does not exist')
def _(c): return c.pretrain('--tokenizer', c.dir / 'vocab.txt')


@case('P61', 'pretrain', '--tokenizer an empty vocab.txt')
def _(c): return c.pretrain('--tokenizer', c.write('vocab.txt', ''))


@case('P62', 'pretrain', '--tokenizer a vocab.txt without [MASK]')
def _(c): return c.pretrain('--tokenizer', c.write('vocab.txt', '[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\ncat\n'))


@case('P63', 'pretrain', '--tokenizer a latin-1 vocab.txt')
def _(c):
    return c.pretrain('--tokenizer', c.write('vocab.txt', '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\ncaf\xe9\n', encoding='latin-1'))


@case('P64', 'pretrain', '--tokenizer a directory without tokenizer files')
def _(c):
    c.write('tokdir/readme.md', 'nothing here\n')
    return c.pretrain('--tokenizer', c.dir / 'tokdir')


@case('P65', 'pretrain', '--tokenizer a binary file')
def _(c): return c.pretrain('--tokenizer', c.write('vocab.bin', os.urandom(5000)))


@case('P66', 'pretrain', '--tokenizer a tokenizer.json that is malformed JSON')
def _(c):
    c.write('tokdir/tokenizer.json', '{"version": "1.0", "model": ')
    return c.pretrain('--tokenizer', c.dir / 'tokdir')


# ---------------------------------------------------------------- pretrain.py: init_from, resume

@case('P70', 'pretrain', '--init_from a .pth that does not exist')
def _(c): return c.pretrain('--init_from', c.dir / 'nope.pth')


@case('P71', 'pretrain', '--init_from a .pth that is a text file')
def _(c): return c.pretrain('--init_from', c.write('fake.pth', 'not a checkpoint\n'))


@case('P72', 'pretrain', '--init_from a truncated checkpoint')
def _(c): return c.pretrain('--init_from', c.write('trunc.pth', c.ckpt.read_bytes()[:100_000]))


@case('P73', 'pretrain', '--init_from a directory with generator/ and discriminator/ but no config.json')
def _(c):
    for net in ('generator', 'discriminator'):
        shutil.copytree(c.export / net, c.dir / 'exp' / net)
        (c.dir / 'exp' / net / 'config.json').unlink()
    return c.pretrain('--init_from', c.dir / 'exp')


@case('P74', 'pretrain', '--init_from a directory without generator/ and discriminator/')
def _(c):
    c.write('exp/readme.md', 'x')
    return c.pretrain('--init_from', c.dir / 'exp')


@case('P75', 'pretrain', '--init_from a fine-tuned run (.pth of finetune.py)')
def _(c):
    p = c.finetune('--group', 'g')
    if p.rc != 0: return p
    return c.pretrain('--init_from', c.dir / 'ft' / 'g' / 'RTE_0.pth')


@case('P76', 'pretrain', '--init_from an export with other sizes (hidden 128)')
def _(c): return c.pretrain('--init_from', c.export, '--hidden_size', '128', '--intermediate_size', '512', '--embedding_size', '128')


def _copy_run(c, steps_dir: Path | None = None) -> Path:
    "The tiny pretraining's checkpoints copied to out/ as run 'c' (its name)."
    out = c.p('out')
    out.mkdir(exist_ok=True)
    for f in (c.base / 'pt').glob('tiny_11081_*.pth'): shutil.copy(f, out / f.name.replace('tiny_', 'c_'))
    return out


@case('P77', 'pretrain', '--resume whose latest checkpoint is truncated')
def _(c):
    out = _copy_run(c)
    last = out / 'c_11081_100%.pth'
    last.write_bytes(last.read_bytes()[:200_000])
    return c.pretrain('--resume', '--steps', '20')


@case('P78', 'pretrain', '--resume whose latest checkpoint is random bytes')
def _(c):
    out = _copy_run(c)
    (out / 'c_11081_100%.pth').write_bytes(os.urandom(50_000))
    return c.pretrain('--resume', '--steps', '20')


@case('P79', 'pretrain', '--resume with another --hidden_size')
def _(c):
    _copy_run(c)
    (c.p('out') / 'c_11081_100%.pth').unlink()
    return c.pretrain('--resume', '--steps', '20', '--hidden_size', '128', '--intermediate_size', '512')


@case('P80', 'pretrain', 'a second run of the same name without --resume (--overwrite false: the demo preset sets it)')
def _(c):
    _copy_run(c)
    return c.pretrain('--steps', '20', '--overwrite', 'false')


@case('P81', 'pretrain', '--resume with the demo preset, which sets overwrite: true: resumes', expect='ok')
def _(c):
    _copy_run(c)
    (c.p('out') / 'c_11081_100%.pth').unlink()
    p = c.pretrain('--resume', 'true', '--steps', '20')
    if p.rc == 0 and 'starting at step 10 of 20' not in p.stdout: p.wrong = 'did not resume from step 10'
    return p


@case('P82', 'pretrain', '--resume with another --tokenizer')
def _(c):
    _copy_run(c)
    (c.p('out') / 'c_11081_100%.pth').unlink()
    ids = json.loads((c.export / 'discriminator' / 'tokenizer.json').read_text())['model']['vocab']
    vocab = sorted(ids, key=ids.get)
    return c.pretrain('--resume', '--steps', '20', '--tokenizer', c.write('vocab.txt', '\n'.join(vocab[:-5]) + '\n'))


@case('P83', 'pretrain', 'a checkpoint file of another format named as the run\'s latest (a fine-tuned .pth)')
def _(c):
    out = _copy_run(c)
    torch.save({'format': 'electra-finetuned', 'model': {}}, out / 'c_11081_100%.pth')
    return c.pretrain('--resume', '--steps', '20')


# ---------------------------------------------------------------- pretrain.py: output folders

@case('P85', 'pretrain', '--output_dir is a file')
def _(c): return c.pretrain('--output_dir', c.write('file', 'x'))


@case('P86', 'pretrain', '--cache_dir is a file')
def _(c): return c.pretrain('--cache_dir', c.write('file', 'x'), '--corpus', 'demo')


@case('P87', 'pretrain', 'the same flag twice (--steps 3 --steps 4): the last wins, as argparse', expect='ok')
def _(c):
    p = c.pretrain('--steps', '3', '--steps', '4')
    if p.rc == 0 and 'of 4' not in p.stdout: p.wrong = 'the last --steps was not taken'
    return p


@case('P88', 'pretrain', '--warmup_steps 100 with --steps 4 (warm-up longer than the run)', expect='ok')
def _(c):
    p = c.pretrain('--warmup_steps', '100')
    if p.rc == 0 and 'warning: warmup_steps' not in p.stderr: p.wrong = 'no warning that lr is never reached'
    return p


# ---------------------------------------------------------------- finetune.py: the model

@case('F01', 'finetune', '--model a .pth that does not exist')
def _(c): return c.finetune('--model', c.dir / 'nope.pth')


@case('F02', 'finetune', '--model a .pth that is a text file')
def _(c): return c.finetune('--model', c.write('fake.pth', 'not a checkpoint\n'))


@case('F03', 'finetune', '--model a truncated .pth')
def _(c): return c.finetune('--model', c.write('trunc.pth', c.ckpt.read_bytes()[:100_000]))


@case('F04', 'finetune', '--model a directory without config.json')
def _(c):
    shutil.copytree(c.export / 'discriminator', c.dir / 'd')
    (c.dir / 'd' / 'config.json').unlink()
    return c.finetune('--model', c.dir / 'd')


@case('F05', 'finetune', '--model a directory without tokenizer (no vocab)')
def _(c):
    shutil.copytree(c.export / 'discriminator', c.dir / 'd')
    for f in ('vocab.txt', 'tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json'):
        (c.dir / 'd' / f).unlink(missing_ok=True)
    return c.finetune('--model', c.dir / 'd')


@case('F06', 'finetune', '--model a directory whose config.json is malformed')
def _(c):
    shutil.copytree(c.export / 'discriminator', c.dir / 'd')
    (c.dir / 'd' / 'config.json').write_text('{"model_type": "electra", ')
    return c.finetune('--model', c.dir / 'd')


@case('F07', 'finetune', '--model a directory without weights (model.safetensors removed)')
def _(c):
    shutil.copytree(c.export / 'discriminator', c.dir / 'd')
    for f in (c.dir / 'd').glob('model*'): f.unlink()
    return c.finetune('--model', c.dir / 'd')


@case('F08', 'finetune', '--model the generator directory (not a discriminator)')
def _(c): return c.finetune('--model', c.export / 'generator')


@case('F09', 'finetune', '--model an empty directory')
def _(c):
    (c.dir / 'd').mkdir()
    return c.finetune('--model', c.dir / 'd')


@case('F10', 'finetune', '--model a fine-tuned run (.pth of finetune.py)')
def _(c):
    p = c.finetune('--group', 'g')
    if p.rc != 0: return p
    return c.finetune('--model', c.dir / 'ft' / 'g' / 'RTE_0.pth', '--group', 'h')


@case('F11', 'finetune', '--model a file that is not a .pth (the tokenizer.json)')
def _(c): return c.finetune('--model', c.export / 'tokenizer' / 'tokenizer.json')


@case('F13', 'finetune', '--model an absolute path that does not exist, without .pth')
def _(c): return c.finetune('--model', c.dir / 'nope' / 'model')


@case('F12', 'finetune', '--model a model with 32 positions and max_length 64')
def _(c):
    shutil.copytree(c.export / 'discriminator', c.dir / 'd')
    cfg = json.loads((c.dir / 'd' / 'config.json').read_text())
    from safetensors.torch import load_file, save_file
    state = load_file(c.dir / 'd' / 'model.safetensors')
    for k in list(state):
        if 'position_embeddings' in k: state[k] = state[k][:32].clone()
        if 'position_ids' in k: state[k] = state[k][:, :32].clone()
    save_file(state, c.dir / 'd' / 'model.safetensors')
    (c.dir / 'd' / 'config.json').write_text(json.dumps({**cfg, 'max_position_embeddings': 32}))
    return c.finetune('--model', c.dir / 'd', '--max_length', '64')


# ---------------------------------------------------------------- finetune.py: data and tasks

simple('F20', 'finetune', '--data a directory that does not exist', 'finetune', '--data', lambda c: c.dir / 'nope')
simple('F21', 'finetune', '--data a file', 'finetune', '--data', lambda c: c.write('f.tsv', 'a\tb\n'))


@case('F22', 'finetune', '--data a GLUE directory without RTE/')
def _(c):
    shutil.copytree(c.glue / 'CoLA', c.dir / 'glue' / 'CoLA')
    return c.finetune('--data', c.dir / 'glue')


@case('F23', 'finetune', '--data RTE/train.tsv empty')
def _(c):
    shutil.copytree(c.glue / 'RTE', c.dir / 'glue' / 'RTE')
    (c.dir / 'glue' / 'RTE' / 'train.tsv').write_text('')
    return c.finetune('--data', c.dir / 'glue')


@case('F24', 'finetune', '--data RTE/dev.tsv in latin-1')
def _(c):
    shutil.copytree(c.glue / 'RTE', c.dir / 'glue' / 'RTE')
    dev = c.dir / 'glue' / 'RTE' / 'dev.tsv'
    lines = dev.read_text().splitlines()
    lines[1] = lines[1].replace('the', 'caf\xe9', 1)
    dev.write_text('\n'.join(lines) + '\n', encoding='latin-1')
    return c.finetune('--data', c.dir / 'glue')


@case('F25', 'finetune', '--data RTE/train.tsv with a label that is not a class (maybe)')
def _(c):
    shutil.copytree(c.glue / 'RTE', c.dir / 'glue' / 'RTE')
    tr = c.dir / 'glue' / 'RTE' / 'train.tsv'
    lines = tr.read_text().splitlines()
    cols = lines[1].split('\t')
    lines[1] = '\t'.join([*cols[:-1], 'maybe'])
    tr.write_text('\n'.join(lines) + '\n')
    return c.finetune('--data', c.dir / 'glue')


@case('F26', 'finetune', '--data RTE/train.tsv with a header missing a column')
def _(c):
    shutil.copytree(c.glue / 'RTE', c.dir / 'glue' / 'RTE')
    tr = c.dir / 'glue' / 'RTE' / 'train.tsv'
    lines = tr.read_text().splitlines()
    lines[0] = lines[0].replace('\tlabel', '')
    tr.write_text('\n'.join(lines) + '\n')
    return c.finetune('--data', c.dir / 'glue')


simple('F27', 'finetune', '--tasks FOO (not a GLUE task)', 'finetune', '--tasks', 'FOO')
simple('F28', 'finetune', '--tasks RTE,RTE', 'finetune', '--tasks', 'RTE,RTE')
simple('F29', 'finetune', '--tasks AX without MNLI', 'finetune', '--tasks', 'AX')
simple('F30', 'finetune', '--tasks rte (lower case)', 'finetune', '--tasks', 'rte')
simple('F31', 'finetune', "--tasks '' (empty)", 'finetune', '--tasks', '')

# ---------------------------------------------------------------- finetune.py: values

simple('F40', 'finetune', '--runs 0', 'finetune', '--runs', '0')
simple('F41', 'finetune', '--runs -1', 'finetune', '--runs', '-1')
simple('F42', 'finetune', '--epochs 0', 'finetune', '--epochs', '0')
simple('F43', 'finetune', '--lr 0', 'finetune', '--lr', '0')
simple('F44', 'finetune', '--batch_size 0', 'finetune', '--batch_size', '0')
simple('F45', 'finetune', '--max_length 1', 'finetune', '--max_length', '1')
simple('F46', 'finetune', '--max_length 1000', 'finetune', '--max_length', '1000')
simple('F47', 'finetune', '--ensemble_k 3 with --runs 1', 'finetune', '--ensemble_k', '3')
simple('F48', 'finetune', '--seeds 1,1 --runs 2', 'finetune', '--seeds', '1,1', '--runs', '2')
simple('F49', 'finetune', '--group a/b', 'finetune', '--group', 'a/b')
simple('F50', 'finetune', "--task_overrides '{RTE: {foo: 1}}'", 'finetune', '--task_overrides', '{RTE: {foo: 1}}')
simple('F51', 'finetune', "--task_overrides '{XYZ: {epochs: 1}}'", 'finetune', '--task_overrides', '{XYZ: {epochs: 1}}')
simple('F52', 'finetune', "--task_overrides '[1, 2]' (not a mapping)", 'finetune', '--task_overrides', '[1, 2]')
simple('F53', 'finetune', "--task_overrides '{RTE: {epochs: 0}}'", 'finetune', '--task_overrides', '{RTE: {epochs: 0}}')
simple('F54', 'finetune', '--select worst', 'finetune', '--select', 'worst')
simple('F55', 'finetune', '--max_train_samples -1', 'finetune', '--max_train_samples', '-1')
simple('F56', 'finetune', '--threads -1', 'finetune', '--threads', '-1')
simple('F57', 'finetune', '--dropout 1.0', 'finetune', '--dropout', '1.0')
simple('F58', 'finetune', '--device cuda on a machine without a GPU', 'finetune', '--device', 'cuda')
simple('F59', 'finetune', '--cache_dir is a file', 'finetune', '--cache_dir', lambda c: c.write('file', 'x'))
simple('F60', 'finetune', '--parallel_runs -1', 'finetune', '--parallel_runs', '-1')


@case('F61', 'finetune', "--epochs 1 while the preset's task_overrides give RTE 10 epochs", expect='ok')
def _(c):
    args = [a for a in c.finetune_args()]
    i = args.index('--task_overrides')
    del args[i:i + 2]
    p = c.run(c.cmd(['finetune.py'], *args))
    if p.rc == 0 and 'epoch 10/10' in p.stdout and 'warning:' not in p.stderr:
        p.wrong = '--epochs 1 was given; RTE trained 10 epochs (the preset\'s task_overrides) without a word'
    return p


@case('F62', 'finetune', '--max_train_samples 100000 (more than the training set)', expect='ok')
def _(c): return c.finetune('--max_train_samples', '100000')


@case('F63', 'finetune', '--batch_size 100000 (more than the training set)', expect='ok')
def _(c): return c.finetune('--batch_size', '100000')


# ---------------------------------------------------------------- finetune.py: an earlier sweep's files

def _done_sweep(c) -> Path:
    p = c.finetune('--group', 'g')
    assert p.rc == 0, p.stderr[-2000:]
    return c.dir / 'ft' / 'g'


@case('F70', 'finetune', 'results.csv of the group is binary garbage')
def _(c):
    (c.dir / 'ft' / 'g').mkdir(parents=True)
    (c.dir / 'ft' / 'g' / 'results.csv').write_bytes(os.urandom(3000))
    return c.finetune('--group', 'g')


@case('F71', 'finetune', 'results.csv of the group is empty (0 bytes)')
def _(c):
    (c.dir / 'ft' / 'g').mkdir(parents=True)
    (c.dir / 'ft' / 'g' / 'results.csv').write_text('')
    return c.finetune('--group', 'g')


@case('F72', 'finetune', 'results.csv truncated in the middle of a row')
def _(c):
    g = _done_sweep(c)
    text = (g / 'results.csv').read_text()
    (g / 'results.csv').write_text(text[:len(text) * 2 // 3])
    return c.finetune('--group', 'g')


@case('F73', 'finetune', 'results.csv is another program\'s CSV')
def _(c):
    (c.dir / 'ft' / 'g').mkdir(parents=True)
    (c.dir / 'ft' / 'g' / 'results.csv').write_text('a,b\n1,2\n')
    return c.finetune('--group', 'g')


@case('F74', 'finetune', 'the run\'s .pth deleted after it finished: the run is redone', expect='ok')
def _(c):
    g = _done_sweep(c)
    (g / 'RTE_0.pth').unlink()
    p = c.finetune('--group', 'g')
    if p.rc == 0 and not (g / 'RTE_0.pth').is_file(): p.wrong = 'the run was not redone'
    return p


@case('F75', 'finetune', 'a finished run\'s .pth truncated, then test predictions')
def _(c):
    g = _done_sweep(c)
    (g / 'RTE_0.pth').write_bytes((g / 'RTE_0.pth').read_bytes()[:50_000])
    return c.finetune('--group', 'g', '--predict', 'true')


@case('F76', 'finetune', 'a finished run\'s .pth replaced by a text file, then test predictions')
def _(c):
    g = _done_sweep(c)
    (g / 'RTE_0.pth').write_text('hello\n')
    return c.finetune('--group', 'g', '--predict', 'true')


@case('F77', 'finetune', 'the group folder is a file')
def _(c):
    c.write('ft/g', 'x')
    return c.finetune('--group', 'g')


@case('F78', 'finetune', 'the same sweep run again: nothing redone, the table unchanged', expect='ok')
def _(c):
    g = _done_sweep(c)
    before = (g / 'results.csv').read_bytes()
    p = c.finetune('--group', 'g')
    if p.rc == 0 and (g / 'results.csv').read_bytes() != before: p.wrong = 'results.csv changed'
    if p.rc == 0 and 'finished before' not in p.stdout: p.wrong = 'the finished run was trained again'
    return p


@case('F79', 'finetune', 'the same group with another --lr (other settings)')
def _(c):
    _done_sweep(c)
    return c.finetune('--group', 'g', '--lr', '5e-4')


# ---------------------------------------------------------------- task files: classification from CSV/TSV/JSONL

def _csv_rows(n: int = 24, start: int = 0) -> str:
    words = ('good', 'bad')
    return ''.join(f'r{i},"the film was {words[i % 2]} today .",{words[i % 2]}\n' for i in range(start, start + n))


CSV_HEAD = 'id,text,label\n'
TASK_YAML = 'kind: classification\ntrain: train.csv\ndev: dev.csv\ntext: text\nlabel: label\nid: id\n'


def task(c, yaml_text: str = TASK_YAML, **files) -> Path:
    "A task file `t.yaml` and its data files (name -> text or bytes) in this case's folder; defaults: a good CSV task."
    defaults = {'train.csv': CSV_HEAD + _csv_rows(), 'dev.csv': CSV_HEAD + _csv_rows(8, 100)}
    for name, data in {**defaults, **files}.items():
        if data is not None: c.write(name, data)
    return c.write('t.yaml', yaml_text) if isinstance(yaml_text, str) else c.write('t.yaml', yaml_text)


def ft_task(c, path, *args) -> Proc:
    return c.finetune('--tasks', path, *args)


@case('T00', 'task files', 'a good CSV task (reference)', expect='ok')
def _(c): return ft_task(c, task(c))


@case('T01', 'task files', 'task YAML that is a list')
def _(c): return ft_task(c, task(c, '- train: train.csv\n- dev: dev.csv\n'))


@case('T02', 'task files', 'task YAML malformed')
def _(c): return ft_task(c, task(c, 'kind: classification\ntrain: [train.csv\n'))


@case('T03', 'task files', 'task YAML in latin-1')
def _(c): return ft_task(c, task(c, (f'# {LATIN1}' + TASK_YAML).encode('latin-1')))


@case('T04', 'task files', 'task YAML in UTF-16')
def _(c): return ft_task(c, task(c, TASK_YAML.encode('utf-16')))


@case('T05', 'task files', 'task YAML empty')
def _(c): return ft_task(c, task(c, ''))


@case('T06', 'task files', 'task YAML with an unknown key (lable)')
def _(c): return ft_task(c, task(c, TASK_YAML + 'lable: x\n'))


@case('T07', 'task files', 'task YAML without dev')
def _(c): return ft_task(c, task(c, TASK_YAML.replace('dev: dev.csv\n', '')))


@case('T08', 'task files', 'task YAML naming a train file that does not exist')
def _(c): return ft_task(c, task(c, TASK_YAML.replace('train.csv', 'nope.csv')))


@case('T09', 'task files', 'task YAML whose train file is a directory')
def _(c):
    (c.dir / 'dir.csv').mkdir()
    return ft_task(c, task(c, TASK_YAML.replace('train: train.csv', 'train: dir.csv')))


@case('T10', 'task files', 'a task file that does not exist')
def _(c): return ft_task(c, c.dir / 'nope.yaml')


@case('T11', 'task files', 'a task file path that is a directory (x.yaml/)')
def _(c):
    (c.dir / 'x.yaml').mkdir()
    return ft_task(c, c.dir / 'x.yaml')


@case('T12', 'task files', 'task YAML: kind: clasification (misspelt)')
def _(c): return ft_task(c, task(c, TASK_YAML.replace('classification', 'clasification')))


@case('T13', 'task files', "task YAML: name of a GLUE task (RTE)")
def _(c): return ft_task(c, task(c, 'name: RTE\n' + TASK_YAML))


@case('T14', 'task files', 'task YAML: metrics [pearson] for classification')
def _(c): return ft_task(c, task(c, TASK_YAML + 'metrics: [pearson]\n'))


@case('T15', 'task files', 'task YAML: text with three columns')
def _(c): return ft_task(c, task(c, TASK_YAML.replace('text: text', 'text: [text, id, label]')))


@case('T16', 'task files', "task YAML: target_scale: abc (regression)")
def _(c): return ft_task(c, task(c, TASK_YAML.replace('classification', 'regression') + 'target_scale: abc\n',
                                  **{'train.csv': CSV_HEAD + _csv_rows().replace('good', '1').replace('bad', '0'),
                                     'dev.csv': CSV_HEAD + _csv_rows(8, 100).replace('good', '1').replace('bad', '0')}))


@case('T17', 'task files', 'task YAML: target_scale: 0 (regression)')
def _(c): return ft_task(c, task(c, TASK_YAML.replace('classification', 'regression') + 'target_scale: 0\n',
                                  **{'train.csv': CSV_HEAD + _csv_rows().replace('good', '1').replace('bad', '0'),
                                     'dev.csv': CSV_HEAD + _csv_rows(8, 100).replace('good', '1').replace('bad', '0')}))


@case('T18', 'task files', 'task YAML: epochs: -1')
def _(c): return ft_task(c, task(c, TASK_YAML + 'epochs: -1\n'))


@case('T19', 'task files', 'task YAML: unordered_pair with one text column')
def _(c): return ft_task(c, task(c, TASK_YAML + 'unordered_pair: true\n'))


@case('T20', 'task files', 'task YAML: train: 5 (a number, not a file name)')
def _(c): return ft_task(c, task(c, TASK_YAML.replace('train: train.csv', 'train: 5')))


@case('T21', 'task files', 'task YAML: train file of an unknown format (.xlsx)')
def _(c): return ft_task(c, task(c, TASK_YAML.replace('train.csv', 'train.xlsx'), **{'train.xlsx': 'x'}))


@case('T22', 'task files', 'task YAML: label_separator for a classification task (multilabel key)', expect='ok')
def _(c): return ft_task(c, task(c, TASK_YAML + "label_separator: ';'\n"))


@case('T23', 'task files', 'task YAML: metrics: f1 (one name, not a list)', expect='ok')
def _(c):
    p = ft_task(c, task(c, TASK_YAML + 'metrics: f1\n'))
    if p.rc == 0 and 'f1' not in p.stdout: p.wrong = 'f1 not reported'
    return p


@case('T24', 'task files', 'task YAML: unordered_pair: maybe (not a boolean)')
def _(c): return ft_task(c, task(c, TASK_YAML.replace('text: text', 'text: [text, id]') + 'unordered_pair: maybe\n'))


@case('T25', 'task files', 'task YAML: label: [a, b] (a list, not a column name)')
def _(c): return ft_task(c, task(c, TASK_YAML.replace('label: label', 'label: [a, b]')))


@case('T30', 'task files', 'train CSV empty (0 bytes)')
def _(c): return ft_task(c, task(c, **{'train.csv': ''}))


@case('T31', 'task files', 'train CSV with the header only')
def _(c): return ft_task(c, task(c, **{'train.csv': CSV_HEAD}))


@case('T32', 'task files', 'train CSV in latin-1')
def _(c): return ft_task(c, task(c, **{'train.csv': (CSV_HEAD + _csv_rows().replace('film', 'caf\xe9')).encode('latin-1')}))


@case('T33', 'task files', 'train CSV in UTF-16')
def _(c): return ft_task(c, task(c, **{'train.csv': (CSV_HEAD + _csv_rows()).encode('utf-16')}))


@case('T34', 'task files', 'train CSV is binary')
def _(c): return ft_task(c, task(c, **{'train.csv': os.urandom(5000)}))


@case('T35', 'task files', 'train CSV with a UTF-8 byte-order mark', expect='ok')
def _(c): return ft_task(c, task(c, **{'train.csv': (CSV_HEAD + _csv_rows()).encode('utf-8-sig')}))


@case('T36', 'task files', 'train CSV without the label column')
def _(c): return ft_task(c, task(c, **{'train.csv': 'id,text\n' + ''.join(f'r{i},x y\n' for i in range(20))}))


@case('T37', 'task files', 'train CSV with one class only')
def _(c): return ft_task(c, task(c, **{'train.csv': CSV_HEAD + _csv_rows().replace(',bad', ',good')}))


@case('T38', 'task files', 'dev CSV with a label never seen in training')
def _(c): return ft_task(c, task(c, **{'dev.csv': CSV_HEAD + _csv_rows(8, 100).replace(',bad', ',meh')}))


@case('T39', 'task files', 'regression CSV with a label that is not a number')
def _(c):
    tr = CSV_HEAD + _csv_rows().replace(',good', ',1.5').replace(',bad', ',0.5')
    return ft_task(c, task(c, TASK_YAML.replace('classification', 'regression'),
                           **{'train.csv': tr.replace(',1.5\n', ',high\n', 1), 'dev.csv': CSV_HEAD + _csv_rows(8, 100).replace(',good', ',1').replace(',bad', ',0')}))


@case('T40', 'task files', 'train CSV with an empty text cell', expect='ok')
def _(c): return ft_task(c, task(c, **{'train.csv': CSV_HEAD + 'r0,,good\n' + _csv_rows()}))


@case('T41', 'task files', 'train CSV with a blank line in the middle', expect='ok')
def _(c): return ft_task(c, task(c, **{'train.csv': CSV_HEAD + _csv_rows(12) + '\n' + _csv_rows(12, 12)}))


@case('T42', 'task files', 'train CSV with a quoted field left open (runs to the end of the file)')
def _(c): return ft_task(c, task(c, **{'train.csv': CSV_HEAD + 'r0,"the film was good,good\n' + _csv_rows()}))


@case('T43', 'task files', 'train CSV of 200 000 rows (huge for the tiny model: --max_train_samples 64)', expect='ok')
def _(c): return ft_task(c, task(c, **{'train.csv': CSV_HEAD + _csv_rows(200_000)}))


@case('T44', 'task files', 'CSV labels written 1 and 1.0 (one class twice?)')
def _(c):
    tr = CSV_HEAD + _csv_rows().replace(',good', ',1').replace(',bad', ',0')
    tr = tr.replace(',1\n', ',1.0\n', 3)
    p = ft_task(c, task(c, **{'train.csv': tr, 'dev.csv': CSV_HEAD + _csv_rows(8, 100).replace(',good', ',1').replace(',bad', ',0')}))
    if p.rc == 0 and '3 classes' in p.stdout + p.stderr: p.wrong = '1 and 1.0 taken as two classes'
    return p


@case('T45', 'task files', 'TSV task with a quote character in a text', expect='ok')
def _(c):
    rows = ''.join(f'r{i}\tthe "film" was {("good", "bad")[i % 2]}\t{("good", "bad")[i % 2]}\n' for i in range(24))
    y = TASK_YAML.replace('.csv', '.tsv')
    dev = ''.join(rows.splitlines(keepends=True)[:8])
    return ft_task(c, task(c, y, **{'train.tsv': 'id\ttext\tlabel\n' + rows, 'dev.tsv': 'id\ttext\tlabel\n' + dev}))


@case('T46', 'task files', 'JSONL task with a malformed line')
def _(c):
    rows = ''.join(json.dumps({'id': f'r{i}', 'text': f'film {i % 2}', 'label': ('good', 'bad')[i % 2]}) + '\n' for i in range(24))
    y = TASK_YAML.replace('.csv', '.jsonl')
    return ft_task(c, task(c, y, **{'train.jsonl': rows + '{"id": "x", "text": \n', 'dev.jsonl': rows}))


@case('T47', 'task files', 'JSONL task with a line that is a list, not an object')
def _(c):
    rows = ''.join(json.dumps({'id': f'r{i}', 'text': f'film {i % 2}', 'label': ('good', 'bad')[i % 2]}) + '\n' for i in range(24))
    y = TASK_YAML.replace('.csv', '.jsonl')
    return ft_task(c, task(c, y, **{'train.jsonl': rows + '["r99", "film", "good"]\n', 'dev.jsonl': rows}))


@case('T48', 'task files', 'JSONL task with a text that is a number', expect='ok')
def _(c):
    rows = ''.join(json.dumps({'id': i, 'text': i, 'label': ('good', 'bad')[i % 2]}) + '\n' for i in range(24))
    y = TASK_YAML.replace('.csv', '.jsonl')
    return ft_task(c, task(c, y, **{'train.jsonl': rows, 'dev.jsonl': rows}))


@case('T49', 'task files', 'parquet train file that is not parquet')
def _(c):
    y = TASK_YAML.replace('train.csv', 'train.parquet')
    return ft_task(c, task(c, y, **{'train.parquet': 'id,text,label\n'}))


@case('T50', 'task files', 'JSONL task whose text is null on a line')
def _(c):
    rows = ''.join(json.dumps({'id': f'r{i}', 'text': f'film {i % 2}', 'label': ('good', 'bad')[i % 2]}) + '\n' for i in range(24))
    y = TASK_YAML.replace('.csv', '.jsonl')
    return ft_task(c, task(c, y, **{'train.jsonl': rows + json.dumps({'id': 'x', 'text': None, 'label': 'good'}) + '\n',
                                    'dev.jsonl': rows}))


@case('T51', 'task files', 'multilabel CSV whose labels are all empty')
def _(c):
    y = TASK_YAML.replace('classification', 'multilabel')
    return ft_task(c, task(c, y, **{'train.csv': CSV_HEAD + _csv_rows().replace(',good\n', ',\n').replace(',bad\n', ',\n')}))


@case('T52', 'task files', 'test CSV without an id column while the task names one')
def _(c):
    return ft_task(c, task(c, TASK_YAML + 'test: test.csv\n', **{'test.csv': 'text\nthe film\nthe book\n'}), '--predict', 'true')


@case('T53', 'task files', 'test CSV with labels never seen in training')
def _(c):
    return ft_task(c, task(c, TASK_YAML + 'test: test.csv\n', **{'test.csv': CSV_HEAD + _csv_rows(4, 200).replace(',bad', ',meh')}),
                   '--predict', 'true')


# ---------------------------------------------------------------- task files: tagging

NER_YAML = 'kind: tagging\ntrain: train.txt\ndev: dev.txt\nscheme: IOB2\n'
NER = 'the O\nmayor O\nof O\nEast B-LOC\nValley I-LOC\nspoke O\n. O\n\nBorin B-PER\nsang O\n. O\n\n' * 6


def tag(c, yaml_text=NER_YAML, **files) -> Path:
    for name, data in {'train.txt': NER, 'dev.txt': NER, **files}.items():
        if data is not None: c.write(name, data)
    return c.write('t.yaml', yaml_text)


@case('T60', 'tagging', 'a good CoNLL task (reference)', expect='ok')
def _(c): return ft_task(c, tag(c))


@case('T61', 'tagging', 'CoNLL train file empty')
def _(c): return ft_task(c, tag(c, **{'train.txt': ''}))


@case('T62', 'tagging', 'CoNLL train file with words but no tag column')
def _(c): return ft_task(c, tag(c, **{'train.txt': re.sub(r' \S+\n', '\n', NER)}))


@case('T63', 'tagging', 'CoNLL train file in latin-1')
def _(c): return ft_task(c, tag(c, **{'train.txt': NER.replace('mayor', 'caf\xe9').encode('latin-1')}))


@case('T64', 'tagging', 'CoNLL: I- after O in IOB2')
def _(c): return ft_task(c, tag(c, **{'train.txt': NER.replace('East B-LOC', 'East I-LOC', 1)}))


@case('T65', 'tagging', 'CoNLL dev tag never seen in training (B-ORG)')
def _(c): return ft_task(c, tag(c, **{'dev.txt': NER.replace('Borin B-PER', 'Borin B-ORG', 1)}))


@case('T66', 'tagging', 'tagging YAML: scheme: BIO (not a scheme name)')
def _(c): return ft_task(c, tag(c, NER_YAML.replace('IOB2', 'BIO')))


@case('T67', 'tagging', 'JSONL tagging: tags shorter than tokens')
def _(c):
    rows = json.dumps({'tokens': ['the', 'mayor', 'Borin'], 'tags': ['O', 'O', 'B-PER']}) + '\n'
    bad = json.dumps({'tokens': ['the', 'mayor', 'Borin'], 'tags': ['O', 'B-PER']}) + '\n'
    return ft_task(c, tag(c, NER_YAML.replace('.txt', '.jsonl'), **{'train.jsonl': rows * 10 + bad, 'dev.jsonl': rows * 4}))


@case('T68', 'tagging', 'CoNLL train file is binary')
def _(c): return ft_task(c, tag(c, **{'train.txt': os.urandom(4000)}))


@case('T69', 'tagging', 'tagging YAML without train')
def _(c): return ft_task(c, tag(c, NER_YAML.replace('train: train.txt\n', '')))


@case('T70', 'tagging', 'CoNLL train with a word of 5 000 characters (one word, many pieces)', expect='ok')
def _(c): return ft_task(c, tag(c, **{'train.txt': NER + 'x' * 5000 + ' O\n. O\n'}))


@case('T71', 'tagging', 'tagging YAML: metrics [bleu]')
def _(c): return ft_task(c, tag(c, NER_YAML + 'metrics: [bleu]\n'))


# ---------------------------------------------------------------- task files: QA

SQUAD_YAML = 'kind: squad\ntrain: train.json\ndev: dev.json\nmax_length: 64\ndoc_stride: 16\nmax_query_length: 16\n'


def _squad(n: int = 12, v2: bool = True) -> dict:
    qas = lambda a: [{'id': f'{a}-{i}', 'question': 'Where does Borin live?',
                      'answers': [{'text': 'the oak', 'answer_start': 18}], 'is_impossible': False} for i in range(3)]
    return {'version': 'v2.0' if v2 else '1.1', 'data': [{'title': f'a{a}', 'paragraphs': [
        {'context': 'Borin lives under the oak. Borin works as a singer.', 'qas': qas(a)}]} for a in range(n)]}


def qa(c, yaml_text=SQUAD_YAML, **files) -> Path:
    for name, data in {'train.json': json.dumps(_squad()), 'dev.json': json.dumps(_squad(4)), **files}.items():
        if data is not None: c.write(name, data)
    return c.write('t.yaml', yaml_text)


@case('T80', 'QA', 'a good SQuAD 2.0 task (reference)', expect='ok')
def _(c): return ft_task(c, qa(c))


@case('T81', 'QA', 'SQuAD train JSON malformed')
def _(c): return ft_task(c, qa(c, **{'train.json': '{"data": ['}))


@case('T82', 'QA', 'SQuAD train JSON that is a list')
def _(c): return ft_task(c, qa(c, **{'train.json': '[1, 2]'}))


@case('T83', 'QA', 'SQuAD train JSON without data')
def _(c): return ft_task(c, qa(c, **{'train.json': '{"version": "v2.0"}'}))


@case('T84', 'QA', 'SQuAD train JSON empty (0 bytes)')
def _(c): return ft_task(c, qa(c, **{'train.json': ''}))


@case('T85', 'QA', 'SQuAD train JSON in latin-1')
def _(c): return ft_task(c, qa(c, **{'train.json': json.dumps(_squad(), ensure_ascii=False).replace('Borin', 'R\xe9e').encode('latin-1')}))


@case('T86', 'QA', 'SQuAD question without an id')
def _(c):
    d = _squad()
    del d['data'][0]['paragraphs'][0]['qas'][0]['id']
    return ft_task(c, qa(c, **{'train.json': json.dumps(d)}))


@case('T87', 'QA', 'SQuAD paragraph with an empty context')
def _(c):
    d = _squad()
    d['data'][0]['paragraphs'][0]['context'] = ''
    return ft_task(c, qa(c, **{'train.json': json.dumps(d)}))


@case('T88', 'QA', 'QA YAML: doc_stride 0')
def _(c): return ft_task(c, qa(c, SQUAD_YAML.replace('doc_stride: 16', 'doc_stride: 0')))


@case('T89', 'QA', 'QA YAML: max_query_length larger than max_length (short questions: they fit)', expect='ok')
def _(c): return ft_task(c, qa(c, SQUAD_YAML.replace('max_query_length: 16', 'max_query_length: 100')))


@case('T90', 'QA', 'QA YAML: train file .jsonl for kind squad')
def _(c): return ft_task(c, qa(c, SQUAD_YAML.replace('train.json', 'train.jsonl'), **{'train.jsonl': '{}\n'}))


@case('T91', 'QA', 'MRQA JSONL with a malformed line')
def _(c):
    line = lambda i: json.dumps({'context': 'Borin lives under the oak.', 'qas': [
        {'qid': f'q{i}', 'question': 'Where?', 'answers': ['the oak'], 'detected_answers': [
            {'text': 'the oak', 'char_spans': [[18, 24]]}]}]}) + '\n'
    head = json.dumps({'header': {'dataset': 'x'}}) + '\n'
    y = 'kind: mrqa\ntrain: train.jsonl\ndev: dev.jsonl\nmax_length: 64\ndoc_stride: 16\nmax_query_length: 16\n'
    train = head + ''.join(map(line, range(5))) + '{"context": \n'
    return ft_task(c, qa(c, y, **{'train.jsonl': train, 'dev.jsonl': head + line(9)}))


@case('T92', 'QA', 'QA YAML: on_bad_answer: ignore (not a choice)')
def _(c): return ft_task(c, qa(c, SQUAD_YAML + 'on_bad_answer: ignore\n'))


@case('T93', 'QA', 'SQuAD answer_start not an integer ("18")')
def _(c):
    d = _squad()
    d['data'][0]['paragraphs'][0]['qas'][0]['answers'][0]['answer_start'] = 'x18'
    return ft_task(c, qa(c, **{'train.json': json.dumps(d)}))


# ---------------------------------------------------------------- caches

@case('P89', 'pretrain', 'a shard of the data cache overwritten with garbage: rebuilt', expect='ok')
def _(c):
    cache = c.p('cache')
    shutil.copytree(c.cache / 'demo', cache / 'demo')
    first = c.pretrain('--cache_dir', cache)
    if first.rc != 0: return first
    for shard in (cache / 'pretrain_data').rglob('shard-*.arrow'): shard.write_bytes(os.urandom(shard.stat().st_size))
    shutil.rmtree(c.dir / 'out')
    return c.pretrain('--cache_dir', cache)


@case('F80', 'finetune', 'a token cache file (glue_tokens/*.npz) overwritten with garbage: encoded again', expect='ok')
def _(c):
    cache = c.p('cache')
    first = c.finetune('--cache_dir', cache, '--group', 'a')
    if first.rc != 0: return first
    for f in (cache / 'glue_tokens').glob('*.npz'): f.write_bytes(os.urandom(2000))
    p = c.finetune('--cache_dir', cache, '--group', 'b')
    if p.rc == 0: p.note = 'the cache was encoded again'
    return p


# ---------------------------------------------------------------- the comparison command

simple('C01', 'compare', '--config no such preset', 'compare', '--config', 'nope')
simple('C02', 'compare', "--variants '{}' (none)", 'compare', '--variants', '{}', '--dry_run', 'true')
simple('C03', 'compare', '--only foo (not a variant)', 'compare', '--only', 'foo', '--dry_run', 'true')
simple('C04', 'compare', '--reference foo', 'compare', '--reference', 'foo', '--dry_run', 'true')
simple('C05', 'compare', "--pretrain_overrides '{run_name: x}' (set by the comparison)", 'compare',
       '--pretrain_overrides', '{run_name: x}', '--dry_run', 'true')
simple('C06', 'compare', '--pretrain.hidden_size abc', 'compare', '--pretrain.hidden_size', 'abc', '--dry_run', 'true')
simple('C07', 'compare', '--finetune_at 0.5 (without 1.0)', 'compare', '--finetune_at', '0.5', '--dry_run', 'true')
simple('C08', 'compare', '--dry_run true (reference)', 'compare', '--dry_run', 'true', expect='ok')
simple('C09', 'compare', '--pretrain.corpus a path that does not exist', 'compare', '--pretrain.corpus',
       lambda c: c.dir / 'nope', '--dry_run', 'true')
simple('C10', 'compare', '--pretrain_config no such preset', 'compare', '--pretrain_config', 'nope', '--dry_run', 'true')
simple('C11', 'compare', '--finetune_config no such preset', 'compare', '--finetune_config', 'nope', '--dry_run', 'true')
simple('C12', 'compare', '--tasks FOO', 'compare', '--tasks', 'FOO', '--dry_run', 'true')
simple('C13', 'compare', '--seeds 1,1', 'compare', '--seeds', '1,1', '--dry_run', 'true')
simple('C14', 'compare', "--variants '{x: 5}'", 'compare', '--variants', '{x: 5}', '--dry_run', 'true')
simple('C15', 'compare', '--threads -1', 'compare', '--threads', '-1', '--dry_run', 'true')
simple('C16', 'compare', '--pretrain.max_length 1', 'compare', '--pretrain.max_length', '1', '--dry_run', 'true')
simple('C17', 'compare', '--finetune.runs 0', 'compare', '--finetune.runs', '0', '--dry_run', 'true')
simple('C18', 'compare', "--name 'a b'", 'compare', '--name', 'a b', '--dry_run', 'true')
simple('C19', 'compare', '--finetune.model x (set by the comparison)', 'compare', '--finetune.model', 'x', '--dry_run', 'true')
simple('C20', 'compare', '--pretrain.stpes 10 (misspelt pretrain key)', 'compare', '--pretrain.stpes', '10', '--dry_run', 'true')
simple('C21', 'compare', '--tasks a task file that does not exist', 'compare', '--tasks', lambda c: c.dir / 'nope.yaml',
       '--dry_run', 'true')
simple('C22', 'compare', '--pretrain.tokenizer a vocab.txt that does not exist', 'compare', '--pretrain.tokenizer',
       lambda c: c.dir / 'vocab.txt', '--dry_run', 'true')


@case('C23', 'compare', '--config a YAML that is a list')
def _(c): return c.compare('--config', c.write('l.yaml', '- a\n- b\n'), '--dry_run', 'true')


@case('C24', 'compare', 'a compare YAML with variants as a list')
def _(c): return c.compare('--config', c.write('v.yaml', 'pretrain_config: demo\nvariants: [electra, bert]\n'), '--dry_run', 'true')


@case('C25', 'compare', '--table_only true with nothing run yet', expect='ok')
def _(c): return c.compare('--table_only', 'true')


@case('C26', 'compare', '--output_dir is a file')
def _(c): return c.run(c.cmd(['-m', 'electra.experiments.compare'], '--output_dir', c.write('f', 'x'), '--table_only', 'true'))


@case('C27', 'compare', '--finetune.data a directory that does not exist')
def _(c): return c.compare('--finetune.data', c.dir / 'nope', '--dry_run', 'true')


# ---------------------------------------------------------------- the converter

def _tf_copy(c) -> Path:
    shutil.copytree(c.tf, c.dir / 'tf')
    return c.dir / 'tf'


@case('V00', 'convert', 'a good conversion (reference)', expect='ok')
def _(c): return c.convert('tf', c.tf, '--out', c.dir / 'out')


simple('V01', 'convert', 'a checkpoint path that does not exist', 'convert', 'tf', lambda c: c.dir / 'nope', '--out',
       lambda c: c.dir / 'out')
simple('V02', 'convert', 'an empty directory as the checkpoint', 'convert', 'tf', lambda c: c.p('empty', 'x').parent,
       '--out', lambda c: c.dir / 'out')
simple('V03', 'convert', 'a text file as the checkpoint', 'convert', 'tf', lambda c: c.write('x.txt', 'hello'), '--out',
       lambda c: c.dir / 'out')
simple('V12', 'convert', 'no subcommand', 'convert')
simple('V13', 'convert', 'ls on a text file', 'convert', 'ls', lambda c: c.write('x.txt', 'hello'))


@case('V04', 'convert', 'the .index file truncated')
def _(c):
    d = _tf_copy(c)
    idx = d / 'model.ckpt-5.index'
    idx.write_bytes(idx.read_bytes()[:3000])
    return c.convert('tf', d, '--out', c.dir / 'out')


@case('V05', 'convert', 'the .data file truncated')
def _(c):
    d = _tf_copy(c)
    data = next(d.glob('*.data-*'))
    data.write_bytes(data.read_bytes()[:500_000])
    return c.convert('tf', d, '--out', c.dir / 'out')


@case('V06', 'convert', 'the .data file with flipped bytes (CRC)')
def _(c):
    d = _tf_copy(c)
    data = next(d.glob('*.data-*'))
    b = bytearray(data.read_bytes())
    b[1000:1010] = bytes(10)
    data.write_bytes(bytes(b))
    return c.convert('tf', d, '--out', c.dir / 'out')


@case('V07', 'convert', '--out holding a conversion already, without --overwrite')
def _(c):
    c.convert('tf', c.tf, '--out', c.dir / 'out')
    return c.convert('tf', c.tf, '--out', c.dir / 'out')


@case('V08', 'convert', '--hparams malformed JSON')
def _(c): return c.convert('tf', c.tf, '--out', c.dir / 'out', '--hparams', c.write('h.json', '{"num_attention_heads": '))


@case('V09', 'convert', '--hparams a file that does not exist')
def _(c): return c.convert('tf', c.tf, '--out', c.dir / 'out', '--hparams', c.dir / 'nope.json')


@case('V10', 'convert', '--hparams a JSON list')
def _(c): return c.convert('tf', c.tf, '--out', c.dir / 'out', '--hparams', c.write('h.json', '[1, 2]'))


@case('V11', 'convert', '--hparams with num_attention_heads 5 (does not divide the hidden size)')
def _(c):
    h = json.loads((c.tf / 'hparams.json').read_text())
    h['model_hparam_overrides']['num_attention_heads'] = 5
    return c.convert('tf', c.tf, '--out', c.dir / 'out', '--hparams', c.write('h.json', json.dumps(h)))


@case('V14', 'convert', '--vocab a file that does not exist')
def _(c): return c.convert('tf', c.tf, '--out', c.dir / 'out', '--vocab', c.dir / 'vocab.txt')


@case('V15', 'convert', '--vocab in latin-1')
def _(c):
    words = (c.tf / 'vocab.txt').read_text().splitlines()
    words[-1] = 'caf\xe9'
    return c.convert('tf', c.tf, '--out', c.dir / 'out', '--vocab', c.write('vocab.txt', '\n'.join(words) + '\n', encoding='latin-1'))


@case('V16', 'convert', '--vocab empty')
def _(c): return c.convert('tf', c.tf, '--out', c.dir / 'out', '--vocab', c.write('vocab.txt', ''))


@case('V17', 'convert', '--out is a file')
def _(c): return c.convert('tf', c.tf, '--out', c.write('f', 'x'))


@case('V18', 'convert', 'a `checkpoint` state file naming a missing prefix')
def _(c):
    d = _tf_copy(c)
    (d / 'checkpoint').write_text('model_checkpoint_path: "model.ckpt-99"\n')
    return c.convert('tf', d, '--out', c.dir / 'out')


@case('V19', 'convert', '--vocab a binary file')
def _(c): return c.convert('tf', c.tf, '--out', c.dir / 'out', '--vocab', c.write('vocab.txt', os.urandom(3000)))


# ---------------------------------------------------------------- the notebooks

def _nb_root(c) -> Path:
    root = c.dir / 'repo'
    (root / 'notebooks').mkdir(parents=True)
    for nb in ('Pretrain.ipynb', 'Finetune_GLUE.ipynb'): shutil.copy(REPO / 'notebooks' / nb, root / 'notebooks' / nb)
    for s in ('pretrain.py', 'finetune.py'): shutil.copy(REPO / s, root / s)
    return root


simple('N01', 'notebooks', 'notebooks check on a clean checkout', 'run', lambda c: [sys.executable, '-m', 'electra.tools.notebooks',
                                                                                    'check', '--root', _nb_root(c)], expect='ok')
simple('N02', 'notebooks', 'notebooks with an unknown subcommand', 'run', [sys.executable, '-m', 'electra.tools.notebooks', 'bogus'])


@case('N03', 'notebooks', 'notebooks check after pretrain.py was edited by hand (drift)')
def _(c):
    root = _nb_root(c)
    (root / 'pretrain.py').write_text((root / 'pretrain.py').read_text() + '\nprint(1)\n')
    return c.run([sys.executable, '-m', 'electra.tools.notebooks', 'check', '--root', str(root)])


@case('N04', 'notebooks', 'notebooks export with a notebook that is not JSON')
def _(c):
    root = _nb_root(c)
    (root / 'notebooks' / 'Pretrain.ipynb').write_text('{"cells": [')
    return c.run([sys.executable, '-m', 'electra.tools.notebooks', 'export', '--root', str(root)])


@case('N05', 'notebooks', 'notebooks check with a notebook missing')
def _(c):
    root = _nb_root(c)
    (root / 'notebooks' / 'Finetune_GLUE.ipynb').unlink()
    return c.run([sys.executable, '-m', 'electra.tools.notebooks', 'check', '--root', str(root)])


def _run_notebook(c, name: str, overrides: dict) -> Proc:
    "Execute a notebook with nbclient, its `overrides` cell set; rc 2 and `error: <ename>: <evalue>` when a cell fails."
    code = f"""
import json, sys, nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
nb = nbformat.read('{REPO / 'notebooks' / name}', as_version=4)
cell = next(c for c in nb.cells if 'parameters' in c.metadata.get('tags', []))
cell.source = 'overrides = ' + {json.dumps(overrides)!r}
try: NotebookClient(nb, timeout=240, kernel_name='python3', resources={{'metadata': {{'path': '{REPO / 'notebooks'}'}}}}).execute()
except CellExecutionError as e:
    print('error: ' + e.ename + ': ' + e.evalue, file=sys.stderr)
    sys.exit(2 if e.ename in ('ConfigError',) else 1)
"""
    return c.run([sys.executable, '-c', code])


@case('N06', 'notebooks', 'Pretrain.ipynb with overrides {stpes: 5} (misspelt key)')
def _(c): return _run_notebook(c, 'Pretrain.ipynb', {'stpes': 5})


@case('N07', 'notebooks', 'Finetune_GLUE.ipynb with a model that does not exist')
def _(c): return _run_notebook(c, 'Finetune_GLUE.ipynb', {'model': str(c.dir / 'nope.pth'), 'data': str(c.glue)})


@case('N08', 'notebooks', 'Pretrain.ipynb with overrides {steps: -1}')
def _(c): return _run_notebook(c, 'Pretrain.ipynb', {'steps': -1})


# ---------------------------------------------------------------- the environment: the hub offline

simple('E01', 'env', '--model google/electra-small-discriminator, hub offline', 'finetune', '--model',
       'google/electra-small-discriminator')
simple('E02', 'env', '--init_from google/electra-small-discriminator, hub offline', 'pretrain', '--init_from',
       'google/electra-small-discriminator')
simple('E03', 'env', '--data hub, hub offline', 'finetune', '--data', 'hub')
simple('E04', 'env', '--corpus hub:openwebtext, hub offline', 'pretrain', '--corpus', 'hub:openwebtext')
simple('E05', 'env', '--tokenizer bert-base-uncased (a hub name), hub offline', 'pretrain', '--tokenizer', 'bert-base-uncased')


@case('E06', 'env', '--model google/electra-small-discriminator, no network and HF_HUB_OFFLINE unset')
def _(c):
    return c.run(c.cmd(['finetune.py'], *c.finetune_args(), '--model', 'google/electra-small-discriminator'),
                 env={'HF_HUB_OFFLINE': '0', 'TRANSFORMERS_OFFLINE': '0', 'HF_DATASETS_OFFLINE': '0'})


@case('E07', 'env', '--corpus hub:wikitext, no network and HF_HUB_OFFLINE unset')
def _(c):
    return c.run(c.cmd(['pretrain.py'], *c.pretrain_args(), '--corpus', 'hub:wikitext'),
                 env={'HF_HUB_OFFLINE': '0', 'TRANSFORMERS_OFFLINE': '0', 'HF_DATASETS_OFFLINE': '0'})


simple('E08', 'env', 'qa.hub rajpurkar/squad_v2 OUT, hub offline', 'run',
       lambda c: [sys.executable, '-m', 'electra.finetuning.tasks.qa.hub', 'rajpurkar/squad_v2', str(c.dir / 'sq')])


@case('E09', 'env', '--logger neptune, NEPTUNE_MODE unset, no API token')
def _(c):
    env = {'NEPTUNE_MODE': '', 'NEPTUNE_API_TOKEN': '', 'NEPTUNE_PROJECT': ''}
    return c.run(c.cmd(['pretrain.py'], *c.pretrain_args(), '--logger', 'neptune'), env=env)


# ---------------------------------------------------------------- pretrain.py: a run's tokenizer

@case('P90', 'pretrain', '--overwrite with another --vocab_size than the run before (no --tokenizer)', expect='ok')
def _(c):
    first = c.run(c.cmd(['pretrain.py'], *c.pretrain_args(tokenizer=False), '--vocab_size', '1000'))
    if first.rc != 0: return first
    p = c.run(c.cmd(['pretrain.py'], *c.pretrain_args(tokenizer=False), '--vocab_size', '1500', '--overwrite', 'true'))
    n = len(_exported_vocab(c))
    if p.rc == 0 and n <= 1000: p.wrong = f'--vocab_size 1500 asked, the run used the old run\'s tokenizer of {n} tokens'
    return p


def _exported_vocab(c) -> dict:
    "The vocabulary of run c's exported discriminator (its tokenizer.json: exports hold no vocab.txt)."
    path = c.dir / 'out' / 'c_11081' / 'discriminator' / 'tokenizer.json'
    return json.loads(path.read_text())['model']['vocab'] if path.is_file() else {}


@case('P91', 'pretrain', '--overwrite with another --corpus than the run before (no --tokenizer)', expect='ok')
def _(c):
    first = c.run(c.cmd(['pretrain.py'], *c.pretrain_args(tokenizer=False), '--vocab_size', '1000'))
    if first.rc != 0: return first
    text = c.write('other.txt', ''.join(f'zebra{i % 50} quokka{i % 30} walked .\nxylophone{i % 40} sang .\n\n' for i in range(3000)))
    p = c.run(c.cmd(['pretrain.py'], *c.pretrain_args(tokenizer=False), '--vocab_size', '1000', '--overwrite', 'true',
                    '--corpus', text))
    if p.rc == 0 and 'quokka1' not in _exported_vocab(c):
        p.wrong = 'the new corpus\'s run kept the tokenizer trained on the old corpus'
    return p


# ---------------------------------------------------------------- kills (kill -9 of the main process), then the rerun

def _kill_main(proc, settle: float = 3.0) -> str:
    "kill -9 the main process only, as a user does; what is left of its process group after `settle` seconds."
    os.kill(proc.pid, 9)
    proc.wait()
    time.sleep(settle)
    try:
        os.killpg(proc.pid, 0)
        left = subprocess.run(['pgrep', '-g', str(proc.pid)], capture_output=True, text=True).stdout.split()
    except ProcessLookupError: left = []
    if left: os.killpg(proc.pid, 9)
    return f'{len(left)} child process(es) outlived the kill' if left else ''


def _reference(c, steps: int = 40) -> Path:
    "The final checkpoint of an uninterrupted tiny run of `steps` steps (built once, kept with the fixtures)."
    out = c.base / f'ref{steps}'
    final = out / 'c_11081_100%.pth'
    if not final.is_file():
        p = c.run(c.cmd(['pretrain.py'], *c.pretrain_args(out, steps)))
        assert p.rc == 0, p.stderr[-2000:]
    return final


def _same_model(a: Path, b: Path) -> str:
    "'' when two checkpoints hold equal weights and optimizer state, else what differs."
    x, y = (torch.load(p, map_location='cpu', weights_only=True) for p in (a, b))
    bad = [k for k in x['model'] if not torch.equal(x['model'][k], y['model'][k])]
    return f'weights differ from the uninterrupted run ({len(bad)} tensors, e.g. {bad[:2]})' if bad else ''


def _metrics_steps_unique(run_dir: Path) -> str:
    import csv
    rows = list(csv.DictReader(open(run_dir / 'metrics.csv')))
    steps = [r['step'] for r in rows]
    return '' if len(steps) == len(set(steps)) else f'metrics.csv repeats steps ({len(steps)} rows, {len(set(steps))} steps)'


def _resume_after_kill(c, wrap: str, ready) -> Proc:
    "A 40-step run killed when `ready(out, log)`; then --resume, checked against the uninterrupted run."
    ref, out = _reference(c), c.p('out')
    log = c.p('killed.log')
    proc = c.start(c.cmd(['pretrain.py'], *c.pretrain_args(out, 40), wrap=wrap), log)
    if not wait_for(lambda: ready(out, log), proc=proc):
        kill_group(proc)
        return Proc(-1, '', log.read_text(), note='the moment to kill never came')
    left = _kill_main(proc)
    p = c.run(c.cmd(['pretrain.py'], *c.pretrain_args(out, 40), '--resume'))
    if p.rc == 0:
        p.wrong = left or _same_model(ref, out / 'c_11081_100%.pth') or _metrics_steps_unique(out / 'c_11081')
        tmp = list(out.glob('.*.tmp'))
        if tmp: p.wrong = p.wrong or f'partial files left: {[t.name for t in tmp]}'
    return p


@case('K01', 'kills', 'kill -9 during training (after the 25% checkpoint), then --resume: bit-exact?', expect='ok')
def _(c): return _resume_after_kill(c, '', lambda out, log: (out / 'c_11081_25%.pth').is_file())


@case('K02', 'kills', 'kill -9 during a checkpoint write (the 50% one), then --resume: bit-exact?', expect='ok')
def _(c): return _resume_after_kill(c, 'hang:50%.pth', lambda out, log: 'INJECT hang' in log.read_text())


@case('K03', 'kills', 'kill -9 during the data build (wikipedia leads, 2 processes), then the same command', expect='ok')
def _(c):
    corpus = REPO.parent / 'shared' / 'data' / 'corpus' / 'wikipedia_leads.txt'
    args = [*c.pretrain_args(), '--corpus', corpus, '--cache_dir', c.p('cache'), '--num_proc', 2, '--max_length', 64]
    log = c.p('killed.log')
    proc = c.start(c.cmd(['pretrain.py'], *args), log)
    building = lambda: any((c.dir / 'cache' / 'pretrain_data').glob('.*.tmp/*'))
    if not wait_for(building, proc=proc):
        kill_group(proc)
        return Proc(-1, '', log.read_text(), note='the build was never seen')
    left = _kill_main(proc)
    p = c.run(c.cmd(['pretrain.py'], *args))
    if p.rc == 0:
        p.wrong = left or ''
        if len(list((c.dir / 'cache' / 'pretrain_data').iterdir())) != 1: p.wrong = p.wrong or 'leftovers in the cache'
    return p


@case('K04', 'kills', 'kill -9 during tokenizer training, then the same command', expect='ok')
def _(c):
    corpus = REPO.parent / 'shared' / 'data' / 'corpus' / 'wikipedia_leads.txt'
    args = [*c.pretrain_args(tokenizer=False), '--corpus', corpus, '--vocab_size', 3000]
    log = c.p('killed.log')
    proc = c.start(c.cmd(['pretrain.py'], *args), log)
    if not wait_for(lambda: any((c.dir / 'out' / 'c_11081').glob('.tokenizer.*.tmp')), proc=proc):
        kill_group(proc)
        return Proc(-1, '', log.read_text(), note='the tokenizer training was never seen')
    left = _kill_main(proc)
    p = c.run(c.cmd(['pretrain.py'], *args))
    if p.rc == 0:
        vocab = c.dir / 'out' / 'c_11081' / 'tokenizer' / 'vocab.txt'
        p.wrong = left or ('' if vocab.is_file() and len(vocab.read_text().splitlines()) > 1000 else 'no full tokenizer')
    return p


@case('K05', 'kills', 'kill -9 during the export (save_pretrained of discriminator/), then the same command with --resume',
      expect='ok')
def _(c):
    out, log = c.p('out'), c.p('killed.log')
    proc = c.start(c.cmd(['pretrain.py'], *c.pretrain_args(out, 8)), log)
    if not wait_for(lambda: (out / 'c_11081' / 'discriminator').is_dir(), proc=proc):
        kill_group(proc)
        return Proc(-1, '', log.read_text(), note='the export was never seen')
    left = _kill_main(proc, 0.5)
    before = (out / 'c_11081_100%.pth').read_bytes()
    p = c.run(c.cmd(['pretrain.py'], *c.pretrain_args(out, 8), '--resume'))
    if p.rc == 0:
        p.wrong = left or ('' if (out / 'c_11081_100%.pth').read_bytes() == before else
                           'the finished run\'s final checkpoint changed (item 1)')
    return p


def _ft_kill(c, wrap: str, ready, runs: int = 2, extra=()) -> Proc:
    "A fine-tuning of `runs` runs killed when `ready(group, log)`; the same command again, its table checked."
    args = [*c.finetune_args(), '--runs', runs, '--epochs', 2, '--group', 'g', *extra]
    g, log = c.dir / 'ft' / 'g', c.p('killed.log')
    proc = c.start(c.cmd(['finetune.py'], *args, wrap=wrap), log)
    if not wait_for(lambda: ready(g, log), proc=proc):
        kill_group(proc)
        return Proc(-1, '', log.read_text(), note='the moment to kill never came')
    left = _kill_main(proc, 1)
    p = c.run(c.cmd(['finetune.py'], *args))
    if p.rc == 0:
        import pandas as pd
        df = pd.read_csv(g / 'results.csv')
        p.wrong = left or ('' if sorted(df['run']) == list(range(runs)) else f'results.csv runs: {list(df["run"])}')
    return p


@case('K06', 'kills', 'kill -9 during fine-tuning (second run), then the same command', expect='ok')
def _(c): return _ft_kill(c, '', lambda g, log: (g / 'results.csv').is_file())


@case('K07', 'kills', 'kill -9 during the results.csv write, then the same command', expect='ok')
def _(c): return _ft_kill(c, 'hang:results.csv', lambda g, log: 'INJECT hang' in log.read_text())


@case('K08', 'kills', 'kill -9 during the test predictions write, then the same command', expect='ok')
def _(c):
    p = _ft_kill(c, 'hang:RTE.tsv', lambda g, log: 'INJECT hang' in log.read_text(), 1, ('--predict', 'true'))
    tsv = c.dir / 'test' / 'g' / 'RTE.tsv'
    if p.rc == 0 and not (tsv.is_file() and len(tsv.read_text().splitlines()) > 1): p.wrong = p.wrong or 'no RTE.tsv'
    return p


@case('K09', 'kills', 'kill -9 during the token cache write, then the same command', expect='ok')
def _(c): return _ft_kill(c, 'hang:RTE-train', lambda g, log: 'INJECT hang' in log.read_text(), 1,
                          ('--cache_dir', c.p('cache')))


@case('K10', 'kills', 'kill -9 during a conversion\'s write, then the same command', expect='ok')
def _(c):
    out, log = c.dir / 'out', c.p('killed.log')
    proc = c.start(c.cmd(['-m', 'electra.convert'], 'tf', c.tf, '--out', out), log)
    if not wait_for(lambda: (out / 'discriminator').is_dir(), proc=proc):
        kill_group(proc)
        return Proc(-1, '', log.read_text(), note='the write was never seen')
    _kill_main(proc, 0.2)
    p = c.convert('tf', c.tf, '--out', out)
    if p.rc == 0 and not (out / 'conversion.json').is_file(): p.wrong = 'no conversion.json'
    return p


# ---------------------------------------------------------------- full disks: a small tmpfs, or a write that raises ENOSPC

class tmpfs:
    "A tmpfs of `size` mounted at `path` for the duration of a `with` (root only)."

    def __init__(self, path: Path, size: str):
        self.path, self.size = path, size

    def __enter__(self) -> Path:
        self.path.mkdir(parents=True, exist_ok=True)
        subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={self.size}', 'tmpfs', str(self.path)], check=True)
        return self.path

    def __exit__(self, *exc):
        subprocess.run(['umount', '-l', str(self.path)], check=False)


@case('D01', 'disk', 'pretrain --output_dir on a full disk (2 MB tmpfs: the first checkpoint does not fit)')
def _(c):
    with tmpfs(c.dir / 'small', '2m') as small: return c.pretrain('--output_dir', small)


@case('D02', 'disk', 'pretrain --output_dir on an 8 MB tmpfs: the third checkpoint does not fit; then --resume elsewhere')
def _(c):
    with tmpfs(c.dir / 'small', '8m') as small:
        p = c.pretrain('--output_dir', small, '--steps', 16)
        kept = sorted(f.name for f in small.glob('*.pth'))
        p.note = f'kept: {kept}; partial files: {sorted(f.name for f in small.glob(".*.tmp"))}'
    return p


@case('D03', 'disk', 'pretrain --cache_dir on a 1 MB tmpfs (the data build does not fit)')
def _(c):
    with tmpfs(c.dir / 'small', '1m') as small: return c.pretrain('--cache_dir', small)


@case('D04', 'disk', 'finetune --output_dir on a 512 KB tmpfs (the run\'s weights do not fit)')
def _(c):
    with tmpfs(c.dir / 'small', '512k') as small: return c.finetune('--output_dir', small)


@case('D05', 'disk', 'finetune --cache_dir on a 64 KB tmpfs (the token cache does not fit)')
def _(c):
    with tmpfs(c.dir / 'small', '64k') as small: return c.finetune('--cache_dir', small)


@case('D06', 'disk', 'convert --out on a 1 MB tmpfs')
def _(c):
    with tmpfs(c.dir / 'small', '1m') as small: return c.convert('tf', c.tf, '--out', small / 'out')


@case('D07', 'disk', 'finetune: results.csv write raises ENOSPC')
def _(c): return c.finetune(wrap='enospc:results.csv')


@case('D08', 'disk', 'finetune: the test predictions write raises ENOSPC')
def _(c): return c.finetune('--predict', 'true', wrap='enospc:RTE.tsv')


@case('D09', 'disk', 'pretrain: config.yaml write raises ENOSPC')
def _(c): return c.pretrain(wrap='enospc:config.yaml')


@case('D10', 'disk', 'pretrain: a checkpoint write raises ENOSPC')
def _(c): return c.pretrain(wrap='enospc:%.pth')


@case('D11', 'disk', 'pretrain --output_dir on a read-only filesystem')
def _(c):
    ro = c.dir / 'ro'
    ro.mkdir()
    subprocess.run(['mount', '-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', str(ro)], check=True)
    try: return c.pretrain('--output_dir', ro)
    finally: subprocess.run(['umount', '-l', str(ro)], check=False)


@case('D12', 'disk', 'finetune --test_output_dir on a read-only filesystem (found only after training? item 10)')
def _(c):
    ro = c.dir / 'ro'
    ro.mkdir()
    subprocess.run(['mount', '-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', str(ro)], check=True)
    try: return c.finetune('--test_output_dir', ro, '--predict', 'true')
    finally: subprocess.run(['umount', '-l', str(ro)], check=False)
