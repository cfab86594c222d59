"""The library's version, in one place: `electra.__version__`, the package metadata (pyproject.toml reads this file),
every command's `--version`, and what each checkpoint, export and model card records of the library that made it.
It sits on the lowest floor so that every module can read it; it imports nothing."""

__all__ = ['__version__', 'version_line']

__version__ = '0.3.0'


def version_line(prog: str) -> str:
    "What `--version` prints: the program and the library's version, as argparse's convention writes it."
    return f'{prog} (electra {__version__})'
