"""Slices of the shared real corpora (../shared/data) and a build of one corpus entry."""
from pathlib import Path

import pytest

from electra.data.cache import build_corpus
from electra.data.corpus import BuildSettings, resolve_corpus

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / 'shared' / 'data' / 'corpus'
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason='../shared/data is absent')


def wiki_slice(path: Path, n_docs: int) -> Path:
    "The first `n_docs` documents of the shared wikipedia_leads.txt (one paragraph per line, blank line between)."
    docs = (SHARED / 'wikipedia_leads.txt').read_text(encoding='utf-8').split('\n\n')[:n_docs]
    path.write_text('\n\n'.join(docs) + '\n', encoding='utf-8')
    return path


def sotu_slice(directory: Path, n_files: int) -> Path:
    "A directory linking to every 10th of the first 10 * n_files State of the Union addresses (no copy)."
    directory.mkdir(parents=True)
    for f in sorted((SHARED / 'sotu').glob('*.txt'))[:10 * n_files:10]:
        (directory / f.name).symlink_to(f)
    return directory


def build(entry, tok, cache, settings=BuildSettings(), num_proc=1, seed=0):
    source = resolve_corpus([str(entry)], Path(cache), settings)[0]
    return build_corpus(source, tok, settings, Path(cache), seed, num_proc, progress=False)
