"""Electric's scores of text, from its export (Clark et al., 2020, "Pre-Training Transformers as Energy-Based Cloze
Models"). The exported discriminator is a plain `ElectraForPreTraining`, and its head's logit is the energy E(x)_t of
each token alone: the run's discriminator logit adds the cloze model's log q(x_t | context) and
log(mask_prob / (1 - mask_prob)) (google-research/electra run_pretraining.py `_get_discriminator_output` with
`electric_objective`; objective/model.py `electric_logits`), so the probability the run gives that a token is noise
needs the two-tower cloze model, which the export writes beside it (`cloze/`, pretrained/export.py `save_cloze`).
`ElectricScorer` reads the two folders back and computes what the run computes."""
from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from electra.config.errors import ConfigError, RunWarning
from electra.data.tokenizer import DROPPED, no_word_piece
from electra.objective.model import cloze_log_prob, electric_logits, past_pretraining
from electra.pretrained.export import EXPORTS, load_cloze, load_discriminator

__all__ = ['ElectricScores', 'ElectricScorer', 'electric_scores']

Text = str | tuple[str, str]  # a text, or a pair encoded as the run fed one ([CLS] a [SEP] b [SEP])


@dataclass(eq=False)
class ElectricScores:
    """Electric's scores of one text, a value per token ([CLS] and [SEP] included; each [L], float32): `energy` the
    exported head's logit E(x)_t (low where the token is likely in its context: exp(-E) is the model's unnormalised
    p(x_t | context)); `log_q` the cloze model's log q(x_t | context); `logits` their sum with log(mask_prob /
    (1 - mask_prob)), the run's discriminator logit; `p_replaced` its sigmoid, the probability the run gives that the
    token is noise (a sample at a masked position) rather than the text's own. `==` is exact: the same tokens and
    every value equal (`torch.allclose` on a field compares to rounding)."""
    tokens: list[str]
    input_ids: torch.Tensor
    energy: torch.Tensor
    log_q: torch.Tensor
    logits: torch.Tensor
    p_replaced: torch.Tensor

    def __eq__(self, other) -> bool:
        if not isinstance(other, ElectricScores): return NotImplemented
        return self.tokens == other.tokens and all(torch.equal(getattr(self, k), getattr(other, k)) for k in
                                                   ('input_ids', 'energy', 'log_q', 'logits', 'p_replaced'))


class ElectricScorer:
    """An Electric run's discriminator and cloze model read back from its export, to score texts as the run does
    (`scorer(texts)`); `from_export` reads them. Each text is scored in a row of its own length, never padded: in a
    padded row the right-to-left tower's padding positions see the whole row (as in the official code), which would
    change the scores of [CLS] and the last token with the other texts of the batch. Texts of one length in one call
    run as one batch, so their scores equal each text's alone to float rounding (another batch size rounds the
    matrix products otherwise), not bit for bit."""

    def __init__(self, discriminator, cloze, tokenizer, mask_prob: float):
        self.discriminator, self.cloze = discriminator.eval(), cloze.eval()
        self.tokenizer, self.mask_prob = tokenizer, mask_prob

    @property
    def config(self):
        "The discriminator's config (its positions, the length it was pretrained at)."
        return self.discriminator.config

    @classmethod
    def from_export(cls, discriminator: str | Path, cloze: str | Path | None = None,
                    device: str | torch.device = 'cpu') -> ElectricScorer:
        """The run's networks from its exported folders: `discriminator` (`<run>/discriminator`) and `cloze` (by
        default the `cloze/` folder beside it), on `device`."""
        discriminator = Path(discriminator)
        if not discriminator.is_dir():
            raise ConfigError(f"discriminator: {discriminator} is not a folder: give the discriminator/ folder of an "
                              "Electric run's export, with its cloze/ folder beside it.")
        cloze = discriminator.parent / EXPORTS[2] if cloze is None else Path(cloze)
        net, tokenizer = load_discriminator(discriminator)
        generator, mask_prob = load_cloze(cloze, discriminator)
        return cls(net.to(device), generator.to(device), tokenizer, mask_prob)

    @torch.no_grad()
    def __call__(self, texts: Text | Sequence[Text]) -> list[ElectricScores]:
        "The scores of each of `texts` (one text or pair, or a list of them), in their order."
        texts = [texts] if isinstance(texts, (str, tuple)) else list(texts)
        rows = [self._encoded(k, text) for k, text in enumerate(texts)]
        by_length = defaultdict(list)
        for k, row in enumerate(rows): by_length[len(row[0])].append(k)
        out = [None] * len(rows)
        for ks in by_length.values():  # rows of one length together: a batch without padding
            ids, types = (torch.tensor(x) for x in zip(*(rows[k] for k in ks)))
            for k, scores in zip(ks, self.scores_of(ids, types), strict=True): out[k] = scores
        return out

    def _encoded(self, k: int, text: Text) -> tuple[list[int], list[int]]:
        "The ids and token types of `texts[k]`, as the run fed a text; a text longer than the positions refused."
        enc = self.tokenizer(*text) if isinstance(text, tuple) else self.tokenizer(text)
        config, n = self.discriminator.config, len(enc['input_ids'])
        if no_word_piece(self.tokenizer, *(text if isinstance(text, tuple) else (text,))):
            raise ConfigError(f"texts[{k}]: {text!r} has no word piece ({DROPPED}): its scores would be those of [CLS] "
                              "and [SEP] alone. Drop it, or give it its text.")
        if n > config.max_position_embeddings:
            raise ConfigError(f"texts[{k}]: {n} tokens, more than the model's {config.max_position_embeddings} "
                              "positions: split it into shorter texts.")
        if past := past_pretraining(config, n, 'the run'):  # untrained position rows: scores of little meaning
            warnings.warn(f'texts[{k}]: {n} tokens, {past}; split it for scores the run would give.', RunWarning,
                          stacklevel=3)
        return enc['input_ids'], enc['token_type_ids']

    @torch.no_grad()
    def scores_of(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> list[ElectricScores]:
        "The scores of each row of `input_ids`, `token_type_ids` [B, L], rows of real tokens (no padding)."
        device = self.discriminator.device
        ids, types = input_ids.to(device), token_type_ids.to(device)                                # [B, L]
        real = torch.ones_like(ids, dtype=torch.bool)
        energy = self.discriminator(ids, attention_mask=real.long(), token_type_ids=types).logits.float()
        cloze = self.cloze(ids, real, types)                                                           # [B, L, V]
        logits = electric_logits(energy, cloze, ids, self.mask_prob)
        log_q = cloze_log_prob(cloze, ids)
        return [ElectricScores(self.tokenizer.convert_ids_to_tokens(i.tolist()), i.cpu(), e.cpu(), q.cpu(), z.cpu(),
                               torch.sigmoid(z).cpu()) for i, e, q, z in zip(ids, energy, log_q, logits)]


def electric_scores(discriminator: str | Path, texts: Text | Sequence[Text], cloze: str | Path | None = None,
                    device: str | torch.device = 'cpu') -> list[ElectricScores]:
    """Electric's scores of `texts` (`ElectricScores`: per token the energy, log q, the run's logit and p(replaced)),
    from the export of an Electric run: its `discriminator/` folder and the `cloze/` folder beside it (or `cloze`).
    For many calls keep the networks loaded: `ElectricScorer.from_export(discriminator, cloze)(texts)`."""
    return ElectricScorer.from_export(discriminator, cloze, device)(texts)
