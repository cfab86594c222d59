"""electra/objective/reference.py: the plain-torch step is the library's step, bit for bit, on the same batch, masks
and noise (the default objective), and gives the same gradients."""
import pytest
import torch

from electra.objective.loss import ElectraLoss
from electra.objective.masking import mask_tokens
from electra.objective.reference import reference_losses
from tests.support.tiny import V, batches, tiny_cfg, tiny_model

pytestmark = pytest.mark.usefixtures('one_thread')


@pytest.mark.parametrize('random_token_prob', [0.0, 0.1])
def test_the_reference_step_is_the_library_step(random_token_prob):
    cfg = tiny_cfg(dropout=0.0, batch_size=8, max_length=24, random_token_prob=random_token_prob)
    model = tiny_model(cfg).train()
    ids, tt = batches(cfg, n=1)[0]
    ids[1, 15:] = 0  # a padded row: attention and the discriminator's mean skip it
    rng = torch.Generator().manual_seed(5)
    m = mask_tokens(ids, torch.tensor([0, 101, 102, 103]), 0, 103, V, cfg.mask_prob, cfg.mask_mode,
                    cfg.mask_token_prob, cfg.random_token_prob, rng)
    noise = torch.rand(model.noise_shape(m.positions), generator=rng)  # as MaskingCallback draws it
    loss_func = ElectraLoss(cfg.gen_loss_weight, cfg.disc_loss_weight, cfg.objective)
    library = loss_func(model(m.input_ids, tt, m.positions, m.labels, noise), m.labels)
    library.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    total, gen, disc = reference_losses(model.generator, model.discriminator, m.input_ids, tt, m.positions, m.labels,
                                        noise, 0, cfg.gen_loss_weight, cfg.disc_loss_weight)
    assert torch.equal(total, library) and torch.equal(gen, loss_func.last[0]) and torch.equal(disc, loss_func.last[1])
    assert 0 < float(gen) and 0 < float(disc) < 1
    total.backward()
    assert grads.keys() == {n for n, p in model.named_parameters() if p.grad is not None}
    for n, g in grads.items(): torch.testing.assert_close(dict(model.named_parameters())[n].grad, g, rtol=0, atol=0, msg=n)
