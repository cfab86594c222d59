"""benchmarks/data_bench.py: the build's parts alone, beside the build, in one run."""
import json

from benchmarks import data_bench
from electra.data.demo import write_demo_corpus
from electra.data.tokenizer import train_tokenizer


def test_the_parts_alone_do_the_builds_work_and_are_set_beside_it(tmp_path, capsys):
    """The parts (reading, sentencizer, tokenizer) yield the build's sentences and tokens; the printed line sets the
    one-process build's seconds beside the parts' sum, their ratio that of the JSON's figures."""
    corpus = write_demo_corpus(tmp_path / 'demo.txt', n_docs=60)
    train_tokenizer([corpus], 500, True, tmp_path / 'tokenizer')
    out = tmp_path / 'bench.json'
    assert data_bench.main(['--corpus', str(corpus), '--num_proc', '1', '--tokenizer', str(tmp_path / 'tokenizer'),
                            '--sentence_split', 'en', '--max_length', '64', '--cores', '2', '--json', str(out)]) == 0
    record = json.loads(out.read_text())
    (row,), (part,) = record['rows'], record['parts']
    assert (part['sentences'], part['tokens']) == (row['sentences'], row['tokens']) and row['sentences'] > 60
    wall = part['read_s'] + part['sentencizer_s'] + part['tokenizer_s']
    cpu = part['read_cpu_s'] + part['sentencizer_cpu_s'] + part['tokenizer_cpu_s']
    line = capsys.readouterr().out.splitlines()[-1].split()
    assert line[0] == 'demo.txt' and line[-2:] == [f"{row['seconds'] / wall:.2f}", f"({row['cpu_seconds'] / cpu:.2f})"]


def test_the_breakdown_times_the_builds_own_calls_beside_the_parts(tmp_path, capsys):
    """--breakdown: per round, the one-process build's CPU-seconds in its sentencizer and tokenizer calls and in the
    rest, beside the parts alone; the timers are taken off the builder after, and the printed medians are the JSON's."""
    import statistics

    from electra.data import builder
    from electra.data.sentences import split_sentences
    corpus = write_demo_corpus(tmp_path / 'demo.txt', n_docs=60)
    train_tokenizer([corpus], 500, True, tmp_path / 'tokenizer')
    out = tmp_path / 'bench.json'
    assert data_bench.main(['--corpus', str(corpus), '--num_proc', '1', '--tokenizer', str(tmp_path / 'tokenizer'),
                            '--sentence_split', 'en', '--max_length', '64', '--cores', '2', '--parts', '0',
                            '--breakdown', '3', '--json', str(out)]) == 0
    assert builder.split_sentences is split_sentences and builder.encoding_backend is data_bench.encoding_backend
    record = json.loads(out.read_text())
    (row,), rounds = record['rows'], record['breakdown']
    assert [r['round'] for r in rounds] == [0, 1, 2]
    for r in rounds:
        assert (r['parts']['sentences'], r['parts']['tokens']) == (row['sentences'], row['tokens'])
        assert r['sentencizer_cpu_s'] > 0 and r['tokenizer_cpu_s'] > 0 and r['rest_cpu_s'] > 0
        assert r['sentencizer_cpu_s'] + r['tokenizer_cpu_s'] < r['cpu_s']
    ratios = [r['cpu_s'] / sum(r['parts'][k] for k in ('sentencizer_cpu_s', 'tokenizer_cpu_s', 'read_cpu_s'))
              for r in rounds]
    median = capsys.readouterr().out.splitlines()[-1].split()
    assert median[:2] == ['demo.txt', 'median'] and median[-1] == f'{statistics.median(ratios):.2f}'
    assert median[2] == f"{statistics.median(r['cpu_s'] for r in rounds):.2f}"
