"""`length_buckets` (electra/finetuning/tasks/encoding.py `padded_length`, used by the classification, tagging
and QA loaders): a batch padded further, to its bucket, gives every head the same outputs at its real positions and
the same loss, because padding is masked (attention), ignored (tagging labels -100) or kept out of the answer
(QA's -1000 bias)."""
import pytest
import torch
from transformers import ElectraConfig, ElectraModel

from electra.finetuning.classifier import ElectraClassifier
from electra.finetuning.tasks.qa.heads import ElectraQA, QALoss
from electra.finetuning.tasks.tagging.model import ElectraTagger, TaggingLoss

pytestmark = pytest.mark.usefixtures('one_thread')


def body():
    torch.manual_seed(0)
    return ElectraModel(ElectraConfig(vocab_size=50, embedding_size=16, hidden_size=16, num_hidden_layers=2,
                                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=64,
                                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


def batch(lengths, width):
    "input_ids, attention_mask, token_type_ids [B, width] of rows with `lengths` real tokens (question 0-4, then context)."
    g = torch.Generator().manual_seed(1)
    mask = (torch.arange(width)[None] < torch.tensor(lengths)[:, None]).long()
    ids = torch.randint(5, 50, (len(lengths), width), generator=g) * mask
    return ids, mask, (torch.arange(width)[None] >= 5).long() * mask


def padded(xs, width):
    "The same batch with zero columns added up to `width` (pad id 0, mask 0, token type 0)."
    return tuple(torch.nn.functional.pad(x, (0, width - x.shape[1])) for x in xs)


LENGTHS, L, BUCKET = [12, 9, 7], 12, 32


def test_a_classifier_reads_the_same_cls_vector_from_a_batch_padded_to_its_bucket():
    model = ElectraClassifier(body(), 3).eval()
    x = batch(LENGTHS, L)
    torch.testing.assert_close(model(*padded(x, BUCKET)), model(*x), rtol=0, atol=1e-6)


def test_tagging_logits_and_loss_are_unchanged_by_padding_to_a_bucket():
    model = ElectraTagger(body(), 4).eval()
    x = batch(LENGTHS, L)
    target = torch.where(x[1].bool(), torch.arange(L)[None] % 4, -100)
    wide_target = torch.nn.functional.pad(target, (0, BUCKET - L), value=-100)
    out, wide = model(*x), model(*padded(x, BUCKET))
    torch.testing.assert_close(wide[:, :L], out, rtol=0, atol=1e-6)
    loss = TaggingLoss()
    torch.testing.assert_close(loss(wide, wide_target), loss(out, target), rtol=0, atol=1e-5)


def test_qa_logits_at_real_positions_and_loss_are_unchanged_by_padding_to_a_bucket():
    model = ElectraQA(body()).train()  # as trained: the joint head's end logits given the gold start
    x = batch(LENGTHS, L)
    start, end, impossible = torch.tensor([6, 5, 5]), torch.tensor([8, 7, 6]), torch.zeros(3)
    out, wide = model(*x, start), model(*padded(x, BUCKET), start)
    for k in ('start_logits', 'end_logits'):
        torch.testing.assert_close(wide[k][:, :L], out[k], rtol=0, atol=1e-5)
    loss = QALoss()
    torch.testing.assert_close(loss(wide, start, end, impossible), loss(out, start, end, impossible), rtol=0, atol=1e-5)
