"""electra/tools/data_views.py: decoded examples with their segments, types and masks."""
from electra.data.batches import pretraining_dataloader
from electra.objective.masking import MaskingSettings
from electra.tools.data_views import examples_frame, mask_batch, masked_frame, render_example
from tests.support.corpora import needs_shared


@needs_shared
def test_decoded_examples_show_segments_types_and_masks(sotu, tok):
    _, ds = sotu
    frame = examples_frame(ds, tok, n=6)
    assert list(frame.columns) == ['row', 'document', 'tokens', 'len_a', 'len_b', 'example'] and len(frame) == 6
    for _, r in frame.iterrows():
        assert r['example'].startswith('A: [CLS] ') and r['example'].endswith('[SEP]')
        assert (' | B: ' in r['example']) == (r['len_b'] > 0)
        assert r['len_a'] + r['len_b'] + 2 + (r['len_b'] > 0) == r['tokens']
    ids, types = next(iter(pretraining_dataloader(ds, 4, 128, tok.pad_token_id, seed=0, total_steps=1)))
    masked = mask_batch(ids, MaskingSettings.for_tokenizer(tok, random_token_prob=0.1), seed=1)
    table = masked_frame(ids, types, masked, tok, n=4)
    for _, r in table.iterrows():
        assert r['chosen'] == int((masked.labels[r['example']] >= 0).sum()) == r['masked'] + r['kept'] + r['random']
        assert r['example_masked'].count('«') == r['chosen'] and r['example_masked'].count('→[MASK]»') == r['masked']
    plain = render_example(tok, ids[0], types[0])
    assert '«' not in plain and '[PAD]' not in plain


def test_render_glues_word_pieces_and_marks_them(tmp_path):
    # hand-worked: "the player ##s" -> "players"; a marked continuation stays glued to its word and shows '##'
    from transformers import BertTokenizerFast
    vocab = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'the', 'play', '##er', '##s', 'won']
    (tmp_path / 'vocab.txt').write_text('\n'.join(vocab) + '\n')
    t = BertTokenizerFast(str(tmp_path / 'vocab.txt'))
    ids = [2, 5, 6, 7, 8, 3, 9, 3, 0, 0]   # [CLS] the play ##er ##s [SEP] won [SEP] [PAD] [PAD]
    types = [0, 0, 0, 0, 0, 0, 1, 1, 0, 0]
    assert render_example(t, ids, types) == 'A: [CLS] the players [SEP] | B: won [SEP]'
    after = [2, 5, 6, 4, 8, 3, 5, 3, 0, 0]  # ##er -> [MASK], won -> the (random)
    assert render_example(t, ids, types, after) == 'A: [CLS] the play«##er→[MASK]»s [SEP] | B: «won→the» [SEP]'
    assert render_example(t, ids, types, ids, chosen=[4]) == 'A: [CLS] the player«##s» [SEP] | B: won [SEP]'
