"""The text files a config, a task or a corpus names, read as UTF-8 or refused in one line that names the file and the
fix: a compressed file known by its first bytes (with the command that writes it out plain), text in UTF-16 or
UTF-32, a binary format (a checkpoint, an image, a table); their lines split at LF, CRLF or CR (`split_lines`); JSON
read strictly (`load_json`)."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from electra.config.errors import ConfigError

__all__ = ['read_text', 'split_lines', 'compressed', 'COMPRESSED_SUFFIXES', 'not_text', 'load_json', 'MAX_DIGITS']


# the digits of a whole number a reader takes at most: every key's bound is below 2**63 (19 digits); past Python's
# 4300-digit limit a number can be neither read nor shown in a message, so longer ones are refused where they are read
MAX_DIGITS = 100


# The first bytes of the compressed formats corpora and data sets are shipped in (gzip, bzip2 with its first block or
# end of stream, xz, zstd, zip), and the command that writes one out plain. Each holds bytes UTF-8 text cannot start
# with, so no text file is taken for one.
_COMPRESSED = ((re.compile(rb'\x1f\x8b'), 'gzip', 'gzip -dc'),
               (re.compile(rb'BZh[1-9](1AY&SY|\x17rE8P\x90)'), 'bzip2', 'bzip2 -dc'),
               (re.compile(rb'\xfd7zXZ\x00'), 'xz', 'xz -dc'), (re.compile(rb'\x28\xb5\x2f\xfd'), 'zstd', 'zstd -dc'),
               (re.compile(rb'PK\x03\x04'), 'zip', 'unzip -p'))


COMPRESSED_SUFFIXES = ('.gz', '.bz2', '.xz', '.zst', '.zip')


# A PyTorch checkpoint is a zip archive whose first member is its pickle, `<archive>/data.pkl` (torch.save): told apart
# from a zip of text files, which `unzip -p` would write out plain.
_TORCH = re.compile(rb'PK\x03\x04.{26}[^\x00]{0,256}?data\.pkl', re.S)


# Other formats of files found where text was meant, by their first bytes; none is how UTF-8 text can start.
_BINARY = ((_TORCH, 'a PyTorch checkpoint'), (re.compile(rb'\x89PNG\r\n\x1a\n'), 'a PNG image'),
           (re.compile(rb'\xff\xd8\xff'), 'a JPEG image'), (re.compile(rb'GIF8[79]a'), 'a GIF image'),
           (re.compile(rb'%PDF-'), 'a PDF document'), (re.compile(rb'PAR1'), 'a Parquet table'),
           (re.compile(rb'ARROW1'), 'an Arrow table'), (re.compile(rb'\x93NUMPY'), 'a NumPy array'),
           (re.compile(rb'\x80[\x02-\x05]'), 'a Python pickle'), (re.compile(rb'SQLite format 3\x00'), 'an SQLite database'))


def compressed(path: str | Path, head: bytes | None = None) -> str:
    """'' for a file that is not compressed (by its first bytes, `head` when already read); else what it is and how to
    write it out plain, as the end of a ConfigError's sentence that starts with the file: '<path> is gzip-compressed,
    ...'. The readers read plain text only (the corpus reader splits files by byte ranges for its parallel build)."""
    path = Path(path)
    if head is None:
        try:
            with open(path, 'rb') as f: head = f.read(512)
        except OSError: return ''
    if _TORCH.match(head): return ''
    for magic, name, command in _COMPRESSED:
        if magic.match(head):
            plain = path.with_suffix('') if path.suffix in COMPRESSED_SUFFIXES else path.with_name(f'plain_{path.name}')
            return (f"is {name}-compressed, not text: write it out plain first (`{command} {path} > {plain}`) and give "
                    f"the plain file")
    return ''


def _utf16(head: bytes) -> str:
    """The encoding (as iconv names it) of text in UTF-16 or UTF-32, by its byte-order mark or, without one, a NUL in
    every other byte (the high bytes of Latin-script UTF-16); else ''."""
    if head.startswith((b'\xff\xfe\x00\x00', b'\x00\x00\xfe\xff')): return 'UTF-32'
    if head.startswith((b'\xff\xfe', b'\xfe\xff')): return 'UTF-16'
    even, odd = head[:1024:2], head[1:1024:2]
    if len(odd) < 2: return ''
    zeros = even.count(0) / len(even), odd.count(0) / len(odd)
    if min(zeros) >= 0.1 or max(zeros) <= 0.5: return ''
    low = even if zeros[1] > 0.5 else odd  # the characters' low bytes: mostly printable, in text
    if sum(b >= 0x20 or b in b'\t\n\r' for b in low) < 0.9 * len(low): return ''
    return 'UTF-16LE' if zeros[1] > 0.5 else 'UTF-16BE'


def not_text(path: str | Path, head: bytes) -> str:
    """'' for a file whose first bytes `head` may be text; else, as `compressed` says it, what the file is and how to
    write its text out as UTF-8 where it holds text: compressed, UTF-16/32, or a binary format known by its first
    bytes (a PyTorch checkpoint, an image, a table, ...)."""
    if packed := compressed(path, head): return packed
    for magic, name in _BINARY:
        if magic.match(head): return f"is {name}, not text"
    if encoding := _utf16(head):
        return (f"is {encoding[:6]} text: write it as UTF-8 first (`iconv -f {encoding} -t UTF-8 {path} > "
                f"{Path(path).with_name(f'utf8_{Path(path).name}')}`) and give that file")
    return ''


def read_text(path: str | Path) -> str:
    """A UTF-8 text file (a byte-order mark dropped), or a ConfigError naming it and, for text in another encoding,
    the line of the first byte that is not UTF-8; for a compressed file, how to write it out plain."""
    try: raw = Path(path).read_bytes()
    except OSError as e: raise ConfigError(f"{path}: cannot read it ({e.strerror}).") from None
    try: return raw.decode('utf-8-sig')
    except UnicodeDecodeError as e:
        if packed := compressed(path, raw[:16]): raise ConfigError(f"{path} {packed}.") from None
        line = raw.count(b'\n', 0, e.start) + 1
        raise ConfigError(f"{path}: line {line}: not UTF-8 text ({e.reason} at byte {e.start}: another encoding such as "
                          "latin-1 or UTF-16, or not text at all). Save it as UTF-8.") from None


def split_lines(text: str) -> list[str]:
    """The lines of `text` split at LF, CRLF or a CR alone (classic Mac line ends), as Python's universal newlines read
    a text file; not at the other characters `str.splitlines` takes for line ends (U+2028, U+0085, \\x1c, a form
    feed), which are text inside a line: a word of a CoNLL file, a string of a JSON line."""
    return (text.replace('\r\n', '\n').replace('\r', '\n') if '\r' in text else text).split('\n')


def load_json(text: str, where: str) -> Any:
    """JSON `text` (the contents of `where`: a file, or a line of one) as json.loads reads it, or a one-line ConfigError
    naming `where`: text that is not JSON (with its line and column), a key given twice in one object (json.loads keeps
    the last silently), a whole number of more than `MAX_DIGITS` digits (past 4300 Python can neither read nor show
    one; past 308 no float holds it), nesting deeper than Python's recursion."""
    def unique(pairs):
        out = {}
        for key, value in pairs:
            if key in out:
                raise ConfigError(f"{where}: key {key!r} is given twice in one object; the second would silently "
                                  "replace the first. Keep one of them.")
            out[key] = value
        return out

    def whole(digits: str) -> int:
        if len(digits.lstrip('-')) > MAX_DIGITS:
            raise ConfigError(f"{where}: a whole number of {len(digits.lstrip('-'))} digits; no value takes more than "
                              f"{MAX_DIGITS}. Fix the file.")
        return int(digits)
    try: return json.loads(text, object_pairs_hook=unique, parse_int=whole)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{where}: not JSON ({e.msg} at line {e.lineno}, column {e.colno}). Fix the file.") from None
    except RecursionError:
        raise ConfigError(f"{where}: not JSON that can be read: nested deeper than Python can read. Fix the file.") from None
