"""What the property-based tests (Hypothesis) of the readers share: their bounded, reproducible settings, the junk
values and file bytes they generate, and the property itself (`result_or_one_line`)."""
import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from electra.config.errors import ConfigError


def bounded(examples: int):
    """`examples` generated cases, the same on every run (derandomize: CI reproduces a failure; no example database
    written into the checkout), no per-example deadline (the CPU is shared by the suite's workers)."""
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None, print_blob=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.data_too_large, HealthCheck.filter_too_much])


def result_or_one_line(call, *args, **kwargs):
    """`call(*args, **kwargs)`'s result, or the `ConfigError` it raised, whose message must be one line (what the
    drivers print after `error: `) that is not empty. Any other exception fails the test (Hypothesis shows it)."""
    try: return call(*args, **kwargs)
    except ConfigError as e:
        message = str(e)
        assert message.strip(), 'an empty error message'
        assert len(message.splitlines()) == 1, f'an error message of {len(message.splitlines())} lines: {message!r}'
        return e


# numbers as people and generators write them: huge (past int64, past Python's 4300-digit str limit), NaN, infinities
numbers = st.one_of(st.integers(), st.integers(min_value=2 ** 62, max_value=2 ** 70), st.floats(),
                    st.sampled_from([0, -1, 1, 2 ** 63, -2 ** 63 - 1, float('nan'), float('inf'), 1e308, 5e-324]))
scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=12))
# nested junk: lists and mappings of anything, a few levels deep
junk = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                        max_size=3), max_leaves=6)


@st.composite
def damaged(draw, text: str) -> bytes:
    """`text` as a file may really hold it: a line given twice (a key twice), CRLF or CR line ends, a byte-order mark,
    another encoding (UTF-16, latin-1), cut short at any byte, or random bytes in its place."""
    lines = text.splitlines(keepends=True)
    if lines and draw(st.booleans()):
        k = draw(st.integers(0, len(lines) - 1))
        lines.insert(draw(st.integers(0, len(lines))), lines[k])
    text = ''.join(lines).replace('\n', draw(st.sampled_from(['\n', '\n', '\r\n', '\r'])))
    encoding = draw(st.sampled_from(['utf-8'] * 6 + ['utf-8-sig', 'utf-16', 'latin-1']))
    data = text.encode(encoding, errors='replace')
    if draw(st.integers(0, 4)) == 0: data = data[:draw(st.integers(0, len(data)))]
    if draw(st.integers(0, 9)) == 0: data = draw(st.binary(max_size=64))
    return data


def yaml_text(mapping: dict, flow: bool | None = None) -> str:
    "A mapping written as YAML, any value YAML holds (NaN as .nan, unicode as written)."
    return yaml.safe_dump(mapping, allow_unicode=True, default_flow_style=flow, sort_keys=False)

