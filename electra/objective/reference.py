"""One ELECTRA pretraining step's losses in plain torch, read top to bottom: the method in one function, without the
library's options (objective variants, padded vocabulary, two-stage training) or its speed work.

The library computes the same numbers with `ElectraGeneratorDiscriminator` + `ElectraLoss` (electra/objective/model.py and
loss.py), driven by fastai callbacks; `tests/objective/test_reference.py` holds the two equal, bit for bit, on the same
batch, masks and noise. Official code: google-research/electra, pretrain/pretrain_helpers.py (`mask`,
`sample_from_softmax`, `scatter_update`) and run_pretraining.py (`PretrainingModel`, `_get_fake_data`,
`_get_discriminator_output`); the paper, section 2 and equation 1.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import ElectraForMaskedLM, ElectraForPreTraining

__all__ = ['reference_losses']


def reference_losses(generator: ElectraForMaskedLM, discriminator: ElectraForPreTraining, input_ids: torch.Tensor,
                     token_type_ids: torch.Tensor, positions: torch.Tensor, labels: torch.Tensor,
                     noise_draws: torch.Tensor, pad_token_id: int, gen_weight: float = 1.0,
                     disc_weight: float = 50.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(total, generator loss, discriminator loss) of one step on a masked batch: `input_ids` [B, L] with the chosen
    positions already masked (`electra.objective.masking.mask_tokens`), `positions` and `labels` [B, P] the chosen
    positions and their original tokens (-100: an unused slot), `noise_draws` [B, P, V] the U(0, 1) draws of the
    sampling's Gumbel noise. The chosen positions of a row are distinct (the default 'fixed' masking)."""
    real = input_ids != pad_token_id                                   # [B, L]: every real token, [CLS] and [SEP] too
    attention = real[:, None, None, :]                                 # [B, 1, 1, L]: keys a query may attend to
    chosen = labels >= 0                                               # [B, P]

    # 1. The generator, a small masked language model, predicts the original token at each chosen position; its
    #    vocabulary projection runs at those positions only (the loss reads nothing else).
    hidden = generator.electra(input_ids, attention_mask=attention, token_type_ids=token_type_ids).last_hidden_state
    hidden = hidden.gather(1, positions[..., None].expand(-1, -1, hidden.size(-1)))         # [B, P, Hg]
    gen_logits = generator.generator_lm_head(generator.generator_predictions(hidden))       # [B, P, V]
    gen_loss = F.cross_entropy(gen_logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100,
                               reduction='sum') / (chosen.sum() + 1e-6)                    # mean over chosen slots

    # 2. Replacements sampled from the generator's softmax by Gumbel-max, in float32; no gradient flows through them
    #    (the paper: the generator is trained by maximum likelihood, not adversarially).
    gumbel = -torch.log(-torch.log(noise_draws + 1e-9) + 1e-9)                               # [B, P, V]
    sampled = (gumbel + gen_logits.detach().float()).argmax(-1)                              # [B, P]

    # 3. The discriminator reads the input with the samples written in; a token is "replaced" where it differs from
    #    the original, so a sample equal to the original counts as original (official `_get_fake_data`).
    rows = torch.arange(input_ids.size(0), device=input_ids.device)[:, None]                 # [B, 1]
    corrupted, original = input_ids.clone(), input_ids.clone()
    corrupted[rows, positions] = torch.where(chosen, sampled, input_ids[rows, positions])
    original[rows, positions] = torch.where(chosen, labels, input_ids[rows, positions])
    is_replaced = (corrupted != original).float()                                            # [B, L]
    disc_logits = discriminator(corrupted, attention_mask=attention, token_type_ids=token_type_ids).logits  # [B, L]
    disc_terms = F.binary_cross_entropy_with_logits(disc_logits.float(), is_replaced, reduction='none')
    disc_loss = (disc_terms * real).sum() / (real.sum() + 1e-6)                              # mean over real tokens

    # 4. Equation 1: the generator's loss plus lambda = 50 times the discriminator's, minimised together.
    return gen_weight * gen_loss + disc_weight * disc_loss, gen_loss, disc_loss
