"""The discriminator's view of a text: every token it reads with its probability of "replaced" (the paper's
D(x, t), section 2: sigmoid of the discriminator's logit; for an Electric run's, the sigmoid of its run's logit, the
head's energy plus the cloze model's terms: `detector_of`), for

- a text as the user types it (`view_text`),
- the text with one word the user replaces (`view_replaced`),
- the text with words the generator replaces: masked, filled in by a sample of its softmax as pretraining does
  (`view_generated`).

Where a generator is given, the positions it fills (or where the user put a word) carry its top candidates, read with
[MASK] there. A `TokenView` holds the data (tokens, probabilities, candidates) and renders itself: `html()` colours each
token by its probability (what a notebook displays), `text()` writes plain marks for a terminal, `figure()` draws the
same as a matplotlib figure (the picture saved under docs/). The pretraining walkthrough's verdict on a batch is a
`TokenView` too (`electra.tools.walkthrough.detection_view`).
"""
from __future__ import annotations

import html
import io
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from electra.config.errors import ConfigError, RunWarning
from electra.config.objectives import OBJECTIVES
from electra.config.pretrain import saved_config
from electra.data.tokenizer import DROPPED, no_word_piece, vocabulary_mismatch
from electra.objective.masking import MaskingSettings
from electra.objective.model import build_pretraining_model, past_pretraining
from electra.pretrained.electric import ElectricScorer
from electra.pretrained.generator import load_generator
from electra.runtime.files import glyphs_said, saved_by_torch
from electra.tools.explore import check_tokenizer
from electra.training.checkpoint import load_checkpoint

__all__ = ['TokenView', 'detector_of', 'replaced_probabilities', 'generator_probabilities', 'view_text', 'view_replaced',
           'view_generated', 'generator_of']

RED = (214, 39, 40)  # matplotlib's 'tab:red': the colour of "replaced"; a token's opacity is its probability


@dataclass(repr=False)
class TokenView:
    "What the discriminator read and thought of it: one entry per token, [CLS] and [SEP] included."
    tokens: list[str]                 # the tokens it read
    p_replaced: np.ndarray            # [L] its probability that each token was replaced
    originals: list[str | None]       # the text's own token(s) where another was put in; None where unchanged
    candidates: dict[int, list[tuple[str, float]]] = field(default_factory=dict)  # position -> generator's top k
    threshold: float = 0.5            # flagged: probability above it

    @property
    def flagged(self) -> np.ndarray:
        return self.p_replaced > self.threshold

    def frame(self) -> pd.DataFrame:
        "One row per token: position, token, original, replaced, p(replaced) (3 decimals), flagged."
        return pd.DataFrame({'position': range(len(self.tokens)), 'token': self.tokens,
                             'original': [o or t for t, o in zip(self.tokens, self.originals)],
                             'replaced': [o is not None for o in self.originals],
                             'p(replaced)': np.round(self.p_replaced.astype(float), 3), 'flagged': self.flagged})

    def candidate_lines(self) -> list[str]:
        return [f'{p} {self.tokens[p]}: ' + ', '.join(f'{t} {q:.2f}' for t, q in c)
                for p, c in sorted(self.candidates.items())]

    def text(self) -> str:
        """Plain marks: a replaced token is written [token/original], a flagged token starred with its probability,
        *[x/y]*0.93 a replacement caught, *x*0.71 a false alarm, [x/y] a miss; then the generator's candidates."""
        parts = []
        for t, o, p, f in zip(self.tokens, self.originals, self.p_replaced, self.flagged):
            t = t if o is None else f'[{t}/{o}]'
            parts.append(f'*{t}*{p:.2f}' if f else t)
        lines = [' '.join(parts)]
        if self.candidates: lines += ["the generator's candidates at position:", *('  ' + c for c in self.candidate_lines())]
        return '\n'.join(lines)

    __repr__ = __str__ = text

    def html(self) -> str:
        "Tokens on a red of opacity p(replaced) (title: the probability), replaced ones struck through after; candidates beside."
        spans = []
        for t, o, p, f in zip(self.tokens, self.originals, self.p_replaced.astype(float), self.flagged):
            style = f'background-color: rgba({RED[0]}, {RED[1]}, {RED[2]}, {p:.3f}); padding: 1px 3px; margin: 1px; border-radius: 3px'
            if f: style += '; font-weight: bold; outline: 1px solid black'
            was = '' if o is None else f'<sub><s>{html.escape(o)}</s></sub>'
            spans.append(f'<span class="token" title="p(replaced) {p:.3f}" data-p="{p:.6f}" style="{style}">'
                         f'{html.escape(t)}{was}</span>')
        side = ''
        if self.candidates:
            rows = ''.join(f'<tr><td>{html.escape(c)}</td></tr>' for c in self.candidate_lines())
            side = f'<table style="margin-left: 2em"><tr><th>the generator\'s candidates</th></tr>{rows}</table>'
        return (f'<div style="display: flex; align-items: flex-start"><div style="line-height: 2; max-width: 60em">'
                f'{" ".join(spans)}</div>{side}</div>')

    _repr_html_ = html

    def figure(self, width: int = 12):
        "The tokens on their red, wrapped into lines, the candidates below: a matplotlib Figure."
        from matplotlib.figure import Figure
        lines, line, used = [], [], 0
        for i, t in enumerate(self.tokens):
            shown = t if self.originals[i] is None else f'{t} ({self.originals[i]})'
            if line and used + len(shown) + 1 > 10 * width: lines.append(line); line, used = [], 0
            line.append((i, shown)); used += len(shown) + 1
        lines.append(line)
        extra = self.candidate_lines()
        fig = Figure(figsize=(width, 0.45 * (len(lines) + len(extra)) + 0.3))
        ax = fig.add_axes((0, 0, 1, 1)); ax.axis('off')
        rows = len(lines) + len(extra)
        for r, line in enumerate(lines):
            x = 0.01
            for i, shown in line:
                box = dict(facecolor=(*(c / 255 for c in RED), float(self.p_replaced[i])), pad=2,
                           edgecolor='black' if self.flagged[i] else 'none')
                ax.text(x, 1 - (r + 0.7) / rows, shown, fontsize=11, family='monospace', bbox=box, gid=f'token-{i}')
                x += (len(shown) + 1.5) / (10 * width)
        for r, c in enumerate(extra):
            ax.text(0.01, 1 - (len(lines) + r + 0.7) / rows, c, fontsize=9, color='dimgray')
        return fig

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        with glyphs_said('the token view'): self.figure().savefig(buf, format='png', dpi=100)  # (text of any script)
        return buf.getvalue()


# -- the networks at work

def _encode(tokenizer, text: str) -> tuple[torch.Tensor, torch.Tensor]:
    "`[CLS] text [SEP]`, whole (`_judged` cuts it): input_ids and token_type_ids [1, L]; a text of no token refused."
    if no_word_piece(tokenizer, text):
        raise ConfigError(f"text: {text!r} has no word piece ({DROPPED}): the view would be of [CLS] and [SEP] alone. "
                          "Give it its text.")
    enc = tokenizer(text, return_tensors='pt', verbose=False)  # (verbose: no note of a length past the tokenizer's)
    return enc['input_ids'], enc['token_type_ids']


def _judged_length(discriminator) -> int:
    """The tokens a view shows: as many as the discriminator was pretrained at (`pretraining_max_length` in its config,
    where recorded), at most its positions. Past the pretraining length its verdicts read position embeddings never
    trained: false alarms that look like its judgement of the text."""
    c = discriminator.config
    return min(c.max_position_embeddings, getattr(c, 'pretraining_max_length', None) or c.max_position_embeddings)


def _judged(discriminator, ids: torch.Tensor, types: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`ids`, `types` [1, L] cut to `_judged_length`, [SEP] kept last as pretraining's examples end (the tokenizer's
    own truncation gives the same), with one warning naming the tokens past it, worded as fine-tuning's for a
    max_length past the pretraining length (`past_pretraining`)."""
    n, limit = ids.size(1), _judged_length(discriminator)
    if n <= limit: return ids, types
    why = (past_pretraining(discriminator.config, n, 'the discriminator')
           or f"past the discriminator's {limit} positions")
    warnings.warn(f"text: {n} tokens ([CLS] and [SEP] included), {n - limit} of them {why}; the view shows the first "
                  f"{limit} tokens, the text cut there as pretraining cut its examples.", RunWarning, stacklevel=3)
    return torch.cat([ids[:, :limit - 1], ids[:, -1:]], 1), types[:, :limit]


def _past(discriminator, key: str, words) -> ConfigError:
    return ConfigError(f"{key}: {words!r} lies past the first {_judged_length(discriminator)} tokens the discriminator "
                       "was pretrained at, which the view shows: put it earlier in the text, or shorten the text.")


def detector_of(source: str, discriminator):
    """What the views read each token's probability of "replaced" from, for the discriminator `source` names (read as
    `discriminator`): the discriminator itself, or for an Electric run's exported folder an `ElectricScorer` (its
    cloze model beside it, `cloze/`), whose probability adds the cloze model's terms to the head's energy."""
    row = OBJECTIVES.get(getattr(discriminator.config, 'electra_objective', None))
    if row is None or not row.exports_cloze: return discriminator
    if not Path(source).is_dir():
        raise ConfigError(f"model: {source} is an Electric run's checkpoint: {row.head_alone}. Give its exported "
                          "discriminator/ folder, with the cloze/ folder beside it, to see the run's p(replaced).")
    return ElectricScorer.from_export(source)


@torch.no_grad()
def replaced_probabilities(discriminator, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> np.ndarray:
    """The probability of "replaced" [B, L] as the run scored it: the sigmoid of an `ElectraForPreTraining`'s logits
    (eval mode: no dropout, its mode put back), or an `ElectricScorer`'s `p_replaced` (`detector_of`). A discriminator
    whose head alone is no replaced-token detector (its config's `electra_objective`) is refused in one line."""
    if isinstance(discriminator, ElectricScorer):
        return torch.stack([s.p_replaced for s in discriminator.scores_of(input_ids, token_type_ids)]).numpy()
    row = OBJECTIVES.get(getattr(discriminator.config, 'electra_objective', None))
    if row is not None and row.head_alone:
        fix = ("read it with its cloze model: electra.tools.token_view.detector_of(its discriminator/ folder, model)"
               if row.exports_cloze else 'give a discriminator pretrained by replaced-token detection')
        raise ConfigError(f"model: pretrained with objective '{row.name}': {row.head_alone}; its probabilities of "
                          f"\"replaced\" would show nothing the run learnt: {fix}.")
    was = discriminator.training
    device = next(discriminator.parameters()).device
    logits = discriminator.eval()(input_ids=input_ids.to(device), token_type_ids=token_type_ids.to(device)).logits
    discriminator.train(was)
    return torch.sigmoid(logits.float()).cpu().numpy()


@torch.no_grad()
def generator_probabilities(generator, input_ids: torch.Tensor, token_type_ids: torch.Tensor, positions: list[int],
                            vocab_size: int) -> torch.Tensor:
    """The generator's (an `ElectraForMaskedLM`'s) softmax [P, vocab_size] at `positions` of one example [1, L];
    embedding rows past the tokenizer (`pad_vocab_multiple`) are never tokens, left out."""
    was = generator.training
    device = next(generator.parameters()).device
    logits = generator.eval()(input_ids=input_ids.to(device), token_type_ids=token_type_ids.to(device)).logits
    generator.train(was)
    return torch.softmax(logits[0, positions, :vocab_size].float(), -1).cpu()


def _top(tokenizer, probs: torch.Tensor, positions: list[int], k: int) -> dict[int, list[tuple[str, float]]]:
    top = probs.topk(min(k, probs.size(-1)), -1)
    return {p: list(zip(tokenizer.convert_ids_to_tokens(ids.tolist()), vals.tolist()))
            for p, ids, vals in zip(positions, top.indices, top.values)}


def _masked(tokenizer, ids: torch.Tensor, positions: list[int]) -> torch.Tensor:
    out = ids.clone()
    out[0, positions] = tokenizer.mask_token_id
    return out


def view_text(discriminator, tokenizer, text: str, threshold: float = 0.5) -> TokenView:
    """The discriminator's view of `text` as it is; a text longer than the discriminator was pretrained at
    (`pretraining_max_length`) is cut there, with one warning (`_judged`)."""
    check_tokenizer(discriminator, tokenizer)
    ids, types = _judged(discriminator, *_encode(tokenizer, text))
    return TokenView(tokenizer.convert_ids_to_tokens(ids[0].tolist()), replaced_probabilities(discriminator, ids, types)[0],
                     [None] * ids.size(1), threshold=threshold)


def view_replaced(discriminator, tokenizer, text: str, word: str, replacement: str, generator=None, k: int = 5,
                  threshold: float = 0.5) -> TokenView:
    """The view of `text` with the first whole-word `word` replaced by `replacement`. The tokens that differ (the
    span between the two token sequences' common start and end) carry the text's own tokens there; with a
    `generator`, its top `k` candidates at them, read with [MASK] in their place. Cut as `view_text` cuts; a word
    past the cut is refused."""
    found = re.search(rf'(?<!\w){re.escape(word)}(?!\w)', text, flags=re.IGNORECASE)
    if not found: raise ConfigError(f'replace: {word!r} is not a word of the text {text!r}; give one of its words.')
    check_tokenizer(discriminator, tokenizer)
    before, _ = _encode(tokenizer, text)
    ids, types = _encode(tokenizer, text[:found.start()] + replacement + text[found.end():])
    a, b = before[0].tolist(), ids[0].tolist()
    n = min(len(a), len(b))
    start = next((i for i in range(n) if a[i] != b[i]), n)      # the common start, then the common end after it
    end = next((i for i in range(n - start) if a[-1 - i] != b[-1 - i]), n - start)
    span, was = list(range(start, len(b) - end)), ' '.join(tokenizer.convert_ids_to_tokens(a[start:len(a) - end]))
    if not span:  # deleted, or the same tokens (e.g. another case under an uncased vocabulary): nothing to see
        raise ConfigError(f'replace_with: {replacement!r} in place of {word!r}: no token of the text changes (a '
                          'deletion or the same tokens); give a word the tokenizer reads differently.')
    if start >= _judged_length(discriminator) - 1: raise _past(discriminator, 'replace', word)
    ids, types = _judged(discriminator, ids, types)
    b, span = ids[0].tolist(), [i for i in span if i < ids.size(1) - 1]
    view = TokenView(tokenizer.convert_ids_to_tokens(b), replaced_probabilities(discriminator, ids, types)[0],
                     [was if i in span else None for i in range(len(b))], threshold=threshold)
    if generator is not None:
        probs = generator_probabilities(generator, _masked(tokenizer, ids, span), types, span, len(tokenizer))
        view.candidates = _top(tokenizer, probs, span, k)
    return view


def view_generated(discriminator, generator, tokenizer, text: str, words: list[str], k: int = 5, seed: int = 0,
                   threshold: float = 0.5) -> TokenView:
    """The view of `text` with every token of each of `words` masked and filled in by the generator, each position a
    sample of its softmax (drawn with a generator seeded by `seed`), as pretraining corrupts its input; a sample equal
    to the text's token counts as original. Its top `k` candidates at each masked position beside. Cut as `view_text`
    cuts; words all past the cut are refused."""
    check_tokenizer(discriminator, tokenizer)
    ids, types = _encode(tokenizer, text)
    tokens = tokenizer.convert_ids_to_tokens(ids[0].tolist())
    pieces = {t for w in words for t in tokenizer.convert_ids_to_tokens(tokenizer(w, add_special_tokens=False)['input_ids'])}
    positions = [i for i, t in enumerate(tokens) if t in pieces and ids[0, i] not in tokenizer.all_special_ids]
    if not positions:
        raise ConfigError(f'generate: none of {words} is in the text {text!r}; give words of the text to replace.')
    if positions[0] >= _judged_length(discriminator) - 1: raise _past(discriminator, 'generate', words)
    ids, types = _judged(discriminator, ids, types)
    tokens, positions = tokens[:ids.size(1) - 1] + tokens[-1:], [p for p in positions if p < ids.size(1) - 1]
    probs = generator_probabilities(generator, _masked(tokenizer, ids, positions), types, positions, len(tokenizer))
    sampled = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(seed))[:, 0]
    corrupted = ids.clone()
    corrupted[0, positions] = sampled
    originals: list[str | None] = [None] * ids.size(1)
    for p, s in zip(positions, sampled.tolist()):
        if s != int(ids[0, p]): originals[p] = tokens[p]
    return TokenView(tokenizer.convert_ids_to_tokens(corrupted[0].tolist()),
                     replaced_probabilities(discriminator, corrupted, types)[0], originals, _top(tokenizer, probs, positions, k),
                     threshold)


# -- the generator of a pretrained discriminator

def generator_of(source: str, tokenizer, generator: str = ''):
    """The generator (an `ElectraForMaskedLM`) beside the discriminator `source` names: from a pretrain.py `.pth` its
    trained generator, from an exported `discriminator` folder the `generator` folder beside it; `generator`, when
    given, names a masked LM itself (a `save_pretrained` folder or a hub name); in eval mode from any of them, as
    `from_pretrained` returns it. None when there is none (a hub discriminator, an objective without a generator
    network)."""
    if generator: return _same_vocabulary(load_generator(generator), tokenizer)
    path = Path(source)
    if path.is_file() and saved_by_torch(str(path)):
        ckpt = load_checkpoint(path)
        cfg = saved_config(ckpt['config'], str(path))
        if OBJECTIVES[cfg.objective].generator != 'masked_lm' or cfg.uniform_generator: return None
        model = build_pretraining_model(cfg, MaskingSettings.from_config(cfg, tokenizer))
        model.load_state_dict(ckpt['model'])
        return model.generator.eval()
    beside = path.parent / 'generator'
    return _same_vocabulary(load_generator(str(beside)), tokenizer) if path.is_dir() and (beside / 'config.json').is_file() else None


def _same_vocabulary(frozen, tokenizer):
    """The generator's net, when its vocabulary is the discriminator's tokenizer's token by token: the views feed it
    the discriminator's ids (another vocabulary: other words as candidates, or ids past its rows)."""
    if differs := vocabulary_mismatch(frozen.tokenizer, tokenizer, "the discriminator's tokenizer's"):
        raise ConfigError(f"generator: {frozen.source}'s vocabulary {differs}: its candidates would be other words. "
                          "Give the generator trained with this discriminator, or leave `generator` empty.")
    return frozen.net
