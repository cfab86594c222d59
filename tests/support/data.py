"""Helpers of the pretraining-data tests: corpus files, a build of a list of files, the layout of an example."""
import dataclasses
from pathlib import Path

import datasets

from electra.data.cache import build_corpus
from electra.data.corpus import BuildSettings, CorpusSource, corpus_text_files, resolve_corpus

CLS, SEP = 101, 102  # BERT's ids, to catch code that assumes a trained vocabulary's [CLS]=2, [SEP]=3


def corpus_files(paths: list[str], cache_dir: Path) -> list[Path]:
    "The text files that `resolve_corpus` finds for `paths`."
    return corpus_text_files(resolve_corpus(paths, cache_dir))


def build_pretraining_dataset(files: list[Path], tokenizer, max_length: int, cache_dir: Path, seed: int,
                              num_proc: int = 1, settings: BuildSettings | None = None,
                              progress: bool = False) -> datasets.Dataset:
    """`build_corpus` for a list of text files read as one corpus, with `settings` (default: `corpus_format`
    and `sentence_split` 'auto', so files in the official layout read as before)."""
    files = [Path(f) for f in files]
    source = CorpusSource(', '.join(map(str, files)), 'files', files)
    settings = dataclasses.replace(settings or BuildSettings(), max_length=max_length)
    return build_corpus(source, tokenizer, settings, cache_dir, seed, num_proc, progress)


def check_layout(ids, types, max_length, cls=CLS, sep=SEP):
    "[CLS] A [SEP] (B [SEP]), types 0 for [CLS] A [SEP] and 1 for B [SEP], no special token inside A or B."
    assert len(ids) == len(types) <= max_length
    assert ids[0] == cls and ids[-1] == sep
    n0 = types.count(0)
    assert types == [0] * n0 + [1] * (len(types) - n0)
    assert ids[n0 - 1] == sep and n0 >= 2
    inner = ids[1:n0 - 1] + ids[n0:-1]
    assert cls not in inner and sep not in inner
    assert len(types) - n0 != 1  # B is never an empty segment followed by its [SEP]
