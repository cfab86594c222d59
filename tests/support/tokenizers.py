"""Tokenizer folders that are not the library's own WordPiece, trained with `tokenizers` on a few texts and saved as
their users save them: a byte-level BPE with RoBERTa's post-processor (`<s> A </s></s> B </s>`, no token types), a
WordPiece without a post-processor (the `tokenizers` default: no [CLS] or [SEP] added), a Unigram whose template has
the run's types but whose inputs lack token_type_ids. Each function writes `path` and returns it. And a tokenizer of
another's tokens in another order (`reordered`), as if of another model of the same words."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from tokenizers import ByteLevelBPETokenizer, Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
from transformers import ElectraTokenizerFast, PreTrainedTokenizerFast, RobertaTokenizerFast

BERT_SPECIALS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']


def bpe_folder(path: Path, texts: Iterable[str], vocab_size: int = 400) -> Path:
    "A RoBERTa-style byte-level BPE (<s> as [CLS], </s> as [SEP]) with RoBERTa's post-processor, as RobertaTokenizer."
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(list(texts), vocab_size=vocab_size, show_progress=False,
                            special_tokens=['<s>', '<pad>', '</s>', '<unk>', '<mask>'])
    bpe.post_processor = processors.RobertaProcessing(('</s>', bpe.token_to_id('</s>')), ('<s>', bpe.token_to_id('<s>')))
    RobertaTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token='<s>', eos_token='</s>', cls_token='<s>',
                         sep_token='</s>', unk_token='<unk>', pad_token='<pad>', mask_token='<mask>').save_pretrained(path)
    return path


def _saved(tok: Tokenizer, path: Path, **kw) -> Path:
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token='[UNK]', cls_token='[CLS]', sep_token='[SEP]',
                            pad_token='[PAD]', mask_token='[MASK]', **kw).save_pretrained(path)
    return path


def wordpiece_folder(path: Path, texts: Iterable[str], vocab_size: int = 400) -> Path:
    "A WordPiece tokenizer.json as `tokenizers` trains one: BERT's normalizer and pre-tokenizer, no post-processor."
    tok = Tokenizer(models.WordPiece(unk_token='[UNK]'))
    tok.normalizer, tok.pre_tokenizer = normalizers.BertNormalizer(), pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(list(texts), trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=BERT_SPECIALS,
                                                                  show_progress=False))
    return _saved(tok, path)


def unigram_folder(path: Path, texts: Iterable[str], vocab_size: int = 200) -> Path:
    "A Unigram with the template `[CLS] $A [SEP] $B:1 [SEP]:1` and model_input_names without token_type_ids."
    tok = Tokenizer(models.Unigram())
    tok.normalizer, tok.pre_tokenizer = normalizers.Lowercase(), pre_tokenizers.Metaspace()
    tok.train_from_iterator(list(texts), trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=BERT_SPECIALS,
                                                                unk_token='[UNK]', show_progress=False))
    tok.post_processor = processors.TemplateProcessing(single='[CLS] $A [SEP]', pair='[CLS] $A [SEP] $B:1 [SEP]:1',
                                                       special_tokens=[('[CLS]', 2), ('[SEP]', 3)])
    return _saved(tok, path, model_input_names=['input_ids', 'attention_mask'])


FOLDERS = {'bpe': bpe_folder, 'wordpiece': wordpiece_folder, 'unigram': unigram_folder}


def reordered(tok, words_from: int = 9) -> PreTrainedTokenizerFast:
    """An ElectraTokenizerFast of `tok`'s tokens, its words (ids from `words_from`: the tiny models' are after the
    special tokens and marks) in reverse order; in memory."""
    vocab = [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])]
    vocab = vocab[:words_from] + vocab[words_from:][::-1]
    return ElectraTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})
