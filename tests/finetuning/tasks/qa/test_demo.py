"""electra/finetuning/tasks/qa/demo.py: the generated SQuAD sets, and the QA pieces run end to end on them."""
from __future__ import annotations

from collections import Counter

import pytest
import torch

from electra.finetuning.tasks.qa.data import answer_found, gold_answers, read_squad
from electra.finetuning.tasks.qa.demo import DEMO_QA_SIZES, write_demo_squad
from electra.finetuning.tasks.qa.features import collate_windows, featurize
from electra.finetuning.tasks.qa.heads import ElectraQA, QALoss, decode, window_rows
from electra.finetuning.tasks.qa.metrics import qa_metrics, write_null_odds, write_predictions

pytestmark = pytest.mark.usefixtures('one_thread')


@pytest.mark.parametrize('version', ['1.1', '2.0'])
def test_demo_sets_read_back(qa_demo, version):
    train, dev = (read_squad(qa_demo[version] / f'{s}.json') for s in ('train', 'dev'))  # every answer at its offset
    assert (len(train), len(dev)) == (DEMO_QA_SIZES['train'], DEMO_QA_SIZES['dev'])
    impossible = [e for e in train + dev if e.is_impossible]
    if version == '1.1': assert not impossible
    else:
        assert 0.25 < len(impossible) / (len(train) + len(dev)) < 0.45
        assert all(answer_found(e.context, t, s) for e in impossible for t, s in e.plausible_answers)
        assert sum(bool(e.plausible_answers) for e in impossible) > len(impossible) / 2
    assert all(len(e.answers) == 3 for e in dev if not e.is_impossible)
    assert any(len(set(e.gold_texts)) > 1 for e in dev)  # annotators that disagree ("violin" / "the violin")
    contexts = {e.context for e in train + dev}
    assert any('  ' in c for c in contexts) and any('\n' in c for c in contexts) and any(not c.isascii() for c in contexts)
    assert len({e.id for e in train + dev}) == len(train + dev)


def test_demo_is_deterministic(tmp_path):
    a, b = write_demo_squad(tmp_path / 'a', '2.0', seed=3), write_demo_squad(tmp_path / 'b', '2.0', seed=3)
    assert (a / 'train.json').read_bytes() == (b / 'train.json').read_bytes()
    c = write_demo_squad(tmp_path / 'c', '2.0', seed=4)
    assert (a / 'train.json').read_bytes() != (c / 'train.json').read_bytes()
    with pytest.raises(ValueError, match='version'): write_demo_squad(tmp_path / 'd', '3.0')


def test_demo_long_contexts_need_several_windows(qa_demo, qa_tokenizer):
    dev = read_squad(qa_demo['2.0'] / 'dev.json')
    windows = featurize(dev, qa_tokenizer, max_seq_length=128, max_query_length=32, doc_stride=64)
    per = Counter(w.example for w in windows)
    assert max(per.values()) >= 3 and sum(n > 1 for n in per.values()) >= 10


def test_end_to_end_on_the_demo(qa_demo, qa_tokenizer, tmp_path):
    "Tiny random ELECTRA: training steps lower the loss; dev windows decode to context text; the official files."
    import transformers
    torch.manual_seed(0)
    cfg = transformers.ElectraConfig(vocab_size=len(qa_tokenizer), embedding_size=16, hidden_size=32,
                                     num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                     max_position_embeddings=64)
    model = ElectraQA(transformers.ElectraModel(cfg), beam_size=5)
    train = read_squad(qa_demo['2.0'] / 'train.json')[:24]
    batch = collate_windows(featurize(train, qa_tokenizer, 64, 16, 32, is_training=True)[:32], qa_tokenizer.pad_token_id)
    ids, mask, types, start, end, imp = batch
    opt, loss_fn, losses = torch.optim.Adam(model.parameters(), lr=3e-3), QALoss(), []
    for _ in range(15):
        loss = loss_fn(model(ids, mask, types, start), start, end, imp)
        opt.zero_grad(); loss.backward(); opt.step(); losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]
    dev = read_squad(qa_demo['2.0'] / 'dev.json')[:30]
    windows, rows = featurize(dev, qa_tokenizer, 64, 16, 32), []
    model.eval()
    with torch.no_grad():
        for i in range(0, len(windows), 16):
            rows += window_rows(model(*collate_windows(windows[i:i + 16], qa_tokenizer.pad_token_id)[:3]))
    preds, odds, _ = decode(dev, windows, rows, n_best_size=5, v2=True)
    assert set(preds) == set(odds) == {e.id for e in dev}
    assert all(p in e.context for e, p in zip(dev, preds.values()))
    scores = qa_metrics('squad', gold_answers(dev), preds, odds)
    assert scores['total'] == 30 and 0 <= scores['best_f1'] <= 100
    write_predictions(preds, tmp_path / 'predictions.json'); write_null_odds(odds, tmp_path / 'null_odds.json')
    assert (tmp_path / 'predictions.json').is_file() and (tmp_path / 'null_odds.json').is_file()
