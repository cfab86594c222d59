"""Property-based tests (Hypothesis) of the config readers (electra/config/cli.py `load_config`, the job configs of
pretrain.py, finetune.py and the comparison): a preset file of any content (wrong types, values out of their domain,
NaN, huge numbers, unicode, keys missing, unknown or twice, nested junk, random bytes, cut short, a byte-order mark,
CRLF), a command line of any flags and a notebook's overrides of any values end in a config or in one `ConfigError`
of one line (what the drivers print as `error: ...`), never in another exception."""
import dataclasses
import typing

from hypothesis import example, given
from hypothesis import strategies as st

import electra.finetuning  # noqa: F401  (fills the task catalogue that FinetuneConfig checks its tasks with)
from electra.config.cli import load_config
from electra.config.compare import CompareConfig
from electra.config.finetune import FinetuneConfig
from electra.config.pretrain import PretrainConfig
from electra.experiments.compare import load_compare_config
from tests.support.properties import bounded, damaged, junk, result_or_one_line, yaml_text

JOBS = {PretrainConfig: 'configs/pretrain', FinetuneConfig: 'configs/finetune', CompareConfig: 'configs/compare'}


def plausible(f: dataclasses.Field, tp) -> st.SearchStrategy:
    "Values a user might mean for the key `f`: its default, its choices, its bounds and a step past them, as text too."
    default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    d = f.metadata.get('domain')
    near = [v for b in ((d.gt, d.ge, d.lt, d.le) if d else ()) if b is not None for v in (b, b - 1, b + 1, b / 2)]
    values = [default, *(d.choices if d else ()), *near]
    if typing.get_origin(tp) is list: values += [[v] for v in near] + [[], 'a,b', '[1, 2]']
    return st.sampled_from(values) | st.sampled_from(values).map(str)


def _plausible_by_key() -> dict[str, st.SearchStrategy]:
    "Each key of the three jobs with its plausible values (a key two jobs share: the first's)."
    out = {}
    for cls in JOBS:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls): out.setdefault(f.name, plausible(f, hints[f.name]))
    return out


PLAUSIBLE = _plausible_by_key()
# a mapping of some keys of the jobs (and misspelt or junk keys) to plausible values or junk
mappings = st.dictionaries(st.sampled_from(sorted(PLAUSIBLE)) | st.text(max_size=8), st.just(None), max_size=5).flatmap(
    lambda keys: st.fixed_dictionaries({k: (PLAUSIBLE[k] | junk) if k in PLAUSIBLE else junk for k in keys}))


@st.composite
def preset_files(draw) -> bytes:
    "A preset file's bytes: a YAML mapping of keys and values, in any of YAML's styles, then damaged as files are."
    return draw(damaged(yaml_text(draw(mappings), draw(st.sampled_from([None, True, False])))))


HUGE_INT = b'steps: ' + b'1' * 5000 + b'\n'      # past Python's 4300-digit limit of int('...')
HUGE_HEX = b'run_name: 0x' + b'f' * 4000 + b'\n'  # read (no limit in base 16), but 4800 digits to show in a message
DEEP = b'corpus: ' + b'[' * 1000 + b'\n'         # nested deeper than Python's recursion limit


@bounded(80)
@given(cls=st.sampled_from(list(JOBS)), content=preset_files())
@example(cls=PretrainConfig, content=HUGE_INT)
@example(cls=PretrainConfig, content=HUGE_HEX)
@example(cls=FinetuneConfig, content=DEEP)
@example(cls=PretrainConfig, content=b'{a')     # YAML's error was 8 lines
@example(cls=CompareConfig, content=b'\x00')    # a character YAML refuses: PyYAML's ReaderError, a traceback
def test_a_preset_file_of_any_content_is_a_config_or_one_error_line(cls, content, tmp_path_factory):
    path = tmp_path_factory.getbasetemp() / 'preset.yaml'
    path.write_bytes(content)
    result_or_one_line(load_config, cls, ['--config', str(path)], preset_dir=JOBS[cls])


# flags as typed: a key of a job (or misspelt), `--key=value`, a bare flag, values of any text; --help prints and exits
flag_names = (st.sampled_from(sorted(PLAUSIBLE)) | st.text(max_size=8)).map(lambda k: f'--{k}')
cli_values = (st.sampled_from(sorted({str(v) for v in (0, -1, 1.5, 2 ** 64, 'nan', 'inf', '1e400', '', ' ', 'true', 'none',
                                                      '[1, 2', '{a: 1}', '{a: 1, a: 2}', '[', '-', '--', '~/x', 'a,b')}))
              | st.text(max_size=16))
argv = st.lists(flag_names | cli_values | st.tuples(flag_names, cli_values).map('='.join), max_size=8).filter(
    lambda args: not {'--help', '-h', '--config'} & set(args))  # (a preset named by --config: the test above)
no_nul = lambda args: all('\x00' not in a for a in args)  # a program's arguments cannot hold NUL (execve)


@bounded(100)
@given(cls=st.sampled_from(list(JOBS)), args=argv.filter(no_nul))
@example(cls=PretrainConfig, args=['\r'])         # the argument and the key were shown as typed: a line break
@example(cls=FinetuneConfig, args=['--\r', '1'])
def test_a_command_line_of_any_flags_is_a_config_or_one_error_line(cls, args):
    result_or_one_line(load_config, cls, args, preset_dir=JOBS[cls])


@bounded(50)
@given(args=argv.filter(no_nul), nested=st.lists(st.tuples(st.sampled_from(['--pretrain.', '--finetune.']), st.text(max_size=8),
                                                          cli_values), max_size=3))
def test_the_comparison_s_nested_flags_of_any_value_are_a_config_or_one_error_line(args, nested):
    flags = [a for prefix, key, value in nested for a in (prefix + key, value)]
    result_or_one_line(load_compare_config, [*args, *flags])


@bounded(80)
@given(cls=st.sampled_from(list(JOBS)), overrides=mappings)
def test_a_notebook_s_overrides_of_any_value_are_a_config_or_one_error_line(cls, overrides):
    "A notebook's `overrides = {...}` cell holds Python values: anything, NUL and nested junk included."
    result_or_one_line(load_config, cls, [], preset_dir=JOBS[cls], overrides=overrides)
