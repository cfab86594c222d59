"""The rules of a name the user gives that becomes a file or folder name (a task, run, group or variant): one name, not
a path, safe on the common file systems (`safe_name`), at most `NAME_BYTES` bytes."""
from __future__ import annotations

import re
import unicodedata
from typing import Any

from electra.config.errors import ConfigError

__all__ = ['NAME_BYTES', 'safe_name', 'name_key', 'how_names_differ']


# A name's UTF-8 bytes at most: 255 per file name on ext4, APFS and NTFS, less room for what the library adds to it
# (`<run_name>_<seed>_<percent>.pth`, `<task>_<run>.pth`, `<task>-<split>-<key>.npz`, and `.<file>.<random>.tmp` while
# a file is written atomically).
NAME_BYTES = 200


_WINDOWS_RESERVED = '<>:"|?*'  # characters Windows refuses in a file name, besides the separators


_WINDOWS_DEVICES = {'CON', 'PRN', 'AUX', 'NUL', *(f'{d}{i}' for d in ('COM', 'LPT') for i in range(1, 10))}


# text direction overrides and isolates: a name that shows one way and is another ("Trojan Source", CVE-2021-42574)
_BIDI_CONTROLS = set('\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069')


def _name_problem(value: Any) -> str | None:
    "What makes `value` unsafe as one file or folder name, or None."
    if not isinstance(value, str): return f'is not text but {type(value).__name__}'
    if not value: return 'is empty'
    if value.startswith(('/', '\\')) or re.match(r'[A-Za-z]:[/\\]', value): return 'is an absolute path, not a name'
    if sep := next((c for c in value if c in '/\\'), None): return f"holds {sep!r}, which separates folders"
    if value in ('.', '..'): return 'names a folder itself or its parent'
    if value.startswith('-'): return "starts with '-', which commands read as an option"
    if value.startswith('.'): return "starts with '.': a hidden file, as the library's own temporary files are"
    odd = next((c for c in value if unicodedata.category(c) in ('Cc', 'Cs', 'Zl', 'Zp') or c in _BIDI_CONTROLS), None)
    if odd is not None: return f'holds the control character {odd!r}'
    if reserved := next((c for c in value if c in _WINDOWS_RESERVED), None):
        return f'holds {reserved!r}, which Windows does not allow in a file name'
    if value != value.strip() or value.endswith('.'):
        return "begins or ends with a space or ends with '.', which Windows drops"
    if value.split('.')[0].upper() in _WINDOWS_DEVICES: return 'is the name of a device on Windows'
    size = len(value.encode('utf-8'))
    if size > NAME_BYTES:
        return f'is {size} bytes long (UTF-8); at most {NAME_BYTES}: a file name has 255 and the library adds to it'
    return None


def safe_name(value: Any, key: str, where: str = '') -> str:
    """`value`, a user's name that becomes a file or folder name (a task, run, group or variant), as given, once it is
    safe as one on common file systems: one name, not a path (no separator, not `.` or `..`, not absolute), not
    hidden or read as an option (no leading `.` or `-`), no control character, none that Windows refuses, at most
    `NAME_BYTES` bytes. Letters and digits of any script are names. Otherwise a one-line ConfigError naming `where`
    (a file and line) and `key`, the value, what is wrong and the fix."""
    problem = _name_problem(value)
    if problem is None: return value
    shown = repr(value) if not isinstance(value, str) or len(value) <= 60 else f'{value[:40]!r}... ({len(value)} characters)'
    raise ConfigError(f"{f'{where}: ' if where else ''}{key}: {shown} {problem}. It names files and folders: give one "
                      "name of letters, digits, spaces and _ - . + (any script), such as 'my_task_v2'.")


def name_key(name: str) -> str:
    """What a file system that ignores case and Unicode form (macOS's APFS and HFS+; Windows for case) sees of `name`:
    its canonical caseless form (Unicode's NFD(casefold(NFD(name)))), so that 'Revi\u00e9w' typed on Linux (é one
    character, NFC) and 'revie\u0301w' in a name macOS gave (e and a combining accent, NFD) are one key."""
    return unicodedata.normalize('NFD', unicodedata.normalize('NFD', name).casefold())


def how_names_differ(a: str, b: str) -> tuple[str, str]:
    """How two names of one `name_key` differ, and where they are one name: (how, where), as in "differ {how}: ...
    would be one {where}". In case: one on macOS and Windows; in Unicode form (with or without case): one on macOS."""
    if a.casefold() == b.casefold(): return 'only in case', 'on a case-insensitive file system (macOS, Windows)'
    case = unicodedata.normalize('NFC', a) != unicodedata.normalize('NFC', b)  # still two once in one form
    form = 'Unicode form (NFC, NFD: an accented letter as one character or as a letter and a combining accent)'
    return f"only in {'case and ' if case else ''}{form}", 'on macOS, whose file systems do not tell the forms apart'
