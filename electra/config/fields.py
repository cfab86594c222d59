"""A config key declared: its default, help text and domain beside it (`field`, `choice_field`), the domain a `Domain`
that says itself in words (for `--help` and the messages) and as pydantic's constraints (checked when the config is
read, `config/values.py`); the bounds that keys of several jobs share (`SEED_END`, `DIST_TIMEOUT_MAX`)."""
from __future__ import annotations

import dataclasses
import types
import typing
from typing import Annotated, Callable, Literal, Sequence, Union

import pydantic

__all__ = ['Domain', 'field', 'choice_field', 'INT64_MAX', 'SEED_END', 'DIST_TIMEOUT_MAX']


INT64_MAX = 2 ** 63 - 1  # what torch and numpy hold of a whole number: the bound of every int key without its own


SEED_END = 2 ** 32        # numpy's seeds are below it (np.random.seed; fastai's set_seed takes them modulo it)


# torch.distributed waits until now + timeout on a clock of int64 nanoseconds: a timeout past 2**63 ns (about 9.2e9
# seconds, less the clock's time since boot) wraps around (1e10 s: the connection timed out at once)
DIST_TIMEOUT_MAX = 10 ** 9


@dataclasses.dataclass(frozen=True)
class Domain:
    """The values a config key takes, declared beside its default (`field`): the bounds of a number (of each element
    of a list), the choices of a string, a list's least length, and what 0 or an empty list means. A float is finite
    unless `finite=False`; a whole number is below 2**63 unless bounded lower."""
    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    finite: bool = True
    choices: tuple = ()
    min_items: int = 0
    zero: str = ''   # what 0 means, where 0 is allowed and special
    empty: str = ''  # what an empty list means

    def words(self, tp, huge: bool = False) -> str:
        "The domain for a value of type `tp`, in words: 'a whole number >= 0', 'a list of numbers in (0, 1]', ..."
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin in (list, tuple):
            least = {0: '', 1: ' non-empty'}.get(self.min_items, f' (at least {self.min_items})')
            if self.choices: return f"a{least} list of {', '.join(map(str, self.choices))}"
            return f"a{least} list of {self._noun(args[0] if args else str, plural=True)}{self._range(huge)}"
        if origin in (typing.Union, types.UnionType):
            named = sorted((a for a in args if a is not type(None)), key=lambda a: a is not str)  # 'auto or ...'
            return ' or '.join(self.words(a, huge) for a in named)
        if self.choices and tp is str:
            return str(self.choices[0]) if len(self.choices) == 1 else f"one of {', '.join(map(str, self.choices))}"
        return f"{self._noun(tp)}{self._range(huge) if tp in (int, float) else ''}"

    def meanings(self) -> list[str]:
        "What the special values mean: ['0: off'], ['empty: all'] or none."
        return [f'{v}: {m}' for v, m in (('0', self.zero), ('empty', self.empty)) if m]

    def _noun(self, tp, plural: bool = False) -> str:
        bounded = self._lower() and self._upper()
        noun = {int: 'whole number', float: 'number' if bounded or not self.finite else 'finite number',
                bool: 'true or false', str: 'string'}.get(tp, getattr(tp, '__name__', str(tp)))
        if tp is bool: return noun
        return f'{noun}s' if plural else f'a {noun}'

    def _lower(self): return ('>', self.gt) if self.gt is not None else ('>=', self.ge) if self.ge is not None else None
    def _upper(self): return ('<', self.lt) if self.lt is not None else ('<=', self.le) if self.le is not None else None

    def _range(self, huge: bool = False) -> str:
        lower, upper = self._lower(), self._upper()
        if lower and upper:
            opening, closing = '(' if lower[0] == '>' else '[', ')' if upper[0] == '<' else ']'
            return f' in {opening}{_bound(lower[1])}, {_bound(upper[1])}{closing}'
        one = lower or upper
        return (f' {one[0]} {_bound(one[1])}' if one else '') + (' below 2**63' if huge and not upper else '')

    def annotated(self, tp):
        "`tp` with this domain as pydantic's constraints (`TypeAdapter` checks a value against them)."
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin in (list, tuple):
            return Annotated[list[self.annotated(args[0] if args else str)], pydantic.Field(min_length=self.min_items)]
        if origin in (typing.Union, types.UnionType):
            return Union[tuple(type(None) if a is type(None) else self.annotated(a) for a in args)]
        if tp is int:
            upper = {'lt': self.lt, 'le': self.le} if self._upper() else {'le': INT64_MAX}
            return Annotated[int, pydantic.Field(gt=self.gt, ge=self.ge, **upper)]
        if tp is float:
            return Annotated[float, pydantic.Field(gt=self.gt, ge=self.ge, lt=self.lt, le=self.le,
                                                   allow_inf_nan=not self.finite)]
        if tp is str and self.choices: return Literal[self.choices]
        return tp


def _bound(v) -> str:
    "A bound as --help and messages write it: 2**32 for a large power of two, 0.5, 1e-06."
    if isinstance(v, int) and v >= 2 ** 16 and v & (v - 1) == 0: return f'2**{v.bit_length() - 1}'
    return f'{v:g}' if isinstance(v, float) else str(v)


def field(default, help: str = '', *, entries: Sequence[str] = (), writes: bool = False,
          names: Callable[[str], bool] | None = None, **domain):
    """A config field with a help text shown by `--help` and its domain (`Domain`'s keywords: gt=0, ge=0, lt=1,
    le=..., finite, min_items, zero='off', empty='all'), checked when the config is read. `entries`: a mapping
    key (task_overrides) whose entries are mappings of these keys of the same config, each checked as that key. A
    path key's value is kept as the absolute path it names (config/paths.py `resolved`): `writes`, a folder the job
    writes, before it exists; `names`, which of its values are names the key takes rather than paths ('demo')."""
    metadata = {'help': help, **({'domain': Domain(**domain)} if domain else {}),
                **({'entries': tuple(entries)} if entries else {}), **({'writes': True} if writes else {}),
                **({'names': names} if names else {})}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda d=default: type(d)(d), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def choice_field(default, choices: list, help: str = ''):
    "A config field whose value must be one of `choices` (checked when the config is read)."
    return dataclasses.field(default=default, metadata={'help': help, 'domain': Domain(choices=tuple(choices))})
