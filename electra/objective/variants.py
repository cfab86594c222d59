"""The paper's objectives (section 3.2, Table 5; docs/objectives.md), each one row of `VARIANTS`: what it changes of
replaced-token detection over every token (`electra`). The model (`model.py`) and the loss (`loss.py`) read these
fields and never an objective's name, so a variant's whole difference is its row here."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ['Variant', 'VARIANTS']


@dataclass(frozen=True)
class Variant:
    "How one objective differs from `electra`."
    generator: bool          # a generator (or the uniform one) replaces the chosen tokens; False: BERT, the discriminator
                             # reads the masked input itself and there is no generator loss
    head: str                # the discriminator's loss head: 'rtd' replaced-token detection, a sigmoid per token;
                             # 'mlm' token prediction at the chosen positions; 'copy' every token's identity through
                             # the copy gate p(x) = D 1[x = input] + (1 - D) softmax(x), D the RTD head's sigmoid
    positions: str           # where the discriminator's loss is taken: 'tokens' every real token [B, L]; 'chosen' the
                             # chosen positions as [B, L] (one each, however often chosen); 'slots' as [B, P]
    no_mask_samples: bool    # samples are never [MASK] (its logit -inf), so the input holds no [MASK]: the point
                             # of Replace MLM and All-Tokens MLM
    two_tower_generator: bool = False  # the generator is a two-tower cloze model reading the UNmasked input (one
                             # left-to-right and one right-to-left transformer, `TwoTowerClozeGenerator`), its loss the
                             # cloze loss at every candidate token (official `two_tower_generator`, Electric)
    fake: str = 'replaced'   # which tokens the discriminator learns as fake: 'replaced' where the sample differs from
                             # the original; 'masked' every masked position, its sample the noise even when it equals the
                             # original (Electric: noise-contrastive estimation, official `_get_fake_data`)
    noise_log_prob: bool = False  # the discriminator's logit plus the generator's stop-gradient log-probability of
                             # the input token and log(mask_prob / (1 - mask_prob)): Electric's energy-based model
                             # (`electric_logits`; needs the cloze model's probability at every position)

    def __post_init__(self):
        if self.fake not in ('replaced', 'masked'): raise ValueError(f"fake must be 'replaced' or 'masked', got {self.fake!r}")
        if self.noise_log_prob and not self.two_tower_generator:
            raise ValueError('noise_log_prob needs the two-tower generator: a masked LM has no probability of every token')
    frozen_generator: bool = False  # the generator is an existing masked LM (`generator`), never trained: no
                                    # gradient, no optimizer state, no generator loss; its sampling temperature is
                                    # annealed (`temperature_start`): Fast-ELECTRA (Dong et al., ICLR 2024)

    @property
    def mlm(self) -> bool:
        "The discriminator predicts tokens (an MLM head) rather than only whether they were replaced."
        return self.head != 'rtd'


VARIANTS: dict[str, Variant] = {
    'electra': Variant(generator=True, head='rtd', positions='tokens', no_mask_samples=False),
    'electra_15': Variant(generator=True, head='rtd', positions='chosen', no_mask_samples=False),
    'mlm': Variant(generator=False, head='mlm', positions='slots', no_mask_samples=False),
    'replace_mlm': Variant(generator=True, head='mlm', positions='slots', no_mask_samples=True),
    'all_tokens_mlm': Variant(generator=True, head='copy', positions='tokens', no_mask_samples=True),
    'electric': Variant(generator=True, head='rtd', positions='tokens', no_mask_samples=False, two_tower_generator=True,
                        fake='masked', noise_log_prob=True),
    'fast_electra': Variant(generator=True, head='rtd', positions='tokens', no_mask_samples=False, frozen_generator=True),
}
