"""The library's version, in one place: `electra.__version__`, the package metadata (pyproject.toml reads this file),
every command's `--version`, and what each checkpoint, export and model card records of the library that made it.
It sits on the lowest floor so that every module can read it; it imports nothing of the library."""
import argparse

__all__ = ['__version__', 'version_line', 'command_parser']

__version__ = '0.3.0'


def version_line(prog: str) -> str:
    "What `--version` prints: the program and the library's version, as argparse's convention writes it."
    return f'{prog} (electra {__version__})'


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    "A description as written (its commands on their own lines), and each option's default beside its help."


def command_parser(prog: str, description: str) -> argparse.ArgumentParser:
    "The argument parser of one of the library's commands `prog`: its description, its defaults and its `--version`."
    parser = argparse.ArgumentParser(prog=prog, description=description, formatter_class=_HelpFormatter)
    parser.add_argument('--version', action='version', version=version_line(prog))
    return parser
