"""electra/data/demo.py: the demo corpus."""
import re

from electra.data.demo import demo_corpus_text, write_demo_corpus


def test_demo_corpus_is_deterministic_and_written_once(tmp_path):
    path = write_demo_corpus(tmp_path / 'd' / 'demo.txt', n_docs=200, seed=3)
    text = path.read_text()
    docs = text.rstrip('\n').split('\n\n')
    assert len(docs) == 200 and all(3 <= len(d.split('\n')) <= 12 for d in docs)
    assert all(line and line[0].isupper() and line[-1] in '.?' for d in docs for line in d.split('\n'))
    mtime = path.stat().st_mtime_ns
    write_demo_corpus(path, n_docs=200, seed=3)
    assert path.stat().st_mtime_ns == mtime  # unchanged content: not rewritten (keeps the dataset cache valid)
    write_demo_corpus(path, n_docs=200, seed=4)
    assert path.read_text() != text and demo_corpus_text(200, 3) == text
    assert [p.name for p in path.parent.iterdir()] == ['demo.txt']  # no temporary file left behind
    full = demo_corpus_text()
    assert 200_000 < len(full.encode()) < 1_000_000
    # structure a small MLM can learn, e.g. number agreement and a/an
    there = re.findall(r'^There (is|are) (\w+) ', full, flags=re.M)
    assert len(there) > 500 and all((verb == 'is') == (n == 'one') for verb, n in there)
    assert len(re.findall(r'\ban [aeiou]', full)) > 50 and not re.search(r'\ba [aeiou]', full)
