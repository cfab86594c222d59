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
