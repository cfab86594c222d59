"""One corpus as a cached, verified Arrow dataset: built once per fingerprint of everything that shapes it
(`build_corpus`), checked against its build record before reuse, summarised in words.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import socket
import time
import warnings
import zlib
from collections import Counter
from pathlib import Path
from typing import Optional

import datasets
import numpy as np

from electra.config.errors import ConfigError, RunWarning
from electra.data.builder import BUILDER_VERSION, COUNTERS, DOCUMENTS, HASH, build_shards
from electra.data.corpus import BuildSettings, CorpusSource, skipped_in_words
from electra.data.tokenizer import UNKNOWN_SAMPLE, UNKNOWN_SHARE, tokenizer_fingerprint
from electra.runtime.files import file_sha256, owner_gone

__all__ = ['build_corpus', 'build_summary', 'drop_repeated_across', 'examples_digest', 'format_duplicates',
           'format_summary']

_MARKER = 'electra_build.json'  # written last: a dataset directory without it is incomplete
_CHECK_BLOCKS, _CHECK_BLOCK, _CHECK_END = 16, 1 << 16, 1 << 20   # what of each shard file the checksum covers
# a larger share of tokens of sentences longer than an example (`warn_if_cut`), or of text in sentences skipped as too
# long (`warn_if_skipped`), is warned of
CUT_WARN_SHARE = 0.1

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- the cached dataset

def _fingerprint(source: CorpusSource, tokenizer_hash: str, settings: BuildSettings, seed: int) -> str:
    key = {'version': BUILDER_VERSION, 'source': source.content_hash(), 'tokenizer': tokenizer_hash,
           'settings': dataclasses.asdict(settings), 'seed': seed}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]


def _checksum(path: Path) -> int:
    "CRC32 of a shard file's first and last MiB and 16 blocks spread between (the whole of a file up to 3 MiB)."
    size = path.stat().st_size
    crc = 0
    with open(path, 'rb') as f:
        if size <= 2 * _CHECK_END + _CHECK_BLOCKS * _CHECK_BLOCK:
            return zlib.crc32(f.read())
        spans = [(0, _CHECK_END), (size - _CHECK_END, _CHECK_END)]
        step = (size - 2 * _CHECK_END) // _CHECK_BLOCKS
        spans += [(_CHECK_END + i * step, _CHECK_BLOCK) for i in range(_CHECK_BLOCKS)]
        for start, n in spans:
            f.seek(start)
            crc = zlib.crc32(f.read(n), crc)
    return crc


def _load_verified(directory: Path, fingerprint: str) -> tuple[Optional[datasets.Dataset], Optional[dict], str]:
    """The dataset in `directory` and its build record when complete and intact for `fingerprint`; else
    (None, None, why not)."""
    try: info = json.loads((directory / _MARKER).read_text())
    except FileNotFoundError: return None, None, 'no build marker (an interrupted build)'
    except (OSError, ValueError) as e: return None, None, f'unreadable build marker ({e})'
    if info.get('fingerprint') != fingerprint: return None, None, 'build marker of another build'
    if not (directory / DOCUMENTS).is_file(): return None, None, f'{DOCUMENTS} is missing'
    parts = []
    for name, rows, size, crc in info['shards']:
        path = directory / name
        if not path.is_file(): return None, None, f'{name} is missing'
        if path.stat().st_size != size: return None, None, f'{name} has {path.stat().st_size} bytes, not {size}'
        if _checksum(path) != crc: return None, None, f'{name} is corrupted (checksum mismatch)'
        try: part = datasets.Dataset.from_file(str(path))
        except Exception as e: return None, None, f'{name} is unreadable ({type(e).__name__}: {e})'  # pyarrow: many kinds
        if len(part) != rows: return None, None, f'{name} has {len(part)} rows, not {rows}'
        parts.append(part)
    if not parts: return None, None, 'no shard files'
    return datasets.concatenate_datasets(parts) if len(parts) > 1 else parts[0], info, ''


def _remove_dead_builds(root: Path) -> None:
    """Remove the temporary directories (`.<fingerprint>.<pid>.<host>.tmp`) of builds whose process died on this
    host (killed, out of memory): they would otherwise stay in the cache for good. Live builds are left alone."""
    for tmp in root.glob('.*.tmp'):
        parts = tmp.name[1:-len('.tmp')].split('.', 2)  # a host name may hold dots; a fingerprint, a PID do not
        if len(parts) == 3 and parts[1].isdigit() and owner_gone(int(parts[1]), parts[2]):
            log.info(f'pretraining data: removing {tmp}, left by a build that was stopped')
            shutil.rmtree(tmp, ignore_errors=True)


def _build_into(out_dir: Path, source: CorpusSource, tokenizer, settings: BuildSettings, seed: int, num_proc: int,
                progress: bool) -> dict:
    "Build `source`'s shards into `out_dir`; the build record without its fingerprint (see `build_corpus`)."
    start = time.time()
    stats = build_shards(source, tokenizer, settings, seed, out_dir, num_proc, progress)
    totals = Counter()
    for s in stats: totals.update(s)
    files = [(f'shard-{i:05d}.arrow', s['examples']) for i, s in enumerate(stats) if s.get('examples')]
    if not files:
        raise ConfigError(f"corpus {source.entry} gave no pretraining examples "
                          f"({format_counts(totals, source.skipped)}). Give text with words in it; see "
                          "`corpus_format` and `sentence_split` for how it is read.")
    seconds = time.time() - start
    return {'builder_version': BUILDER_VERSION, 'corpus': source.entry, 'kind': source.kind,
            'n_files': len(source.files), 'settings': dataclasses.asdict(settings), 'max_length': settings.max_length,
            'seed': seed, 'n_examples': totals['examples'], 'n_documents': totals['documents'],
            'counts': {k: totals[k] for k in COUNTERS}, 'skipped_files': source.skipped, 'n_shards': len(stats),
            'num_proc': min(num_proc, len(stats)), 'seconds': round(seconds, 2),
            'examples_per_s': round(totals['examples'] / max(seconds, 1e-9), 1),
            'mb_per_s': round(totals['bytes'] / 1e6 / max(seconds, 1e-9), 3),
            'shards': [(name, rows, (out_dir / name).stat().st_size, _checksum(out_dir / name)) for name, rows in files],
            'examples_sha256': _shards_sha256(out_dir, [name for name, _ in files])}


def _shards_sha256(directory: Path, names: list[str]) -> str:
    "The SHA-256 of a build's examples: of its shard files' bytes, in order (not their names or where they lie)."
    h = hashlib.sha256()
    for name in names: h.update(file_sha256(directory / name))
    return h.hexdigest()


def examples_digest(parts: list[datasets.Dataset], across: Optional[list[int]] = None) -> str:
    """What a run trains on, by content: a hash of the examples of each corpus's build (`build_corpus`), in order,
    and of the documents `drop_repeated_across` dropped from each (`across`: a function of the builds, so its counts
    tell whether it ran; none dropped hashes as before it existed). The same text gives the same examples wherever it
    lies and whenever it was touched (the shards' random streams are seeded by file names and sizes, not paths or
    times); a word edited gives others. Read from the build records (hashed once, when built); a build recorded
    before they held it is hashed now."""
    h = hashlib.sha256()
    for part in parts:
        info = build_summary(part)
        directory = Path(part.cache_files[0]['filename']).parent
        h.update((info.get('examples_sha256') or _shards_sha256(directory, [s[0] for s in info['shards']])).encode())
    if any(across or []): h.update(json.dumps(across).encode())
    return h.hexdigest()[:16]


def build_corpus(source: CorpusSource, tokenizer, settings: BuildSettings, cache_dir: Path, seed: int,
                 num_proc: int = 1, progress: bool = True, say=None) -> datasets.Dataset:
    """The pretraining examples of one corpus as an Arrow dataset (columns `input_ids`, `token_type_ids`:
    unpadded, [CLS] ... [SEP] included; `document`: which document of the corpus it came from), memory-mapped
    from `cache_dir/pretrain_data/<fingerprint>/shard-*.arrow`.

    Built once per fingerprint (the source's files by `file_state`, their change time included, or the table's data
    files, the tokenizer, `settings`, seed and BUILDER_VERSION) and reused after, once its files check out against
    the build record (sizes, checksums, row counts); a partial or corrupted build is rebuilt. `num_proc` (0: one
    per CPU core) processes share the shards; the result does not depend on it. A build becomes visible
    atomically: it is written to a temporary directory, completed by the `electra_build.json` record, then
    renamed into place. Skipped input is counted in that record (see `build_summary`). `say` (the drivers': their
    printer; else the log at INFO) is told whether the cache is reused or built.
    """
    say = say or log.info
    tokenizer_hash = tokenizer_fingerprint(tokenizer)
    fp = _fingerprint(source, tokenizer_hash, settings, seed)
    root = Path(cache_dir) / 'pretrain_data'
    final = root / fp
    if final.exists():
        ds, info, why = _load_verified(final, fp)
        if ds is not None:
            say(f"pretraining data: reusing the cache of {source.entry} in {final}, built before of its files, "
                "tokenizer and settings as they are now")
            warn_if_cut(info)
            warn_if_skipped(info)
            warn_if_unknown(ds, tokenizer, info['corpus'])
            return ds
        log.warning(f"pretraining data: the cache {final} is not usable ({why}); rebuilding it")
    say(f"pretraining data: building {source.entry}: no cache of its files, tokenizer and settings as they are now")
    _remove_dead_builds(root)
    tmp = root / f'.{fp}.{os.getpid()}.{socket.gethostname()}.tmp'
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        info = _build_into(tmp, source, tokenizer, settings, seed, num_proc or os.cpu_count() or 1, progress)
        info.update(fingerprint=fp, tokenizer_sha256=tokenizer_hash)
        (tmp / _MARKER).write_text(json.dumps(info, indent=1))
        # another process may have finished the same build meanwhile: keep theirs; else replace what was there
        # (an interrupted or damaged build, checked above)
        if not final.exists() or _load_verified(final, fp)[0] is None:
            shutil.rmtree(final, ignore_errors=True)
            try: os.replace(tmp, final)
            except OSError:  # ... or finished it just now
                if _load_verified(final, fp)[0] is None: raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info(f"pretraining data: {format_summary(info)} -> {final}")
    warn_if_cut(info)
    warn_if_skipped(info)
    ds = _load_verified(final, fp)[0]
    warn_if_unknown(ds, tokenizer, info['corpus'])
    return ds


def build_summary(dataset: datasets.Dataset) -> dict:
    "The build record (`electra_build.json`) of a dataset built by `build_corpus`: settings, counts, timing."
    directory = Path(dataset.cache_files[0]['filename']).parent
    return json.loads((directory / _MARKER).read_text())


def format_counts(counts: dict, skipped_files: dict) -> str:
    "What was read, what was skipped and what was cut off, in words."
    c = Counter(counts)
    said = [f"{c['documents']:,} documents", f"{c['sentences']:,} sentences", f"{c['tokens']:,} tokens"]
    skipped = [f'{n:,} {reason} file(s)' for reason, n in skipped_files.items() if n]
    skipped += skipped_in_words(c)
    return (', '.join(said) + '; skipped: ' + (', '.join(skipped) or 'nothing') +
            f"; cut off: {c['cut_tokens']:,} tokens ({share(c, 'cut_tokens'):.1%}) past what an example holds, "
            f"{c['overlong_tokens']:,} of them of sentences longer than an example")


def share(counts: dict, key: str) -> float:
    "The share of a build's tokens that `key` counts (`cut_tokens`, `overlong_tokens`: `ExampleBuilder`'s)."
    return counts.get(key, 0) / max(counts.get('tokens', 0), 1)


def warn_if_cut(info: dict) -> None:
    """One warning line when more than `CUT_WARN_SHARE` of a build's tokens are of sentences (as split) longer than an
    example holds, past its end: never trained on. The official packing cuts some text of any corpus, the part of an
    example's last sentence past `max_length` (about 3% of English prose at 128 tokens, 10% at 64): not warned of."""
    c = info['counts']
    if share(c, 'overlong_tokens') <= CUT_WARN_SHARE: return
    warnings.warn(f"corpus {info['corpus']}: {share(c, 'overlong_tokens'):.0%} of its tokens "
                  f"({c['overlong_tokens']:,} of {c['tokens']:,}) are of sentences longer than an example of max_length "
                  f"{info['max_length']} holds, cut off and never trained on. Give it one sentence a line, or the "
                  "sentence_split of its language, or a larger max_length.", RunWarning, stacklevel=3)


def warn_if_unknown(ds: datasets.Dataset, tokenizer, corpus: str) -> None:
    """One warning line when over `UNKNOWN_SHARE` of a built corpus's tokens ([CLS] and [SEP] aside) are [UNK]: text
    the vocabulary does not cover (a vocabulary of lower-case words read cased, another script), which the run never
    learns and whose held-out scores are of [UNK] among [UNK]. Counted over up to 2,000 examples, evenly spread."""
    unk = getattr(tokenizer, 'unk_token_id', None)
    if unk is None or not len(ds): return
    rows = range(0, len(ds), max(1, len(ds) // UNKNOWN_SAMPLE))[:UNKNOWN_SAMPLE]
    ids = np.concatenate([np.asarray(r, dtype=np.int64) for r in ds.select(rows)['input_ids']])
    words = ids[~np.isin(ids, [tokenizer.cls_token_id, tokenizer.sep_token_id])]
    if not len(words) or (part := float(np.mean(words == unk))) <= UNKNOWN_SHARE: return
    over = 'every example' if len(rows) == len(ds) else f'{len(rows):,} of its {len(ds):,} examples'
    warnings.warn(f"corpus {corpus}: {part:.1%} of its tokens are [UNK] (over {over}), text its tokenizer's vocabulary "
                  "does not cover, of which the run learns nothing. A vocab.txt of lower-case words needs lowercase: "
                  "true; else give a tokenizer of text like it, or leave tokenizer empty to train one.", RunWarning,
                  stacklevel=3)


def warn_if_skipped(info: dict) -> None:
    """One warning line when more than `CUT_WARN_SHARE` of a build's text (in characters) is in sentences over
    `max_sentence_chars`, skipped whole: a line of many sentences that `sentence_split` left as one (a paragraph a
    line read as one sentence a line) looks like one sentence skipped. A build of an earlier version counts no
    characters: nothing said."""
    c = info['counts']
    if not c.get('chars') or c.get('long_sentence_chars', 0) / c['chars'] <= CUT_WARN_SHARE: return
    warnings.warn(f"corpus {info['corpus']}: {c['long_sentence_chars'] / c['chars']:.0%} of its text "
                  f"({c['long_sentence_chars']:,} of {c['chars']:,} characters) is in {c['long_sentences']:,} "
                  f"sentence(s) over max_sentence_chars ({info['settings']['max_sentence_chars']:,}), skipped and never "
                  "trained on: a line of many sentences left whole? Give the sentence_split of its language (e.g. en), "
                  "or a larger max_sentence_chars.", RunWarning, stacklevel=3)


def drop_repeated_across(parts: list[datasets.Dataset]) -> tuple[list[datasets.Dataset], list[int]]:
    """The builds of several corpus entries (`build_corpus`, each de-duplicated alone), each without the examples of
    its documents whose text an earlier one holds; how many documents each lost. A view (an index of the rows kept,
    in memory): the cached builds stay as they are, each reusable alone."""
    seen, kept, counts = np.empty(0, HASH), [], []
    for part in parts:
        docs = np.load(Path(part.cache_files[0]['filename']).parent / DOCUMENTS)
        hashes = docs[['hi', 'lo']].astype(HASH)
        inverse = np.unique(np.concatenate([seen, hashes]), return_inverse=True)[1].ravel()
        repeated = np.isin(inverse[len(seen):], inverse[:len(seen)])
        counts.append(int(repeated.sum()))
        seen = np.concatenate([seen, hashes[~repeated]])
        if repeated.any():
            column = part.data.column('document').to_numpy()
            part = part.select(np.flatnonzero(~np.isin(column, docs['document'][repeated])), keep_in_memory=True)
        kept.append(part)
    return kept, counts


def format_duplicates(source: CorpusSource, info: dict, across: int = 0) -> str:
    """One line about the text read more than once and dropped (`BuildSettings.deduplicate`): files and documents,
    `across` of them found in an earlier corpus entry (`drop_repeated_across`)."""
    files = len(source.files) + sum(source.duplicates.values())
    said = f"corpus {source.entry}: " + (f"{files:,} file{'s' * (files != 1)}, " if source.kind == 'files' else '')
    if not info['settings'].get('deduplicate'): return said + 'duplicates kept (deduplicate: false)'
    dropped = sum(source.duplicates.values())
    repeated = info['counts'].get('repeated_documents', 0) + across
    return said + (f"{dropped:,} duplicate file{'s' * (dropped != 1)} and " if source.kind == 'files' else '') + \
        f"{repeated:,} repeated document{'s' * (repeated != 1)} dropped"


def format_summary(info: dict) -> str:
    "One line about a build: what it made, from what, how fast, and what it skipped."
    return (f"{info['n_examples']:,} examples of {info['corpus']} ({format_counts(info['counts'], info['skipped_files'])}) "
            f"in {info['seconds']:.1f}s, {info['examples_per_s']:,.0f} examples/s, {info['mb_per_s']:.2f} MB/s "
            f"with {info['num_proc']} process(es)")
