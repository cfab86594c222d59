"""The pretraining objectives, one row each (docs/objectives.md): everything the rest of the library asks of an
objective is a field of its row here, so the config's choices, its checks, the model, the losses, the FLOPs count and
the export read the row and never test an objective's name. A row names the arithmetic it needs by a word (its
generator's kind, its discriminator's loss head); that arithmetic lives on the method's floor, `electra/objective/`
(`model.py` builds each generator kind, `loss.py` and `flops.py` hold each head's loss and FLOPs).

Adding an objective: its row below, a preset in `configs/pretrain/` and its line in docs/objectives.md; and, when it
needs a generator kind or a loss head no row has yet, its functions in `electra/objective/` under that word."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ['Objective', 'Reported', 'OBJECTIVES', 'TIE_WEIGHTS', 'GENERATOR_KINDS', 'HEADS', 'names_where']

TIE_WEIGHTS = ('none', 'embeddings', 'all', 'gdes')  # what the generator and the discriminator may share
# 'masked_lm': a transformers ElectraForMaskedLM trained beside the discriminator, read at the masked positions;
# 'two_tower': Electric's two-tower cloze model over the UNmasked input (one left-to-right and one right-to-left
# transformer, official `TwoTowerClozeTransformer`), its loss the cloze loss at every token masking may choose;
# 'frozen': an existing masked LM (`generator`), never trained: no gradient, no optimizer state, no generator loss, its
# sampling temperature annealed (`temperature_start`); 'none': no generator, the discriminator reads the masked input
GENERATOR_KINDS = ('masked_lm', 'two_tower', 'frozen', 'none')
# the discriminator's loss head -> whether it predicts tokens (an MLM head on the discriminator) rather than detecting
# replaced ones (the RTD head's logit per token): 'rtd' replaced-token detection, a sigmoid per token; 'mlm' token
# prediction at the chosen positions; 'copy' every token's identity through the copy gate p(x) = D 1[x = input] +
# (1 - D) softmax(x), D the RTD head's sigmoid. Each head's loss and FLOPs: objective/loss.py DISC_LOSSES,
# objective/flops.py HEAD_FLOPS.
HEADS = {'rtd': False, 'mlm': True, 'copy': True}
# what a discriminator that learnt nothing scores over the positions of its loss, by its head: the baseline beside its
# held-out accuracy (`disc_accuracy_baseline`)
LEARNT_NOTHING = {'rtd': 'always "original"', 'mlm': 'always the most frequent token', 'copy': 'always the input token'}


# the loss curves' panels of a run with a generator: its loss, the discriminator's, the accuracies with P/R and AUC
_CURVES = (('generator MLM loss', ('gen_loss',)), ('discriminator BCE loss', ('disc_loss',)),
           ('accuracies; precision / recall of "replaced"',
            ('gen_accuracy', 'disc_accuracy', 'replaced_precision', 'replaced_recall', 'disc_auc', 'uniform_auc')))


@dataclass(frozen=True)
class Reported:
    """What a run of an objective names in its lines and log (pretrain.py, the metrics and held-out lines, the progress
    bar), read off its row: the two parts of its parameter count (the main network, the whole model), its losses and
    accuracies beside the total (the name printed, the metrics column it reads), the held-out line's name of the main
    accuracy where no "always original" baseline stands beside it, whether it has replacements to show (the
    generator's samples), whether its discriminator detects them (replaced P/R, its verdicts on each token: the RTD
    head alone), and the panels of its loss curves (each a title and the metrics columns drawn in it)."""
    parameters: tuple[str, str]
    losses: tuple[tuple[str, str], ...]
    accuracies: tuple[tuple[str, str], ...]
    held_out_accuracy: str
    replacements: bool
    detection: bool
    curves: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class Objective:
    "One pretraining objective: what it trains, its losses, and the settings it takes."
    name: str
    summary: str             # what it is, in a phrase (`--help`)
    generator: str           # its generator's kind (GENERATOR_KINDS)
    head: str = 'rtd'        # the discriminator's loss head (HEADS)
    positions: str = 'tokens'  # where the discriminator's loss is taken: 'tokens' every real token [B, L]; 'chosen'
                             # the chosen positions as [B, L] (one each, however often chosen); 'slots' as [B, P]
    no_mask_samples: bool = False  # samples are never [MASK] (its logit -inf), so the input holds no [MASK]: the point
                             # of Replace MLM and All-Tokens MLM
    fake: str = 'replaced'   # which tokens the discriminator learns as fake: 'replaced' where the sample differs from
                             # the original; 'masked' every masked position, its sample the noise even when it equals the
                             # original (Electric: noise-contrastive estimation, official `_get_fake_data`)
    noise_log_prob: bool = False  # the discriminator's logit plus the generator's stop-gradient log-probability of
                             # the input token and log(mask_prob / (1 - mask_prob)): Electric's energy-based model
                             # (`electric_logits`; needs the cloze model's probability at every position)
    tie_weights: tuple[str, ...] = TIE_WEIGHTS  # the `tie_weights` it allows
    tie_weights_why: str = ''  # why it allows no other (said when another is given)
    uniform_generator: str = ''  # why the uniform generator cannot stand in for its generator; '' it can
    init_from: str = ''      # why it cannot start from existing weights (`init_from`); '' it can
    two_stage: bool = False  # two-stage training can run it: a masked-LM generator, then the discriminator from it
    paper: str = ''          # the paper of a variant not in the ELECTRA paper, cited on its cards beside ELECTRA's

    def __post_init__(self):
        for key, value, domain in (('generator', self.generator, GENERATOR_KINDS), ('head', self.head, tuple(HEADS)),
                                   ('positions', self.positions, ('tokens', 'chosen', 'slots')),
                                   ('fake', self.fake, ('replaced', 'masked'))):
            if value not in domain: raise ValueError(f'{self.name}: {key} must be one of {domain}, got {value!r}')
        if not set(self.tie_weights) <= set(TIE_WEIGHTS):
            raise ValueError(f'{self.name}: tie_weights must be among {TIE_WEIGHTS}, got {self.tie_weights}')
        if self.noise_log_prob and self.generator != 'two_tower':
            raise ValueError(f'{self.name}: noise_log_prob needs the two-tower generator: a masked LM has no '
                             'probability of every token')

    @property
    def samples(self) -> bool:
        "A generator (or the uniform one) replaces the chosen tokens; False: the discriminator reads the masked input."
        return self.generator != 'none'

    @property
    def mlm(self) -> bool:
        "The discriminator predicts tokens (an MLM head) rather than only whether they were replaced."
        return HEADS[self.head]

    @property
    def reported(self) -> Reported:
        """How its run's lines name what it has. With samples, a generator (or the uniform one) and a discriminator;
        without, one network trained by its head alone (BERT: the body and its MLM head), whose loss and accuracy at
        the masked positions are the discriminator's columns of metrics.csv, and nothing replaced to measure."""
        head = self.head  # 'mlm', 'copy': the name a token-predicting head's loss and accuracy are printed under
        parts = ('discriminator', 'generator + discriminator')
        if self.samples and not self.mlm:
            return Reported(parts, (('gen', 'gen_loss'), ('disc', 'disc_loss')),
                            (('gen_acc', 'gen_accuracy'), ('disc_acc', 'disc_accuracy')), 'main acc', True, True,
                            _CURVES)
        if self.samples:  # Replace MLM, All-Tokens MLM: replaced tokens, which the discriminator's head predicts back
            return Reported(parts, (('gen', 'gen_loss'), (f'disc {head}', 'disc_loss')),
                            (('gen_acc', 'gen_accuracy'), (f'disc_{head}_acc', 'disc_accuracy')), f'disc {head} acc',
                            True, False, (_CURVES[0], (f'discriminator {head.upper()} loss', ('disc_loss',)),
                                          (f"accuracies: the generator's, the discriminator {head.upper()} head's",
                                           ('gen_accuracy', 'disc_accuracy'))))
        return Reported(('the network', f'the network + its {head.upper()} head'), ((head, 'disc_loss'),),
                        ((f'{head}_acc', 'disc_accuracy'),), f'{head} acc', False, False,
                        ((f'{head.upper()} loss', ('disc_loss',)),
                         (f'{head.upper()} accuracy at the masked positions', ('disc_accuracy',))))

    @property
    def exports_generator(self) -> bool:
        """Its generator is a masked LM it trains (kind 'masked_lm'), a transformers `ElectraForMaskedLM` that the export
        writes and `init_from` reads: Electric's two towers have no transformers class, a frozen generator is an
        existing model the run did not train, and BERT has none."""
        return self.generator == 'masked_lm'

    @property
    def head_alone(self) -> str:
        """What the discriminator's replaced-token-detection head gives read alone (an exported
        `ElectraForPreTraining`'s logits): '' the run's own replaced-token detection (its sigmoid the run's
        p(replaced)); else, in a clause, what it is instead, for a reader of the head to say."""
        if self.head == 'mlm': return 'its replaced-token-detection head had no part in its loss: it scores nothing'
        if self.head == 'copy':
            return ("its head is the copy gate: the sigmoid is the weight of keeping the input token (high where the "
                    "token looks original), not p(replaced)")
        if self.noise_log_prob:
            return ("its head gives Electric's energy alone: the run's p(replaced) adds the cloze model's log q(x_t | "
                    "context) and log(mask_prob / (1 - mask_prob))")
        return ''

    @property
    def exports_cloze(self) -> bool:
        """Its discriminator's score needs the cloze model's probability of each token (`noise_log_prob`): the export
        writes the two-tower cloze model beside the discriminator (`cloze/`), so that the run's scores of a text can be
        computed from the export (electra/pretrained/electric.py); the discriminator's head alone gives the energy."""
        return self.noise_log_prob


_NO_GENERATOR = 'has no generator network'
ROWS = (
    Objective('electra', 'replaced-token detection over every token', 'masked_lm', two_stage=True),
    Objective('electra_15', 'its loss over the masked positions only', 'masked_lm', positions='chosen', two_stage=True),
    Objective('mlm', 'BERT, one network trained by masked language modelling alone', 'none', head='mlm',
              positions='slots', tie_weights=('none', 'embeddings'), tie_weights_why=f"the 'mlm' objective (BERT) "
              f"{_NO_GENERATOR}", uniform_generator="the 'mlm' objective (BERT) has no generator to replace"),
    Objective('replace_mlm', 'MLM on input whose masked positions hold generator samples', 'masked_lm', head='mlm',
              positions='slots', no_mask_samples=True),
    Objective('all_tokens_mlm', "generator samples as input, every token's identity predicted, with a sigmoid copy "
              'gate', 'masked_lm', head='copy', no_mask_samples=True),
    Objective('electric', 'Electric, a two-tower cloze generator and an energy-based discriminator (Clark et al., '
              '2020)', 'two_tower', fake='masked', noise_log_prob=True, tie_weights=('embeddings', 'none'),
              tie_weights_why="Electric's two-tower cloze generator shares the embeddings with the discriminator or "
                              "nothing (official `untied_generator_embeddings`)",
              uniform_generator="Electric's discriminator needs the cloze generator's probabilities",
              init_from="Electric's two-tower cloze generator has no counterpart in ELECTRA weights (a masked LM): "
                        "start it fresh, without --init_from",
              paper='Clark, Luong, Le and Manning, "Pre-Training Transformers as Energy-Based Cloze Models", EMNLP '
                    '2020'),
    Objective('fast_electra', 'Fast-ELECTRA, an existing masked LM as a frozen generator, its sampling temperature '
              'annealed (Dong et al., ICLR 2024)', 'frozen', tie_weights=('none',),
              tie_weights_why='the frozen generator is an existing model: it shares no weights',
              uniform_generator='the frozen generator samples the replacements',
              init_from='a fast_electra run starts its discriminator fresh (continuing from weights with a frozen '
                        'generator is not supported): leave it empty',
              paper='Dong, Liu, Cheng, Shang, Gao and Liu, "Fast-ELECTRA for Efficient Pre-training", ICLR 2024'),
)
OBJECTIVES: dict[str, Objective] = {row.name: row for row in ROWS}


def names_where(test) -> str:
    "The names of the rows for which `test(row)` holds, joined by 'or' (for help texts and messages)."
    return ' or '.join(o.name for o in OBJECTIVES.values() if test(o))
