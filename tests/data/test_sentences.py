"""electra/data/sentences.py: the sentence splitter's language."""
import pytest

from electra.config.errors import ConfigError


def test_unknown_sentence_split_language_is_a_config_error(tmp_path):
    from electra.data.sentences import sentencizer
    with pytest.raises(ConfigError, match="sentence_split: spaCy has no language 'qq'"):
        sentencizer('qq')


# Chinese and Japanese paragraphs, one a line, and their sentences split by hand: at 。！？ (fullwidth or not, runs
# of them), the closing quotes and brackets after the mark kept with the sentence
CHINESE = [('北京是中国的首都。它有三千多年的历史！你去过北京吗？我去过两次。', ['北京是中国的首都。', '它有三千多年的历史！', '你去过北京吗？', '我去过两次。']),
           ('他说：“明天见。”然后就走了。天气真好!是吧?', ['他说：“明天见。”', '然后就走了。', '天气真好!', '是吧?']),
           ('这是最后一段，没有句号', ['这是最后一段，没有句号'])]
JAPANESE = [('東京は日本の首都です。人口は約千四百万人です！行ったことがありますか？', ['東京は日本の首都です。', '人口は約千四百万人です！', '行ったことがありますか？']),
            ('彼は「また明日。」と言った。本当に？！はい｡（笑）', ['彼は「また明日。」', 'と言った。', '本当に？！', 'はい｡', '（笑）']),
            ('カタカナのテキストもあります。ＡＢＣは全角です。', ['カタカナのテキストもあります。', 'ＡＢＣは全角です。'])]


@pytest.mark.parametrize('paragraphs', [CHINESE, JAPANESE], ids=['chinese', 'japanese'])
def test_text_without_spaces_is_split_at_its_sentence_final_punctuation_by_the_default_auto(paragraphs, demo, tmp_path):
    """A file of Chinese or Japanese paragraphs, one a line, under the default `sentence_split: auto`: each paragraph
    was one 'sentence' (spaCy's English rules split at spaces; these scripts have none). The build splits it into
    exactly the sentences of the hand split, and counts them; an explicit language is still spaCy's."""
    from electra.data.builder import read_batches
    from electra.data.cache import build_summary
    from electra.data.corpus import BuildSettings, resolve_corpus
    from electra.data.sentences import split_sentences
    from tests.support.corpora import build
    corpus = tmp_path / 'paragraphs.txt'
    corpus.write_text(''.join(text + '\n' for text, _ in paragraphs), encoding='utf-8')
    settings = BuildSettings(max_length=64)
    source = resolve_corpus([str(corpus)], tmp_path / 'entries', settings)[0]
    split = [x for lang, batch in read_batches(source, settings)
             for line in split_sentences([x for doc, _ in batch for x in doc], lang) for x in line]
    assert split == [x for _, sentences in paragraphs for x in sentences]
    counts = build_summary(build(corpus, demo[1], tmp_path / 'cache', settings))['counts']
    assert (counts['documents'], counts['sentences']) == (len(paragraphs), len(split))
    assert split_sentences([paragraphs[0][0]], 'en') == [[paragraphs[0][0]]]  # spaCy's English: one sentence


def test_a_line_is_written_without_spaces_when_half_its_characters_are_of_such_scripts():
    from electra.data.sentences import split_sentences, written_unspaced
    assert written_unspaced('東京は首都 Tokyo') and written_unspaced('สวัสดีครับ ผมชื่อสมชาย')  # 5 of 10, Thai
    assert not written_unspaced('東京は首都 Tokyo!') and not written_unspaced('The word 中国 means China.')
    lines = ['The word 中国 means China. It is a country.', '中国很大。人很多。']
    assert split_sentences(lines, 'auto') == [['The word 中国 means China.', 'It is a country.'], ['中国很大。', '人很多。']]


def test_an_english_corpus_builds_exactly_as_before(demo, tmp_path):
    """English text under `auto` goes through spaCy's English rules as before: the demo corpus (one sentence a line)
    and its documents as paragraphs (one a line, split by spaCy) give the examples they gave before lines written
    without spaces were told apart (their digests, from the build before the change)."""
    import hashlib
    import json
    from electra.data.cache import build_summary
    from electra.data.corpus import BuildSettings
    from tests.support.corpora import build
    corpus, tok = demo
    docs = corpus.read_text(encoding='utf-8').strip().split('\n\n')
    paragraphs = tmp_path / 'para.txt'
    paragraphs.write_text('\n'.join(' '.join(d.split('\n')) for d in docs[:80]) + '\n', encoding='utf-8')
    for entry, n, sentences, tokens, digest in [(corpus, 553, 2249, 30414, 'c803c4c8bae8d176'),
                                                (paragraphs, 153, 641, 8758, 'e42c00f35738bc09')]:
        ds = build(entry, tok, tmp_path / 'cache', BuildSettings(max_length=64))
        counts = build_summary(ds)['counts']
        assert (len(ds), counts['sentences'], counts['tokens']) == (n, sentences, tokens)
        assert hashlib.sha256(json.dumps(ds[:]['input_ids']).encode()).hexdigest()[:16] == digest
