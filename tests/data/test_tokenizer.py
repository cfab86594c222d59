"""electra/data/tokenizer.py: training, loading a vocab.txt or a saved directory, checkpoint state."""
import json
import logging
import warnings

import pytest
from transformers import AutoTokenizer, ElectraConfig, ElectraTokenizerFast

from electra.config.errors import ConfigError, RunWarning
from electra.data.demo import write_demo_corpus
from electra.data.tokenizer import (
    SPECIAL_TOKENS,
    SavedTokenizer,
    get_tokenizer,
    load_tokenizer,
    tokenizer_difference,
    tokenizer_fingerprint,
    tokenizer_from_state,
    tokenizer_identity,
    tokenizer_state,
    train_tokenizer,
)
from electra.pretrained.export import load_saved
from tests.support.config import refused
from tests.support.tokenizers import reordered

SENTENCES = ["The muddy cows fed Alba's tractor near the pond.", 'Does Quilla like a stormy harbor?',
             'In 1909 they planned a sharp kettle.', 'Zebras x-ray 42 quixotic naïve façades!']


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
    return write_demo_corpus(tmp_path_factory.mktemp('corpus') / 'demo.txt', n_docs=400)


@pytest.fixture(scope='module')
def trained(corpus, tmp_path_factory):
    save_dir = tmp_path_factory.mktemp('tok') / 'tokenizer'
    return train_tokenizer([corpus], 600, True, save_dir), save_dir


def bert_style_vocab(path, words):
    "A vocab.txt laid out like BERT's: [PAD]=0, [unused*], [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103."
    lines = ['[PAD]'] + [f'[unused{i}]' for i in range(99)] + ['[UNK]', '[CLS]', '[SEP]', '[MASK]'] + words
    path.write_text('\n'.join(lines) + '\n', encoding='utf-8')
    return path


def test_trained_tokenizer_reloads_with_same_ids(trained):
    tok, save_dir = trained
    assert len(tok) == 600
    assert [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    assert (tok.pad_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id) == (0, 2, 3, 4)
    assert tok.tokenize('The COWS') == tok.tokenize('the cows') and tok.tokenize('The')[0] == 'the'  # uncased
    for reloaded in (AutoTokenizer.from_pretrained(save_dir), ElectraTokenizerFast.from_pretrained(save_dir),
                     load_tokenizer(str(save_dir))):
        for s in SENTENCES:
            assert reloaded(s)['input_ids'] == tok(s)['input_ids']
        assert reloaded('a cow', 'the barn')['token_type_ids'] == tok('a cow', 'the barn')['token_type_ids']


def test_training_is_deterministic(corpus, trained, tmp_path):
    # the plain `tokenizers` trainer gives a different vocabulary on most runs of this corpus
    again = train_tokenizer([corpus], 600, True, tmp_path / 'again')
    assert again.get_vocab() == trained[0].get_vocab()
    assert (tmp_path / 'again' / 'tokenizer.json').read_text() == (trained[1] / 'tokenizer.json').read_text()


def test_cased_training_keeps_case(corpus, tmp_path):
    tok = train_tokenizer([corpus], 600, False, tmp_path / 'cased')
    assert 'The' in tok.get_vocab() and 'the' in tok.get_vocab()
    assert tok('The')['input_ids'] != tok('the')['input_ids']


def test_load_bert_style_vocab_txt(tmp_path):
    vocab = bert_style_vocab(tmp_path / 'my_vocab.txt', ['the', 'cat', 'sat', 'on', 'mat', '##s', '.'])
    tok = load_tokenizer(str(vocab))
    assert (tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id) == \
        (0, 100, 101, 102, 103)
    assert tok('The cats sat on the mat.')['input_ids'] == [101, 104, 105, 109, 106, 107, 104, 108, 110, 102]
    # lowercase false on a vocabulary without an upper-case entry made every capitalised word [UNK]: now refused
    with pytest.raises(ConfigError, match=rf"^tokenizer {vocab}: no entry of the vocabulary is upper case \(an uncased "
                                          r"vocabulary\), but lowercase is false: a word with a capital letter would "
                                          r"be \[UNK\]\. For an uncased vocabulary give --lowercase true\.$"):
        load_tokenizer(str(vocab), lowercase=False)


def test_load_errors_name_the_path(tmp_path):
    missing = tmp_path / 'nope' / 'vocab.txt'
    with pytest.raises(ConfigError, match=str(missing)):
        load_tokenizer(str(missing))
    no_mask = tmp_path / 'vocab.txt'
    no_mask.write_text('[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n')
    with pytest.raises(ConfigError, match=r'(?s)vocab\.txt.*\[MASK\]'):
        load_tokenizer(str(no_mask))
    packed = tmp_path / 'vocab.txt.gz'
    packed.write_bytes(__import__('gzip').compress(b'[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n'))
    with pytest.raises(ConfigError, match=rf"tokenizer {packed} is gzip-compressed.*`gzip -dc {packed} > "):
        load_tokenizer(str(packed))
    not_a_tokenizer = tmp_path / 'empty_dir'
    not_a_tokenizer.mkdir()
    with pytest.raises(ConfigError, match=str(not_a_tokenizer)):
        load_tokenizer(str(not_a_tokenizer))
    corrupt = tmp_path / 'corrupt'
    corrupt.mkdir()
    (corrupt / 'tokenizer.json').write_text('{"version": "1.0", "model": 5}')
    (corrupt / 'tokenizer_config.json').write_text('{"tokenizer_class": "BertTokenizer"}')
    with pytest.raises(ConfigError, match=str(corrupt)):
        load_tokenizer(str(corrupt))


@pytest.mark.parametrize('kind', ['trained', 'vocab_txt'])
def test_state_round_trip(kind, trained, tmp_path):
    tok = trained[0] if kind == 'trained' else load_tokenizer(
        str(bert_style_vocab(tmp_path / 'vocab.txt', ['the', 'cow', 'fed', 'a', '##s', '.'])))
    state = tokenizer_state(tok)
    assert state and all(isinstance(k, str) and isinstance(v, str) for k, v in state.items())
    state = json.loads(json.dumps(state))  # what a checkpoint stores survives serialisation
    restored = tokenizer_from_state(state)
    assert restored.get_vocab() == tok.get_vocab()
    for s in SENTENCES:
        assert restored(s)['input_ids'] == tok(s)['input_ids']
    assert (restored.cls_token_id, restored.sep_token_id, restored.mask_token_id, restored.pad_token_id) == \
        (tok.cls_token_id, tok.sep_token_id, tok.mask_token_id, tok.pad_token_id)


def test_get_tokenizer_trains_once_then_reuses(corpus, tmp_path, caplog):
    tok = get_tokenizer('', [corpus], 500, True, tmp_path)
    saved = tmp_path / 'tokenizer' / 'tokenizer.json'
    mtime = saved.stat().st_mtime_ns
    assert len(tok) == 500 and not list(tmp_path.glob('.*tmp'))
    again = get_tokenizer('', [corpus], 500, True, tmp_path)
    assert saved.stat().st_mtime_ns == mtime and again.get_vocab() == tok.get_vocab()
    with caplog.at_level(logging.WARNING, logger='electra.data.tokenizer'):
        other = get_tokenizer('', [corpus], 700, True, tmp_path)  # the run's tokenizer stays, with a warning
    assert other.get_vocab() == tok.get_vocab() and 'other settings' in caplog.text
    # R23a-5: the line gave the settings of now as if they were the tokenizer's; it says what differs, then and now
    extra = corpus.with_name('extra.txt')
    extra.write_text('a cow in the barn\n')
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger='electra.data.tokenizer'):
        get_tokenizer('', [corpus, extra], 700, True, tmp_path)
    assert caplog.messages == [f"reusing the tokenizer in {tmp_path / 'tokenizer'}, trained with other settings than "
                               f"now (files: {extra.resolve()} added since; vocab_size: 500 then, 700 now); delete that "
                               "directory to train a new one."]
    given = get_tokenizer(str(bert_style_vocab(tmp_path / 'v.txt', ['the'])), [corpus], 500, True, tmp_path / 'x')
    assert given.cls_token_id == 101 and not (tmp_path / 'x' / 'tokenizer').exists()


def test_directory_without_tokenizer_files_named(tmp_path):
    (tmp_path / 'config.json').write_text('{}')
    with pytest.raises(ConfigError, match=r"holds no tokenizer files: neither tokenizer.json nor vocab.txt \(it holds: "
                                          r"config.json\)\. Give a directory written by save_pretrained"):
        load_tokenizer(str(tmp_path))


# Pairs of words that differ only by a combining mark: a Japanese voicing mark (dakuten, handakuten), Devanagari vowel
# signs and virama, Arabic hamza and a vowel point, a Thai vowel, Hebrew points. BERT's uncased normalizer strips
# every combining mark as an accent (google-research/bert tokenization.py `_run_strip_accents`: NFD, then category Mn
# dropped), which merges each pair.
MARKED = [('かがみ', 'かかみ'), ('ガード', 'カード'), ('ぱん', 'はん'), ('कुत्ता', 'कत्ता'), ('है', 'ह'),
          ('أكل', 'اكل'), ('إلى', 'الى'), ('مَدرسة', 'مدرسة'), ('กิน', 'กน'), ('שָׁלוֹם', 'שלום')]


def test_a_tokenizer_trained_on_other_scripts_keeps_what_they_distinguish(tmp_path):
    words = [w for pair in MARKED for w in pair] + ['café', 'cafe', '한국어', '中文', 'the', 'cat']
    corpus = tmp_path / 'scripts.txt'
    corpus.write_text(''.join(' '.join(words) + ' .\n' for _ in range(20)), encoding='utf-8')
    tok = train_tokenizer([corpus], 300, True, tmp_path / 'tok')
    for loaded in (tok, AutoTokenizer.from_pretrained(tmp_path / 'tok'), tokenizer_from_state(tokenizer_state(tok))):
        for a, b in MARKED:
            assert loaded.tokenize(a) != loaded.tokenize(b), (a, b)
        for w in words:  # each comes back as it was written, no [UNK] (CJK ideographs decode one space apart)
            assert loaded.decode(loaded.encode(w, add_special_tokens=False)).replace(' ', '') == w
        assert loaded.tokenize('Café') == loaded.tokenize('café')  # still uncased: only the case is folded
        assert loaded.tokenize('中文') == ['中', '文']  # CJK ideographs one token each, as BERT's


def test_strip_accents_gives_bert_s_uncased_rule_and_survives_the_auto_classes(tmp_path):
    """`strip_accents: true` is the official rule (google-research/bert tokenization.py `_run_strip_accents`: lowercase,
    NFD, category Mn dropped), written out here with unicodedata; the default keeps the marks."""
    import unicodedata
    def bert(text): return ''.join(c for c in unicodedata.normalize('NFD', text.lower()) if unicodedata.category(c) != 'Mn')
    corpus = tmp_path / 'en.txt'
    corpus.write_text(' '.join(SENTENCES + ['café', 'naïve', 'résumé']) * 30, encoding='utf-8')
    words = ('Café', 'naïve', 'Résumé', 'कुत्ता')
    tok = train_tokenizer([corpus], 300, True, tmp_path / 'tok', strip_accents=True)
    for loaded in (tok, AutoTokenizer.from_pretrained(tmp_path / 'tok')):
        assert [loaded.backend_tokenizer.normalizer.normalize_str(w) for w in words] == [bert(w) for w in words]
        assert loaded.tokenize('café') == loaded.tokenize('cafe')
    kept = train_tokenizer([corpus], 300, True, tmp_path / 'kept')
    assert [kept.backend_tokenizer.normalizer.normalize_str(w) for w in words] == [w.lower() for w in words]


def test_a_script_of_thousands_of_characters_keeps_its_rarer_ones(tmp_path):
    """The `tokenizers` trainer keeps the 1000 most frequent characters and makes the rest [UNK]: the kanji of a
    Japanese corpus beyond them were lost. Characters are kept while they are needed to cover all but a ten-thousandth
    of the text, up to a quarter of the vocabulary; an ideograph, always a token of its own, gets no '##' entry."""
    kanji = [chr(0x4E00 + 7 * i) for i in range(1500)]
    corpus = tmp_path / 'ja.txt'
    rare = ''.join(' '.join(kanji[j:j + 20]) + '\n' for j in range(0, 1500, 20)) * 3  # each seen 3 times
    corpus.write_text('日本 の 文章 を 読む 。\n' * 300 + rare, encoding='utf-8')
    tok = train_tokenizer([corpus], 8000, True, tmp_path / 'tok')
    assert tok.unk_token not in tok.tokenize(''.join(kanji))
    assert not any(w.startswith('##') and '\u4e00' <= w[2:] <= '\u9fff' for w in tok.get_vocab())
    english = tmp_path / 'en.txt'
    english.write_text(' '.join(SENTENCES) * 30)
    assert '##s' in train_tokenizer([english], 300, True, tmp_path / 'en').get_vocab()  # other scripts keep theirs


def test_a_cased_vocabulary_read_lower_cased_is_refused_naming_the_key_and_a_folder_follows_its_own_setting(tmp_path):
    """R1-4: a vocab.txt with upper-case entries was read with lowercase on by default: 'Paris' and 'The' unreachable,
    silently. A vocab.txt follows `lowercase` (it has no setting of its own) and is refused where the two disagree; a
    save_pretrained folder follows its own saved do_lower_case, refused where its entries contradict it."""
    vocab = bert_style_vocab(tmp_path / 'cased.txt', ['The', 'the', 'Paris', 'went', '##s', '.', 'I'])
    with pytest.raises(ConfigError, match=rf"^tokenizer {vocab}: the vocabulary holds 3 upper-case entries \('The', "
                                          r"'Paris', 'I'\), which no input reaches while lowercase is true \(the text is "
                                          r"lower-cased first\)\. For a cased vocabulary give --lowercase false\.$"):
        load_tokenizer(str(vocab))
    cased = load_tokenizer(str(vocab), lowercase=False)
    assert cased('The Paris')['input_ids'] == [101, 104, 106, 102] and cased('the')['input_ids'] == [101, 105, 102]
    cased.save_pretrained(tmp_path / 'folder')
    assert load_tokenizer(str(tmp_path / 'folder'))('The')['input_ids'] == [101, 104, 102]  # its own setting: cased
    config = tmp_path / 'folder' / 'tokenizer_config.json'
    config.write_text(json.dumps({**json.loads(config.read_text()), 'do_lower_case': True}))
    with pytest.raises(ConfigError, match=rf"^tokenizer {tmp_path / 'folder'}: the vocabulary holds 3 upper-case "
                                          r"entries \('The', 'Paris', 'I'\), which no input reaches while its "
                                          r"tokenizer_config\.json lower-cases the text \(do_lower_case: true\)\. For a "
                                          r"cased vocabulary set do_lower_case to false there\.$"):
        load_tokenizer(str(tmp_path / 'folder'))


def test_a_vocab_txt_with_a_repeated_line_is_refused_naming_its_lines_and_token(tmp_path):
    """A vocab.txt gives line i the id i (the official tokenization.py `load_vocab`); transformers keeps a repeated
    token's last line, so the first line's id has no token while the last line's id lies past a table sized to the
    vocabulary (a model that crashes on that token): refused, as the converter refuses it, for a file and a folder."""
    vocab = bert_style_vocab(tmp_path / 'vocab.txt', ['the', 'cat', 'the', 'sat'])
    theirs = ElectraTokenizerFast.from_pretrained(tmp_path)  # transformers' own reading: 108 lines, 107 tokens
    assert theirs.convert_tokens_to_ids('the') == 106 and len(theirs) == 107
    assert theirs.convert_tokens_to_ids('sat') == 107  # past a table of 107 rows
    message = refused(lambda: load_tokenizer(str(vocab)), f'tokenizer {vocab}: ', "line 107 repeats the token 'the' "
                      "of line 105: each line is one id, so id 104 would have no token")
    assert message.endswith('Remove the repeated line, or give the vocab.txt the model was trained with.')
    refused(lambda: load_tokenizer(str(tmp_path)), f'tokenizer {vocab}: line 107 repeats the token')  # a folder of it


@pytest.mark.parametrize('written', ['the ', 'the\t', 'the\u3000'])
def test_a_vocab_line_that_repeats_another_once_transformers_drops_its_trailing_spaces_is_refused(tmp_path, written):
    """R23a-2: 'the ' and 'the' passed the repeat check (it compared the lines as written), transformers read both as
    'the' (it drops a line's trailing whitespace), and the run died in its first step with an IndexError in
    F.embedding. The lines are compared as transformers reads them; a folder of the file alike."""
    vocab = bert_style_vocab(tmp_path / 'vocab.txt', [written, 'cat', 'the', 'sat'])
    theirs = ElectraTokenizerFast.from_pretrained(tmp_path)  # transformers' own reading: 108 lines, 107 tokens
    assert len(theirs) == 107 and written not in theirs.get_vocab()
    message = refused(lambda: load_tokenizer(str(vocab)), f'tokenizer {vocab}: ',
                      f"line 107 repeats the token 'the' of line 105 (written {written!r}: transformers drops a line's "
                      "trailing spaces): each line is one id, so id 104 would have no token")
    assert message.endswith('Remove the repeated line, or give the vocab.txt the model was trained with.')
    refused(lambda: load_tokenizer(str(tmp_path)), f'tokenizer {vocab}: line 107 repeats the token')  # a folder of it


def test_a_tokenizer_of_only_its_special_tokens_is_refused(tmp_path):
    """R23a-3: a folder whose vocabulary held only [PAD] [UNK] [CLS] [SEP] [MASK] (what transformers 5 saves of a
    BertTokenizerFast given `vocab_file=`) was taken: every word [UNK], and the held-out line said AUC 0.995."""
    specials = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
    ElectraTokenizerFast(vocab={t: i for i, t in enumerate(specials)}).save_pretrained(tmp_path / 'folder')
    (tmp_path / 'vocab.txt').write_text('\n'.join(specials) + '\n', encoding='utf-8')
    for given in (tmp_path / 'folder', tmp_path / 'vocab.txt'):
        refused(lambda: load_tokenizer(str(given)), f'tokenizer {given}: its vocabulary holds its 5 special tokens '
                f'alone ([PAD], [UNK], [CLS], [SEP], [MASK]): every word would be [UNK]. Give a vocabulary of words, '
                'or leave `tokenizer` empty to train one.')


def test_a_vocab_txt_saved_with_a_byte_order_mark_reads_as_without_it(tmp_path):
    """Windows editors save UTF-8 with a byte-order mark: transformers read it into the first entry ('\\ufeffthe'
    never produced; a '\\ufeff[PAD]' made the vocabulary lack [PAD]). A vocab.txt is read as UTF-8 with the mark
    dropped; a folder holding only a vocab.txt (transformers reads it as it is) with one is refused naming it."""
    words = ['the', 'cat', 'sat', '##s']
    plain = bert_style_vocab(tmp_path / 'plain.txt', words)
    marked = tmp_path / 'marked.txt'
    marked.write_text(plain.read_text(encoding='utf-8'), encoding='utf-8-sig')
    assert load_tokenizer(str(marked)).get_vocab() == load_tokenizer(str(plain)).get_vocab()
    first = tmp_path / 'first.txt'  # the mark before an ordinary entry
    lines = plain.read_text(encoding='utf-8').splitlines()
    first.write_text('\n'.join(['the'] + [t for t in lines if t != 'the']) + '\n', encoding='utf-8-sig')
    tok = load_tokenizer(str(first))
    assert tok.convert_ids_to_tokens(0) == 'the' and tok.tokenize('the cats') == ['the', 'cat', '##s']
    (tmp_path / 'folder').mkdir()
    marked.rename(tmp_path / 'folder' / 'vocab.txt')
    refused(lambda: load_tokenizer(str(tmp_path / 'folder')), f"tokenizer {tmp_path / 'folder' / 'vocab.txt'}: it "
            "starts with a byte-order mark (U+FEFF), which transformers reads as part of its first token "
            "('\\ufeff[PAD]'): save it as UTF-8 without a byte-order mark.")
    ElectraConfig().save_pretrained(tmp_path / 'folder')  # as a model folder (fine-tuning's --model, --init_from)
    refused(lambda: load_saved(str(tmp_path / 'folder'), 'model', 'a folder', (SavedTokenizer, 'tokenizer of')),
            f"model: tokenizer {tmp_path / 'folder' / 'vocab.txt'}: it starts with a byte-order mark")


def official_wordpiece(word: str, vocab, unk: str = '[UNK]', max_chars: int = 200) -> list[str]:
    """The official greedy longest-match-first WordPiece (google-research/electra model/tokenization.py
    `WordpieceTokenizer`): a word past `max_chars` characters, or one with a part no entry matches, is one [UNK]."""
    if len(word) > max_chars: return [unk]
    out, start = [], 0
    while start < len(word):
        end = len(word)
        while start < end and ('##' * (start > 0) + word[start:end]) not in vocab: end -= 1
        if start == end: return [unk]
        out.append('##' * (start > 0) + word[start:end])
        start = end
    return out


def test_wordpiece_reads_words_of_up_to_200_characters_as_the_official_tokenizer(tmp_path):
    """The official WordpieceTokenizer makes a word [UNK] only past 200 characters (`max_input_chars_per_word=200`);
    `tokenizers` and transformers build WordPiece with 100, which made a 101-character run without a space (unspaced
    Thai, a URL) one [UNK]. Every tokenizer the library builds reads 200, and its fingerprint (the key of the data
    caches) is not a tokenizer's of 100."""
    words = ['ab' * 50 + 'a', 'x' * 200, 'x' * 201, 'ab' * 100, 'ab' * 100 + 'x']
    vocab = bert_style_vocab(tmp_path / 'vocab.txt', ['ab', '##ab', 'x', '##x', '##a'])
    tok = load_tokenizer(str(vocab))
    tok.save_pretrained(tmp_path / 'folder')
    corpus = tmp_path / 'th.txt'
    corpus.write_text(' '.join(['กินข้าว' * 20] * 10 + ['the cat'] * 10) + '\n', encoding='utf-8')
    trained = train_tokenizer([corpus], 200, True, tmp_path / 'trained')
    for loaded in (tok, load_tokenizer(str(tmp_path / 'folder')), tokenizer_from_state(tokenizer_state(tok)),
                   SavedTokenizer.from_pretrained(tmp_path / 'folder')):
        for w in words:
            assert loaded.tokenize(w) == official_wordpiece(w, loaded.get_vocab()), len(w)
    assert trained.tokenize('กินข้าว' * 20) == official_wordpiece('กินข้าว' * 20, trained.get_vocab()) != ['[UNK]']
    plain = ElectraTokenizerFast.from_pretrained(tmp_path / 'folder')  # transformers' own: 100
    assert plain.tokenize('ab' * 100) == ['[UNK]'] and plain.get_vocab() == tok.get_vocab()
    assert tokenizer_fingerprint(plain) != tokenizer_fingerprint(tok)


def _run_features(tok, a: str, b: str | None = None) -> dict[str, list[int]]:
    "What a fine-tuning run feeds its model for `a` (and `b`): `encode`'s ids and `make_loader`'s types and mask."
    import numpy as np

    from electra.finetuning.tasks.encoding import encode, make_loader
    from electra.finetuning.tasks.sources import Examples
    enc = encode(Examples(np.arange(1), [a], None if b is None else [b], np.zeros(1)), tok, 512)
    ids, mask, types, _ = next(iter(make_loader(enc, 1, False, 0)))
    return {'input_ids': ids[0].tolist(), 'token_type_ids': types[0].tolist(), 'attention_mask': mask[0].tolist()}


@pytest.mark.parametrize('kind', ['bpe', 'wordpiece', 'unigram'])
def test_an_exported_tokenizer_of_its_own_encodes_a_text_and_a_pair_as_the_run_fed_them(kind, corpus, tmp_path):
    """R7a-2: an export folder carried the run's tokenizer as given, whose own encoding was not the run's: a byte-level
    BPE with RoBERTa's post-processor gave a pair `<s> A </s></s> B </s>` and no token types (the run: `<s> A </s> B
    </s>`, types 0 then 1), a WordPiece tokenizer.json without a post-processor no [CLS]/[SEP] at all, a Unigram with
    the run's template no token_type_ids (not among its inputs). Now AutoTokenizer of the folder gives exactly the
    run's input_ids, token_type_ids and attention_mask, its pieces unchanged, and says nothing; a tagging folder's
    (`words`) also cuts a sentence into the pieces of its words, each cut on its own as the tagging run cut them."""
    import warnings

    from electra.data.tokenizer import save_exported_tokenizer
    from electra.finetuning.tasks.tagging.encoding import encode_tagging
    from tests.support.tokenizers import FOLDERS
    texts = corpus.read_text(encoding='utf-8').splitlines()
    tok = load_tokenizer(str(FOLDERS[kind](tmp_path / 'given', texts)))
    tok.save_pretrained(tmp_path / 'as_given')
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert save_exported_tokenizer(tok, tmp_path / 'export') == ''
        assert save_exported_tokenizer(tok, tmp_path / 'tagging', words=True) == ''
    as_given, exported = (AutoTokenizer.from_pretrained(tmp_path / d) for d in ('as_given', 'export'))
    tagging = AutoTokenizer.from_pretrained(tmp_path / 'tagging')
    for a, b in zip(SENTENCES, SENTENCES[1:]):
        assert dict(as_given(a, b)) != _run_features(tok, a, b)  # the finding: the tokenizer as given differs
        assert dict(exported(a)) == _run_features(tok, a)
        assert dict(exported(a, b)) == _run_features(tok, a, b)
        assert exported.tokenize(a) == tok.tokenize(a)
        assert tagging(a)['input_ids'] == encode_tagging([a.split()], None, tok, ['O'], 512).ids.tolist()


def test_the_library_s_own_wordpiece_is_exported_as_save_pretrained_writes_it(trained, tmp_path):
    "A trained tokenizer and a BERT vocab.txt encode as the run already: their export folders are save_pretrained's."
    from electra.data.tokenizer import save_exported_tokenizer
    for name, tok in (('trained', trained[0]), ('vocab', load_tokenizer(str(bert_style_vocab(tmp_path / 'v.txt',
                                                                                             ['the', 'cow']))))):
        tok.save_pretrained(tmp_path / name / 'plain')
        assert save_exported_tokenizer(tok, tmp_path / name / 'export') == ''
        plain, export = tmp_path / name / 'plain', tmp_path / name / 'export'
        assert sorted(p.name for p in export.iterdir()) == sorted(p.name for p in plain.iterdir())
        assert all((export / p.name).read_bytes() == p.read_bytes() for p in plain.iterdir()), name
        assert dict(AutoTokenizer.from_pretrained(export)(*SENTENCES[:2])) == _run_features(tok, *SENTENCES[:2])


def test_an_exported_tokenizer_that_cannot_encode_as_the_run_is_said_in_one_line_and_returned_for_the_card(
        corpus, tmp_path, monkeypatch):
    "Where the run's template does not hold once saved (here: not set), one RunWarning naming the folder and the ids."
    from electra.config.errors import RunWarning
    from electra.data import tokenizer as tokenizers
    from tests.support.tokenizers import bpe_folder
    tok = load_tokenizer(str(bpe_folder(tmp_path / 'given', corpus.read_text(encoding='utf-8').splitlines())))
    monkeypatch.setattr(tokenizers, '_as_run', lambda tok, words: tok)
    with pytest.warns(RunWarning) as said:
        note = tokenizers.save_exported_tokenizer(tok, tmp_path / 'export', 'run/discriminator')
    a, b = (' '.join(tok.tokenize(t)) for t in ('A first text, to probe the encoding.', 'And a second one'))
    n, m = len(a.split()), len(b.split())
    assert note == (f"Its tokenizer does not encode as the run did: it encodes a pair as <s> {a} </s> </s> {b} </s> "
                    f"(input_ids, token_type_ids {'0' * (n + m + 4)}, attention_mask), the run as <s> {a} </s> {b} "
                    f"</s> (input_ids, token_type_ids {'0' * (n + 2)}{'1' * (m + 1)}, attention_mask); give the model "
                    "the run's encoding, `[CLS] A [SEP] B [SEP]` with token types 0 up to the first [SEP] and 1 after.")
    assert [str(w.message) for w in said] == [f'run/discriminator: {note}']


def test_one_vocabulary_however_read_is_one_identity_and_each_difference_is_named(tmp_path):
    """`tokenizer_identity` is what a model's ids mean: the same for a vocabulary read from its folder, a checkpoint's
    state, a vocab.txt or by transformers' AutoTokenizer (whose WordPiece reads 100 characters a word, the library's
    200); `tokenizer_difference` says what another does otherwise: the first token whose id differs, what it does to
    its input, or a special token of another id."""
    words = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '.', ',', '?', '*', 'a', 'cat', 'dog', 'the']
    ElectraTokenizerFast(vocab={w: i for i, w in enumerate(words)}).save_pretrained(tmp_path / 'tok')
    (tmp_path / 'vocab.txt').write_text(''.join(w + '\n' for w in words))
    own = load_tokenizer(str(tmp_path / 'tok'))
    alike = [AutoTokenizer.from_pretrained(tmp_path / 'tok'), tokenizer_from_state(tokenizer_state(own)),
             load_tokenizer(str(tmp_path / 'vocab.txt')), ElectraTokenizerFast(vocab={w: i for i, w in enumerate(words)})]
    assert {tokenizer_identity(t) for t in alike} == {tokenizer_identity(own)}
    assert all(tokenizer_difference(t, own, "the model's tokenizer") is None for t in alike)
    assert tokenizer_fingerprint(alike[0]) != tokenizer_fingerprint(own)  # the word length: a cache key, not a meaning
    # a corpus cache (`data.cache.build_corpus`) is keyed by the fingerprint: one of the same words in another order
    # is built again, never read as this one's
    assert tokenizer_fingerprint(reordered(own)) != tokenizer_fingerprint(own)
    assert tokenizer_difference(reordered(own), own, "the model's tokenizer") == (
        "its vocabulary (13 tokens) is not that of the model's tokenizer (13 tokens; 'a' is 12 there, 9 here)")
    cased = AutoTokenizer.from_pretrained(tmp_path / 'tok', do_lower_case=False)
    assert tokenizer_difference(cased, own, "the model's tokenizer") == (
        "it keeps its case, where the model's tokenizer lower-cases its input")
    masked = AutoTokenizer.from_pretrained(tmp_path / 'tok', mask_token='*')
    assert tokenizer_difference(masked, own, "the model's tokenizer") == (
        "its mask_token is '*' (id 8), that of the model's tokenizer '[MASK]' (id 4)")


def test_an_export_at_a_short_max_length_checks_its_encoding_without_transformers_length_warning(tmp_path, corpus):
    """A tagging run at max_length 16: the export's check of its encoding asks transformers for a probe text of 21
    tokens, and transformers logged `Token indices sequence length is longer than ... will result in indexing errors`
    into the job's log after runs that windowed every word right (R21a-4). The check asks without it."""
    import logging

    from electra.data.tokenizer import save_exported_tokenizer
    texts = corpus.read_text(encoding='utf-8').splitlines()
    from tests.support.tokenizers import FOLDERS
    tok = load_tokenizer(str(FOLDERS['wordpiece'](tmp_path / 'given', texts)))
    tok.model_max_length = 8  # as `run_length` sets it for the export of a run of that max_length
    seen = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    logger = logging.getLogger('transformers')
    logger.addHandler(handler)
    try:
        for words in (False, True):
            assert save_exported_tokenizer(tok, tmp_path / f'export_{words}', words=words) == ''
    finally: logger.removeHandler(handler)
    assert not [m for m in seen if 'indexing errors' in m]


def test_a_tokenizer_folder_that_keeps_case_on_an_uncased_vocabulary_is_said(tmp_path):
    """R24b-6 in pretraining: `--tokenizer` a save_pretrained folder of do_lower_case false on a vocabulary with no
    upper-case entry gave every capitalised word [UNK], said only by the corpus's [UNK] share. One warning now names the
    folder, the contradiction and the fix; a folder that lower-cases says nothing."""
    from transformers import BertTokenizerFast
    vocab = bert_style_vocab(tmp_path / 'vocab.txt', ['the', 'movie', 'is', 'great'])
    for lower in (False, True):
        BertTokenizerFast(str(vocab), do_lower_case=lower).save_pretrained(tmp_path / f'lower_{lower}')
    with pytest.warns(RunWarning, match=rf"^tokenizer {tmp_path / 'lower_False'}: its tokenizer_config.json keeps case "
                                        r"\(do_lower_case: false\), but no entry of its vocabulary is upper case: a "
                                        r"word with a capital letter is \[UNK\]\. For an uncased vocabulary set "
                                        r"do_lower_case to true there\.$"):
        assert load_tokenizer(str(tmp_path / 'lower_False')).tokenize('The movie') == ['[UNK]', 'movie']
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert load_tokenizer(str(tmp_path / 'lower_True')).tokenize('The movie') == ['the', 'movie']
