"""electra/data/examples.py: the official example builder, by hand, by its rates, on real corpora."""
import random
from pathlib import Path

import pytest

from electra.data.examples import ExampleBuilder
from electra.data.tokenizer import train_tokenizer
from tests.support.data import CLS, SEP, check_layout

WIKI = Path(__file__).resolve().parents[2].parent / 'shared' / 'data' / 'corpus' / 'wikipedia_leads.txt'


def read_documents(path: Path, max_chars: int = 10**9) -> list[list[str]]:
    "Documents (lists of stripped non-blank lines) of a corpus file, up to about `max_chars` characters."
    docs, doc, chars = [], [], 0
    with open(path, encoding='utf-8') as f:
        for line in f:
            line = line.strip()
            chars += len(line)
            if line: doc.append(line)
            elif doc:
                docs.append(doc)
                doc = []
                if chars > max_chars: break
    return docs + [doc] if doc else docs


def build_by_document(docs: list[list[list[int]]], max_length: int, seed: int, stride: int):
    """Run the builder over tokenized documents, shifting document d's ids by (d + 1) * stride so every
    example says which documents its tokens came from."""
    builder = ExampleBuilder(max_length, CLS, SEP, random.Random(seed))
    examples = []
    for d, doc in enumerate(docs):
        for sentence in doc:
            examples.append(builder.add_sentence([t + (d + 1) * stride for t in sentence]))
        examples.append(builder.end_document())
    return [e for e in examples if e]


class ScriptedRNG:
    "Returns prescribed draws and fails on any draw that was not prescribed."

    def __init__(self, randoms, randints):
        self.randoms, self.randints, self.randint_args = list(randoms), list(randints), []

    def random(self):
        return self.randoms.pop(0)

    def randint(self, a, b):
        self.randint_args.append((a, b))
        return self.randints.pop(0)


def test_builder_hand_worked_case():
    lengths = {1: 3, 2: 4, 3: 5, 4: 6, 5: 2, 6: 8, 7: 2, 8: 4}
    s = {n: list(range(10 * n, 10 * n + k)) for n, k in lengths.items()}  # sentence n: ids 10n, 10n + 1, ...
    rng = ScriptedRNG(randoms=[0.5, 0.3, 0.01,  # example 1: two segments; coin puts s2 in A; short next target
                               0.05, 0.9,  # example 2: the 10% single segment; next target max_length
                               0.5, 0.6, 0.5],  # example 3: coin sends s8 to B
                      randints=[9])
    b = ExampleBuilder(16, CLS, SEP, rng)
    # example 1: target 16, A target (16 - 3) // 2 = 6. s1 -> A (A empty); s2: 3 + 4 >= 6 but B empty and 3 < 6:
    # coin 0.3 < 0.5 -> A; s3: A (7) is at target -> B, no coin; s4 -> B. B trimmed to 16 - 7 - 3 = 6 tokens.
    assert [b.add_sentence(s[n]) for n in (1, 2, 3)] == [None] * 3
    ids, types = b.add_sentence(s[4])
    assert ids == [CLS] + s[1] + s[2] + [SEP] + (s[3] + s[4])[:6] + [SEP]
    assert types == [0] * 9 + [1] * 7
    assert b.target_length == 9 and rng.randint_args == [(5, 16)]
    # example 2: target 9 reached by 2 + 8 tokens; single segment, so both sentences go to A
    assert b.add_sentence(s[5]) is None
    assert b.add_sentence(s[6]) == ([CLS] + s[5] + s[6] + [SEP], [0] * 12)
    assert b.target_length == 16
    # example 3: the document ends early; A target 6: s7 -> A; s8: 2 + 4 is not < 6, so coin: 0.6 -> B
    assert b.add_sentence(s[7]) is None and b.add_sentence(s[8]) is None
    assert b.end_document() == ([CLS] + s[7] + [SEP] + s[8] + [SEP], [0] * 4 + [1] * 5)
    assert b.end_document() is None  # a second blank line: nothing pending, no draw
    assert rng.randoms == [] and rng.randints == []  # exactly the official draws, in order


def test_builder_single_segment_rate_is_10_percent():
    # 31-token sentences, max_length 64: with A target (64 - 3) // 2 = 30 the first sentence fills A and the
    # rest goes to B with no coin flip, so a full-length example is single-segment only by the 10% draw
    b = ExampleBuilder(64, CLS, SEP, random.Random(0))
    examples = [e for e in (b.add_sentence(list(range(200, 231))) for _ in range(60_000)) if e]
    full = [types for ids, types in examples if len(ids) == 64]
    single = sum(1 not in types for types in full) / len(full)
    assert len(full) > 15_000 and 0.085 < single < 0.115


def test_builder_short_target_rate_is_5_percent():
    # one-token sentences: an example's content is exactly its target length (when that leaves room for
    # [CLS] and two [SEP]), so the targets can be checked against the examples they produce
    b = ExampleBuilder(64, CLS, SEP, random.Random(1))
    targets, short = [b.target_length], 0
    for i in range(400_000):
        example = b.add_sentence([1000 + i % 7])
        if example:
            content = len(example[0]) - 2 - (1 in example[1])
            assert content == targets[-1] or targets[-1] > 61
            targets.append(b.target_length)
            short += targets[-1] < 64
    assert all(5 <= t <= 64 for t in targets)
    assert 0.038 < short / (len(targets) - 1) < 0.06  # 0.05 * 59/60, as randint(5, 64) may also give 64
    assert len(set(targets)) > 50  # the short targets are spread over [5, 64]


def _corpus_examples(path: Path, tok, max_chars: int, max_length: int):
    docs = [[tok(line, add_special_tokens=False)['input_ids'] for line in doc]
            for doc in read_documents(path, max_chars)]
    return docs, build_by_document(docs, max_length, seed=0, stride=len(tok))


@pytest.mark.parametrize('source', ['demo', 'wikipedia'])
def test_builder_properties_on_real_corpus(source, demo, tmp_path):
    if source == 'wikipedia':
        if not WIKI.is_file(): pytest.skip(f'{WIKI} not present')
        slice_ = tmp_path / 'wiki.txt'
        slice_.write_text('\n\n'.join('\n'.join(d) for d in read_documents(WIKI, 400_000)) + '\n')
        path, tok = slice_, train_tokenizer([slice_], 2000, True, tmp_path / 'tok')
    else:
        path, tok = demo
    max_length = 64
    docs, examples = _corpus_examples(path, tok, 400_000, max_length)
    assert len(examples) > 300
    seen = []
    for ids, types in examples:
        check_layout(ids, types, max_length)
        doc_of = {t // len(tok) - 1 for t in ids if t not in (CLS, SEP)}
        assert len(doc_of) == 1  # never crosses a document
        seen.append(doc_of.pop())
    assert seen == sorted(seen) and set(seen) == {d for d, doc in enumerate(docs) if any(doc)}
    assert sum(len(ids) == max_length for ids, _ in examples) > len(examples) / 4
    if source == 'demo':  # short sentences: most examples have two segments (wikipedia lines are paragraphs)
        assert 0.5 < sum(1 in types for _, types in examples) / len(examples) < 0.95


WIKI_LEADS = Path(__file__).resolve().parents[3] / 'shared' / 'data' / 'corpus' / 'wikipedia_leads.txt'


@pytest.mark.skipif(not WIKI_LEADS.exists(), reason='../shared/data is absent')
def test_single_segment_draw_on_real_text(monkeypatch):
    """The official 10% single-segment draw, watched on real text: the first draw of every example is peeked (and put
    back, so the builder is unchanged). Every example whose draw is under 0.1 has no segment B, and about 10% do."""
    original = ExampleBuilder._create_example
    fired = []

    def watched(self):
        state = self.rng.getstate()
        draw = self.rng.random()
        self.rng.setstate(state)
        example = original(self)
        fired.append((draw < 0.1, sum(example[1]) == 0))       # (draw fired, no segment B)
        return example
    monkeypatch.setattr(ExampleBuilder, '_create_example', watched)
    vocab: dict[str, int] = {}
    builder = ExampleBuilder(128, 101, 102, random.Random(0))
    for line in WIKI_LEADS.read_text(encoding='utf-8').splitlines():
        if not line.strip():
            builder.end_document()
            continue
        builder.add_sentence([vocab.setdefault(w, 1000 + len(vocab)) for w in line.split()])
    n = len(fired)
    share = sum(f for f, _ in fired) / n
    assert n > 5000 and abs(share - 0.1) < 4 * (0.09 / n) ** 0.5
    assert all(single for f, single in fired if f)
    # without the draw, single-segment examples are rarer: a builder that skipped it would fail the next line
    assert sum(single for _, single in fired) / n >= share
