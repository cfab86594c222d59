"The pretraining job's config: every key `pretrain.py` takes, with the paper's small-model recipe as defaults."
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from electra.config.errors import ConfigError, RunWarning, need
from electra.config.fields import DIST_TIMEOUT_MAX, SEED_END, choice_field, field
from electra.config.file_names import safe_name
from electra.config.objectives import OBJECTIVES, TIE_WEIGHTS, names_where
from electra.config.paths import Owned, check_apart, check_case_apart, local_paths, path
from electra.config.shared_keys import TRACKER_KEYS, check_logger, optimizer_keys, threads_field, tracker_keys
from electra.config.values import CheckedConfig, config_from_dict, typed_keys, value_sources

__all__ = ['FORMATS', 'PretrainConfig', 'CHECKPOINT_FRACTIONS', 'RESUME_SAME', 'RESUME_SAID', 'generator_shape',
           'RESUME_CONTENT', 'TOKENIZER_KEYS', 'RESUME_FREE', 'saved_config', 'percent', 'corpus_name']

FORMATS = ['auto', 'lines', 'documents', 'paragraphs']  # how text files are read: see `corpus_format`

CHECKPOINT_FRACTIONS = [0.0625, 0.125, 0.25, 0.5, 1.0]

# Every key by what a resumed run (--resume) does when its value differs from the checkpoint's (training/checkpoint.py
# `check_resume_compatible`); each key is in exactly one of these four (tests/config/test_pretrain.py).
# Refused, naming the key, both values and the fix: they change the model's shapes, the examples and their order, the
# objective or the optimisation, so the run would not go on as it began.
RESUME_SAME = ('run_name', 'seed', 'corpus_format', 'sentence_split', 'text_column', 'hub_split', 'min_line_chars',
               'remove_empty_parens', 'max_sentence_chars', 'corpus_weights', 'eval_examples', 'max_length',
               'hidden_size', 'num_hidden_layers', 'num_attention_heads', 'intermediate_size', 'embedding_size',
               'generator_size', 'max_position_embeddings', 'tie_weights', 'dropout', 'mask_prob', 'init', 'mask_mode',
               'mask_token_prob', 'random_token_prob', 'mask_unk', 'temperature', 'disallow_correct',
               'uniform_generator', 'generator', 'temperature_start', 'temperature_schedule', 'objective', 'two_stage',
               'two_stage_schedule', 'gen_loss_weight', 'disc_loss_weight', 'batch_size', 'warmup_steps', 'schedule',
               'decay_power', 'weight_decay', 'adam_beta1', 'adam_beta2', 'adam_eps', 'clip_grad', 'loss_mean',
               'pad_vocab_multiple', 'random_draws')
# Allowed and said in one line: more (or fewer) steps, the schedule stretched to them; a lower learning rate after a
# divergence (what the divergence message advises); another precision (a resume on another machine); `init_from`,
# which only chooses a new run's first weights (a resumed run continues from its checkpoint's): another path of the
# weights a run began from (moved). None given to a run that began from weights is the checkpoint's, one given to a run
# that began from scratch is refused (`PretrainConfig.resume_start`).
# `init_max_length` goes with `init_from`: a resume takes its checkpoint's (`resume_start`).
RESUME_SAID = ('steps', 'lr', 'precision', 'init_from', 'init_max_length')
# Compared by content, not by the key: the corpus by the examples built from it (a corpus moved or touched is the same
# one, a file edited in place is not; `deduplicate` by the examples it leaves, so a checkpoint older than the key
# resumes where its corpus repeats nothing), the tokenizer by its files (`vocab_size`, `lowercase` and `strip_accents`
# shape it when it is trained on the corpus).
RESUME_CONTENT = ('corpus', 'deduplicate', 'tokenizer', 'vocab_size', 'lowercase', 'strip_accents')
TOKENIZER_KEYS = ('vocab_size', 'lowercase', 'strip_accents')  # what shapes a tokenizer trained on the corpus
# Free: where and how the run runs, what it logs, none of what it trains (float rounding aside).
RESUME_FREE = ('config', 'output_dir', 'cache_dir', 'resume', 'overwrite', 'device', 'threads', *TRACKER_KEYS,
               'log_every', 'checkpoint_at', 'num_workers', 'num_proc', 'grad_accum_steps',
               'dist_timeout', 'compile', 'compile_mode', 'compile_scope')


def corpus_name(entry: str) -> bool:
    "Whether a `corpus` entry is a name rather than a path: 'demo' (the built-in corpus) or a hub data set, hub:<name>."
    return entry == 'demo' or entry.startswith('hub:')


# what a tokenizer does to its input, in words, by the key and what it does (`PretrainConfig.follow_tokenizer`)
_TOKENIZER_DOES = {'lowercase': {True: "lower-cases its input ('A' becomes 'a')",
                                 False: "keeps the case of its input ('A' stays 'A')"},
                   'strip_accents': {True: "strips accents ('é' becomes 'e')",
                                     False: "keeps accents ('é' stays 'é')"}}


@dataclass
@optimizer_keys(after='warmup_steps', weight_decay=0.01,
                weight_decay_help='decoupled weight decay (not on LayerNorm weights or biases)')
@tracker_keys(after='threads', tensorboard="the run's tensorboard/ folder", runs='',
              group='run_name (a comparison sets its name)', tags='',
              artifacts='the export (the discriminator and the generator, each with its model card)')
class PretrainConfig(CheckedConfig):
    # the shipped presets `--config NAME` reads (`cli.load_config`, from Python too; not a key: unannotated)
    PRESETS = 'configs/pretrain'
    # -- job
    config: str = field('demo', 'preset name in configs/pretrain/ or a path to a YAML file')
    run_name: str = field('vanilla', 'name of the run; checkpoints are <run_name>_<seed>_<percent>.pth')
    seed: int = field(11081, 'random seed for data order, masking, sampling and initialisation', ge=0, lt=SEED_END)
    output_dir: path = field('checkpoints/pretrain', 'where checkpoints, metrics and the exported models go', writes=True)
    cache_dir: path = field('cache', 'where built datasets (Arrow) and the demo corpus are cached', writes=True)
    resume: bool = field(False, 'continue from the latest checkpoint of this run_name and seed')
    overwrite: bool = field(False, 'start over even if this run_name and seed already have checkpoints')
    device: str = field('auto', "'auto' (cuda if available), 'cpu', 'cuda' or 'cuda:N'")
    precision: str = choice_field('auto', ['auto', 'fp32', 'bf16', 'fp16'], 'auto: bf16 on GPUs that have it, else fp16 on GPU; fp32 on CPU')
    threads: int | str = threads_field()
    log_every: int = field(100, 'write a metrics row (and read metrics off the device) every N steps', gt=0)
    checkpoint_at: list[float] = field(CHECKPOINT_FRACTIONS, 'fractions of `steps` at which to save a checkpoint', gt=0,
                                       le=1, empty='no checkpoints, only the export at the end')
    num_workers: int = field(0, 'DataLoader worker processes', ge=0, zero='batches are loaded in the main process')
    # -- data
    corpus: list[path] = field(['demo'], "corpora, one per entry: a text file or a directory of them (read as "
                                        "`corpus_format` says), 'demo' (the built-in sample corpus), local table files "
                                        "(.parquet, .jsonl/.json, .csv/.tsv, .arrow, or a directory of them) or a Hugging Face hub "
                                        "dataset hub:<name>[:<config>], e.g. hub:openwebtext, "
                                        "hub:wikimedia/wikipedia:20231101.en, hub:bookcorpus", min_items=1,
                                   names=corpus_name)
    corpus_format: str = choice_field('auto', FORMATS, "how text files are read: 'lines' = the official layout (one "
                                  "sentence per line, a blank line between documents); 'documents' = one document per "
                                  "file, blank lines are paragraph breaks (OpenWebText); 'paragraphs' = one document per "
                                  "non-blank line; 'auto' = per file: 'lines' if blank lines separate text (so a folder of "
                                  "raw documents with blank lines between paragraphs, like OpenWebText, needs "
                                  "'documents'), else 'documents' inside a directory and 'paragraphs' for a file given "
                                  "by itself. Table "
                                  "rows are documents ('auto': lines of one stream when rows are single sentences)")
    sentence_split: str = field('auto', "split lines into sentences with spaCy's rule-based sentencizer for this "
                                        "language (en, de, ...; no model download) or 'none'; 'auto' = 'en' for raw "
                                        "documents, paragraphs and tables, and for 'lines' files whose lines are "
                                        "paragraph-long (median over 200 characters), except that a line written "
                                        "without spaces (half its characters Han, kana, Thai, ...: Chinese, Japanese) "
                                        "is split at its 。！？ by rule, no extra package needed")
    text_column: str = field('text', 'text column of table and hub corpora (a table with one string column uses it)')
    hub_split: str = field('train', "split of hub datasets, with the datasets slicing syntax, e.g. 'train[:10%]'")
    min_line_chars: int = field(0, 'drop lines (paragraphs) shorter than this; 80 is the fastai replication\'s '
                                   'cleaning of Wikipedia and OpenWebText (with remove_empty_parens)', ge=0,
                                zero='keep every line')
    remove_empty_parens: bool = field(False, "delete '()' left where links were stripped (the replication's cleaning)")
    max_sentence_chars: int = field(10_000, 'skip (and count) sentences longer than this: minified code, tables, '
                                            'encoded blobs; lines over 1 MiB are always skipped', gt=0)
    deduplicate: bool = field(True, "drop text read before, ahead of the held-out split: a file reached twice (a link, "
                                    "an entry naming it again) or copied, and a document (blank-line separated; a "
                                    "table's row) repeating an earlier one's text; counted in one line. false: every "
                                    "copy is trained on, as the official code does")
    corpus_weights: list[float] = field([], 'mix the corpora with these weights (one per corpus entry)', gt=0,
                                        empty='concatenate the corpora, every example equally likely')
    num_proc: int = field(0, 'processes building the examples; the examples do not depend on it', ge=0,
                          zero='one per CPU core')
    eval_examples: int = field(256, 'examples held out (never trained on) to evaluate generator MLM accuracy, '
                                    'discriminator accuracy and AUC every log_every steps', ge=0,
                               zero='no held-out evaluation')
    tokenizer: path = field('', "a WordPiece vocab.txt or an HF tokenizer directory; empty: train one on the corpus")
    init_from: path = field('', "continue pretraining from these weights (and their tokenizer): a hub name such as "
                               "google/electra-small-discriminator (its -generator too), a directory with generator/ "
                               "and discriminator/ (an export, a converted TF checkpoint), GENERATOR,DISCRIMINATOR, or a "
                               "pretrain.py .pth; the optimizer and step start fresh. Empty: a fresh initialisation")
    init_max_length: int = field(0, "the max_length init_from's weights were pretrained at (their discriminator's "
                                    "`pretraining_max_length`), recorded by the run from them: the length its position "
                                    "rows were trained at is the longer of it and max_length", ge=0,
                                 zero="none recorded: a fresh initialisation, or weights that do not say (the length "
                                      "is then unknown)")
    vocab_size: int = field(30522, 'vocabulary size of a tokenizer trained on the corpus', ge=100)
    lowercase: bool = field(True, 'lowercase text (uncased model) when training a tokenizer or reading a vocab.txt (a '
                                  "folder or init_from's tokenizer does what it does, recorded here, a typed value it "
                                  'contradicts refused); a vocabulary of another case is refused')
    strip_accents: bool = field(False, "also drop combining marks when training a tokenizer, as BERT's uncased rule "
                                       "does with lowercase (google-research/bert tokenization.py `_run_strip_accents`): "
                                       "cafe = cafe with an accent in English, but in other scripts the marks are "
                                       "letters (Devanagari vowel signs, Japanese dakuten, Arabic hamza) and words "
                                       "merge; false keeps them (docs/fidelity.md). A vocab.txt: as typed, else BERT's "
                                       "rule; a folder or init_from: what its tokenizer does, recorded here")
    max_length: int = field(128, 'tokens per example, [CLS] and [SEP] included', ge=8)
    # -- model (the paper's Table 6; configure_pretraining.py); the presets fill these in
    hidden_size: int = field(256, 'discriminator hidden size', gt=0)
    num_hidden_layers: int = field(12, 'layers of both discriminator and generator', gt=0)
    num_attention_heads: int = field(4, 'discriminator attention heads', gt=0)
    intermediate_size: int = field(1024, 'discriminator feed-forward size', gt=0)
    embedding_size: int = field(128, 'embedding size (projected to hidden_size when different)', gt=0)
    generator_size: float = field(0.25, 'generator hidden size as a fraction of the discriminator; its FFN is 4 x '
                                        'that, its heads max(1, hidden // 64)', gt=0, le=1)
    max_position_embeddings: int = field(512, 'position embeddings of both networks', ge=8)
    tie_weights: str = choice_field('embeddings', list(TIE_WEIGHTS),
                                    "share nothing, the embeddings (paper default), all weights (same-size generator "
                                    "only), or 'gdes': DeBERTaV3's gradient-disentangled embedding sharing (the "
                                    "discriminator's tables = the generator's, without gradient, + its own residual)")
    dropout: float = field(0.1, 'hidden and attention dropout of both networks', ge=0, lt=1)
    # -- masking (pretrain/pretrain_helpers.py `mask`)
    mask_prob: float = field(0.15, 'fraction of real tokens chosen for prediction (0.25 for large)', gt=0, lt=1)
    init: str = choice_field('official', ['official', 'hf'],
                             "weight initialisation: 'official' (truncated normal 0.02; glorot uniform for "
                             "embeddings_project and the discriminator's output layer) or 'hf' (transformers' normal 0.02)")
    mask_mode: str = choice_field('fixed', ['fixed', 'with_replacement', 'bernoulli'],
                                  "'fixed': the official count round(n * mask_prob), capped at max_predictions, of distinct "
                                  "positions; 'with_replacement': the official draw exactly, a position may be chosen twice "
                                  "(docs/fidelity.md); 'bernoulli': per-token draw (replication)")
    mask_token_prob: float = field(0.85, 'of chosen positions, the fraction replaced by [MASK]', ge=0, le=1)
    random_token_prob: float = field(0.0, 'of chosen positions, the fraction replaced by a random token (rest keep the '
                                          'original)', ge=0, le=1)
    mask_unk: bool = field(True, 'whether [UNK] may be chosen (the replication never masks [UNK])')
    # -- sampling (run_pretraining.py `_get_fake_data`)
    temperature: float = field(1.0, 'generator sampling temperature (with temperature_start: the one the anneal ends at)',
                               gt=0)
    temperature_start: float = field(0.0, 'sampling temperature at the first step, descending to `temperature` at the '
                                          'last by temperature_schedule (Fast-ELECTRA\'s curriculum: smooth '
                                          'replacements first, the generator\'s own later)', ge=0,
                                     zero='no annealing: `temperature` at every step')
    temperature_schedule: str = choice_field('linear', ['linear', 'cosine', 'exponential'],
                                             "the anneal's shape over p = step / steps: 'linear' (start - end) (1 - p); "
                                             "'cosine' (start - end) (1 + cos(pi p)) / 2, each + end; 'exponential' "
                                             "end (start / end)^(1 - p)")
    generator: path = field('', f"objective {names_where(lambda o: o.generator == 'frozen')}: the existing masked LM "
                                "that generates, frozen (never trained): a hub name (google/electra-small-generator, "
                                "bert-base-uncased) or a local save_pretrained directory of an ElectraForMaskedLM or BertForMaskedLM; its tokenizer "
                                "is the run's", empty='a generator trained with the discriminator (or none)')
    disallow_correct: bool = field(False, "never sample the original token")
    uniform_generator: bool = field(False, 'no generator network and no generator loss: replacements drawn uniformly '
                                           'from the vocabulary (the paper\'s ablation, official `uniform_generator`)')
    # -- objective variants (the paper, section 3.2 and Table 5): docs/objectives.md
    objective: str = choice_field('electra', list(OBJECTIVES),
                                  '; '.join(f"'{o.name}': {o.summary}" for o in OBJECTIVES.values()))
    two_stage: float = field(0.0, 'two-stage training: this fraction of the steps trains the generator alone, then the '
                                  'discriminator, initialised from it, trains with the generator frozen (needs '
                                  'generator_size 1 and tie_weights none)', ge=0, lt=1,
                            zero="joint training, the paper's")
    two_stage_schedule: str = choice_field('run', ['run', 'per_stage'],
                                           "two-stage learning rates: 'run', one schedule over the whole run; "
                                           "'per_stage', each stage scheduled as a run of its own (warm-up of "
                                           "warmup_steps, decay to 0 at the stage's end)")
    # -- loss (run_pretraining.py `PretrainingModel`)
    gen_loss_weight: float = field(1.0, 'weight of the generator MLM loss', ge=0)
    disc_loss_weight: float = field(50.0, "weight of the discriminator loss (lambda); of the discriminator's MLM loss "
                                          "with the MLM objectives", ge=0)
    # -- optimisation (model/optimization.py `create_optimizer`)
    steps: int = field(1_000_000, 'optimizer steps', gt=0)
    batch_size: int = field(128, 'examples per step, the global batch: split evenly over the processes of a torchrun '
                                 'job', gt=0)
    lr: float = field(5e-4, 'peak learning rate', gt=0)
    warmup_steps: int = field(10_000, 'warm-up steps W', ge=0, zero='no warm-up')
    # (here: schedule, decay_power, weight_decay, adam_beta1, adam_beta2, adam_eps, clip_grad: `optimizer_keys`)
    # -- several processes (torchrun): data-parallel, the same results for any number of processes
    loss_mean: str = choice_field('global', ['global', 'per_process'],
                                  "'global': each loss is a mean over the whole global batch, so a step does not depend on "
                                  "how the batch is split; 'per_process': the mean of each process's own mean, as the "
                                  'official TPU code averages per-core losses (differs when processes hold unequal token counts)')
    grad_accum_steps: int = field(1, 'split each process\'s share of the batch into this many micro-batches, run one after '
                                     'another before the optimizer step (less memory, the same step)', ge=1)
    dist_timeout: int = field(1800, 'seconds a process waits for the others (data cache, checkpoints) before it '
                                    'stops the job', gt=0, le=DIST_TIMEOUT_MAX)
    # -- speed; none of these changes the objective
    compile: bool = field(False, 'torch.compile the model and loss (first step compiles; falls back to eager with a '
                                 "one-line warning if compilation fails); with dropout on, inductor's own draw of its "
                                 'masks: another draw of the run (docs/fidelity.md)')
    compile_mode: str = choice_field('default', ['default', 'reduce-overhead', 'max-autotune', 'max-autotune-no-cudagraphs'],
                                     "torch.compile mode with `compile`: 'reduce-overhead' replays the step's graphs as "
                                     'CUDA graphs (GPU), removing the per-kernel launch cost of a small model')
    compile_scope: str = choice_field('auto', ['auto', 'step', 'model'],
                                      "with `compile`: 'step' compiles the whole step (forward, loss, backward, clipping, "
                                      'optimizer) as one graph, one CUDA graph with reduce-overhead (torch >= 2.11; one '
                                      "process, bf16 or fp32, no grad_accum_steps or two_stage); 'model' compiles the model "
                                      "and the loss, the rest staying on the host; 'auto': 'step' where it can run, else "
                                      "'model'")
    random_draws: str = choice_field('generator', ['generator', 'counter'],
                                     "where masking's and the sampling noise's random numbers come from: 'generator', "
                                     "the run's seeded torch.Generator (masking outside the compiled step, the noise "
                                     "drawn beforehand and copied in); 'counter', each draw a pure function of the "
                                     'seed, the step and its place, computed inside the compiled step (no copy, no '
                                     'generator state; other numbers, the same distribution: docs/fidelity.md)')
    pad_vocab_multiple: int = field(0, 'pad the word-embedding rows (and generator vocab) to a multiple of N, e.g. 64 '
                                       'for tensor cores; padded ids are never predicted or sampled, exports are '
                                       'unpadded', ge=0, zero='no padding')

    def validate(self) -> None:
        "The rules that relate several keys (each key's own domain is declared beside it, and checked when read)."
        safe_name(self.run_name, 'run_name')
        self._check_checkpoint_names()
        check_logger(self.logger)
        need(self.max_length <= self.max_position_embeddings, 'max_length',
             f'must be at most max_position_embeddings ({self.max_position_embeddings}), got {self.max_length}.')
        need(self.init_from or not self.init_max_length, 'init_max_length',
             f'is the length the init_from weights were pretrained at, recorded from them; a run without init_from '
             f'has none (got {self.init_max_length}): drop it.')
        self._check_corruption_shares()
        need(self.hidden_size % self.num_attention_heads == 0, 'num_attention_heads',
             f'hidden_size {self.hidden_size} is not divisible by {self.num_attention_heads} heads.')
        self._validate_objective()
        self._vocab_txt_accents()
        need(self.tie_weights != 'all' or self.generator_size == 1, 'tie_weights',
             "'all' needs a generator as large as the discriminator (generator_size: 1.0).")
        need(not self.corpus_weights or len(self.corpus_weights) == len(self.corpus), 'corpus_weights',
             f'give one weight per corpus entry ({len(self.corpus)}), got {len(self.corpus_weights)}; or none to concatenate.')
        need(self.sentence_split == self.sentence_split.strip() and bool(self.sentence_split), 'sentence_split',
             "give 'auto', 'none' or a spaCy language code such as en.")
        self._check_micro_batches()
        if self.warmup_steps >= self.steps:  # warm-up and decay apply together: the peak is never reached
            warnings.warn(f'warmup_steps ({self.warmup_steps}) is not shorter than the run ({self.steps} steps): the '
                          f'learning rate never reaches lr ({self.lr:g}); lower --warmup_steps (the small recipe warms '
                          'up for 1% of its steps).', RunWarning, stacklevel=2)
        if self.compile and self.compile_scope == 'step':  # asked for: the step in one graph has no host events inside
            need(self.grad_accum_steps == 1 and self.two_stage == 0, 'compile_scope',
                 "'step' compiles one forward, backward and update per step: it cannot accumulate micro-batches "
                 '(grad_accum_steps) or switch networks mid-run (two_stage). Use --compile_scope model.')
            need(self.precision != 'fp16', 'compile_scope', "'step' runs bf16 or fp32; fp16 needs loss scaling, which "
                                                            'skips steps on the host. Use --precision bf16, or --compile_scope model.')

    def _vocab_txt_accents(self) -> None:
        """A vocab.txt `tokenizer` has no setting of its own: a typed `strip_accents` is applied to it, otherwise BERT's
        rule (google-research/bert tokenization.py `BasicTokenizer`: accents stripped with lowercasing), which is then
        the value recorded (config.yaml, model card, trackers)."""
        if not self.tokenizer or 'strip_accents' in typed_keys(self): return
        if Path(self.tokenizer).expanduser().is_file():
            self._record('strip_accents', self.lowercase,
                         "BERT's rule for a vocab.txt (accents stripped with lowercase)")

    def follow_tokenizer(self, applied: dict[str, bool], where: str, size: int) -> None:
        """Record what the run's own tokenizer (`where`: the one given, or that of the weights it starts from) does to
        its input (`applied`: `electra.data.tokenizer.applied_case`, tried on probes) as `lowercase` and
        `strip_accents`, and its `size` (tokens) as `vocab_size`, so that config.yaml, the model card and the trackers
        say what the run did: a typed value it contradicts is refused in one line; a case or accent rule from a file
        (a preset, an older run's config) replaced, with a warning; a size from a file or the default replaced in
        silence (vocab_size sizes a tokenizer trained on the corpus, which this run does not train)."""
        if 'vocab_size' in typed_keys(self):
            need(self.vocab_size == size, 'vocab_size', f"{self.vocab_size} ({value_sources(self)['vocab_size']}) "
                                                        f"contradicts {where}, which has {size} tokens: vocab_size "
                                                        "sizes a tokenizer trained on the corpus, and this run trains "
                                                        "none. Drop --vocab_size.")
        else: self._set_recorded('vocab_size', size, f'{where}: its size ({size} tokens)')
        for key, does in applied.items():
            what = _TOKENIZER_DOES[key][does]
            if key in typed_keys(self):
                need(getattr(self, key) == does, key, f"{str(getattr(self, key)).lower()} ({value_sources(self)[key]}) "
                                                      f"contradicts {where}, which {what}. Drop --{key}, or give a "
                                                      "tokenizer that does what you ask.")
            else: self._record(key, does, f'what {where} does: it {what}', f'{where}: what it does to its input')

    def follow_init_length(self, trained: int | None, where: str) -> None:
        """Record `trained`, the length the weights of `where` (init_from) were pretrained at (None: they do not say),
        as `init_max_length`: their position rows past this run's max_length were trained there, not left at their
        initial values (`trained_length`). A config that does not name them (weights checked against it in Python)
        records nothing: its run is not theirs."""
        if self.init_from: self._record('init_max_length', trained or 0, f'the length {where} was pretrained at',
                     f'{where}: its pretraining_max_length')

    def trained_length(self) -> int | None:
        """The length the run's position rows are trained at: its max_length, or the longer of it and that of the
        weights it continues (`init_max_length`); None when those weights do not say (rows past max_length may or may
        not have been trained)."""
        if self.init_from and not self.init_max_length: return None
        return max(self.max_length, self.init_max_length)

    def resume_start(self, began_from: str, checkpoint, run: str, init_max_length: int = 0) -> str:
        """A resume of run `run` goes on from its checkpoint's weights: `init_from` chooses only a new run's first
        weights (pretrain.py loads them at step 0 alone). `began_from` is the init_from its `checkpoint` records. A run
        begun from a fresh initialisation given one is refused (config.yaml and the card would say the run continued
        from weights it never had); a run begun from weights takes the checkpoint's when none is given, and its
        tokenizer is theirs, kept in the checkpoint (the README: such a run "continues from its own checkpoints").
        `init_max_length`, the length those weights were pretrained at, as the checkpoint records it, is taken too.
        The line that says so, or ''."""
        need(began_from or not self.init_from, 'init_from',
             f"run {run} began from a fresh initialisation (its checkpoint {checkpoint} records no init_from), and a "
             f"resume goes on from the run's own weights, never {self.init_from}'s. Drop --init_from to continue the "
             f"run, or start a run from {self.init_from} with another --run_name NAME.")
        if not began_from: return ''
        self._set_recorded('init_max_length', init_max_length)  # from the weights at the run's start, never given again
        need(not self.tokenizer, 'tokenizer', f"run {run} began from the weights of {began_from}, and goes on with "
                                              "their tokenizer, kept in its checkpoint: drop --tokenizer to continue it.")
        if self.init_from: return ''  # the same, or the same weights moved: said with the other changes on resume
        self._set_recorded('init_from', began_from, f'its checkpoint {checkpoint}')
        return (f"resume: run {run} began from the weights of {began_from} (init_from in its checkpoint {checkpoint}): "
                "it goes on from its own checkpoint, with its tokenizer.")

    def resume_trackers(self, saved: dict, checkpoint) -> None:
        """A resume that gives no `tracking_group` or `tracking_tags` goes on in the group and with the tags its
        `checkpoint` records (`saved`), as its tracked runs began: the defaults (the run's name, no tags) moved W&B's
        run to another group at every plain resume of a run begun with one. A value given replaces them."""
        given = value_sources(self)
        for key in ('tracking_group', 'tracking_tags'):
            if saved.get(key) and given[key] == 'default':
                self._set_recorded(key, saved[key], f'its checkpoint {checkpoint}')

    def _record(self, key: str, value: bool, by: str, source: str = '') -> None:
        "`key` set to `value`, the one `by` applies, sourced to it; a file's value it replaces is said in a warning"
        place = value_sources(self)[key]
        if getattr(self, key) != value and place != 'default':
            warnings.warn(f"{key}: {str(getattr(self, key)).lower()} ({place}) is replaced by {by}.", RunWarning,
                          stacklevel=3)
        self._set_recorded(key, value, source or by)

    def _check_checkpoint_names(self) -> None:
        "Each fraction of `checkpoint_at` once, and each its own file: `<run>_<seed>_<percent>%.pth` (`percent`)."
        seen: dict[str, float] = {}
        for f in self.checkpoint_at:
            first = seen.setdefault(percent(f), f)
            need(first == f, 'checkpoint_at', f"{first} and {f} are one checkpoint file (<run_name>_<seed>_"
                                              f"{percent(f)}%.pth); give fractions that differ in their first six digits.")
        twice = next((f for i, f in enumerate(self.checkpoint_at) if f in self.checkpoint_at[:i]), None)
        need(twice is None, 'checkpoint_at', f'{twice} is listed twice; list each fraction once.')

    def _check_generator_heads(self) -> None:
        "The generator's derived hidden size divides by its derived heads (`generator_shape`), as attention needs."
        hidden, heads = generator_shape(self.hidden_size, self.num_attention_heads, self.generator_size)
        if hidden % heads == 0: return
        fits = [h for h in range(max(1, hidden - 64), min(hidden + 64, self.hidden_size)) if h % _heads(h) == 0]
        near = sorted(sorted(fits, key=lambda h: abs(h - hidden))[:2])  # the two closest, smaller first
        sizes = ' or '.join(f'{_size_for(h, self.hidden_size)} (hidden {h})' for h in near)
        need(False, 'generator_size', f"{self.generator_size:g} of hidden_size {self.hidden_size} makes a generator of "
                                      f"hidden size {hidden} with {heads} heads (max(1, hidden // 64), the official "
                                      f"get_generator_config), and {hidden} is not divisible by {heads}. Give "
                                      f"generator_size {sizes}.")

    def _say_unread(self) -> None:
        """Each typed key the objective does not read (`--config bert --generator_size 0.5`) said in a warning: the run
        goes on (one set of flags shared by runs of several objectives is common), its record keeps the value given."""
        row = OBJECTIVES[self.objective]
        unread = {}
        if self.uniform_generator:
            unread = {**dict.fromkeys(('generator_size', 'gen_loss_weight'), 'the uniform generator is no network'),
                      'temperature': "the uniform generator's draws are uniform at any temperature"}
        elif row.generator in ('frozen', 'none'):
            what = 'a frozen generator of its own, never trained' if row.generator == 'frozen' else 'no generator network'
            unread = dict.fromkeys(('generator_size', 'gen_loss_weight'), f"objective '{row.name}' has {what}")
        if not row.samples:
            unread.update(dict.fromkeys(('temperature', 'disallow_correct'),
                                        f"objective '{row.name}' samples no replacements"))
        for key in (k for k in unread if k in typed_keys(self)):
            value = getattr(self, key)
            shown = str(value).lower() if isinstance(value, bool) else f'{value:g}'
            warnings.warn(f"{key} {shown} ({value_sources(self)[key]}) has no effect: {unread[key]}.", RunWarning,
                          stacklevel=2)

    def _check_corruption_shares(self) -> None:
        """mask_token_prob + random_token_prob at most 1 (the rest of the chosen tokens are kept), else one line blaming
        the key typed alone (`--random_token_prob 0.3` blamed the default mask_token_prob), with both values, their
        sources and the value of the other that fits."""
        total = self.mask_token_prob + self.random_token_prob
        if total <= 1: return
        typed, sources = typed_keys(self), value_sources(self)
        blamed, other = (('random_token_prob', 'mask_token_prob') if 'random_token_prob' in typed
                         and 'mask_token_prob' not in typed else ('mask_token_prob', 'random_token_prob'))
        fits = round(1 - getattr(self, blamed), 6)
        raise ConfigError(f"{blamed}: {getattr(self, blamed):g} ({sources[blamed]}) with {other} {getattr(self, other):g} "
                          f"({sources[other]}) makes {round(total, 6):g} of the chosen tokens: the two must sum to at "
                          f"most 1 (the rest are kept). Lower {other} to {fits:g} or less (BERT's corruption: "
                          f"--mask_token_prob 0.8 --random_token_prob 0.1).")

    def _check_micro_batches(self) -> None:
        "grad_accum_steps dividing batch_size (equal micro-batches), else one line naming the values that would."
        k, b = self.grad_accum_steps, self.batch_size
        if b % k == 0: return
        ks = [d for d in (max((d for d in range(1, k) if b % d == 0), default=None),
                          min((d for d in range(k + 1, b + 1) if b % d == 0), default=None)) if d]
        bs = [n for n in (b // k * k, b // k * k + k) if n]
        sources = value_sources(self)
        raise ConfigError(f"grad_accum_steps: {k} ({sources['grad_accum_steps']}) does not divide batch_size {b} "
                          f"({sources['batch_size']}): every micro-batch takes the same rows. Use grad_accum_steps "
                          f"{' or '.join(map(str, ks))}, or batch_size {' or '.join(map(str, bs))}.")

    def _validate_objective(self) -> None:
        "The settings the objective's row (config/objectives.py) allows."
        row = OBJECTIVES[self.objective]
        self._say_unread()
        self._validate_frozen_generator()
        if row.uniform_generator:
            need(not self.uniform_generator, 'uniform_generator', f'{row.uniform_generator}: drop --uniform_generator.')
        need(row.samples or self.temperature_start == 0, 'temperature_start',
             f"objective '{row.name}' samples nothing to anneal: set temperature_start 0.")
        has_generator = row.samples and not self.uniform_generator  # a generator network
        need(has_generator or self.tie_weights not in ('all', 'gdes'), 'tie_weights',
             f"'{self.tie_weights}' shares the generator's weights, and this objective has no generator network: "
             "use 'embeddings' or 'none'.")
        need(self.tie_weights in row.tie_weights, 'tie_weights',
             f"'{self.tie_weights}': {row.tie_weights_why}: use {' or '.join(map(repr, row.tie_weights))}.")
        if row.init_from: need(not self.init_from, 'init_from', f'{row.init_from}.')
        if row.generator in ('masked_lm', 'two_tower') and not self.uniform_generator: self._check_generator_heads()
        if self.two_stage > 0:
            need(row.two_stage and has_generator, 'two_stage',
                 'two-stage training trains a generator and then a discriminator: it needs the '
                 f"{names_where(lambda o: o.two_stage)} objective and a generator network.")
            need(self.generator_size == 1 and self.tie_weights == 'none', 'two_stage',
                 'the discriminator starts from the generator\'s weights: set generator_size 1.0 and tie_weights none '
                 '(the paper, section 3.2).')
            need(0 < self.two_stage_switch < self.steps, 'two_stage',
                 f'{self.two_stage} of {self.steps} steps leaves a stage without steps: give more steps.')
        need(self.two_stage_schedule == 'run' or self.two_stage > 0, 'two_stage_schedule',
             "'per_stage' schedules the stages of two-stage training: set two_stage too.")
        if self.two_stage_schedule == 'per_stage':
            stage = min(self.two_stage_switch, self.steps - self.two_stage_switch)
            need(self.warmup_steps < stage, 'warmup_steps', f'each stage warms up for warmup_steps ({self.warmup_steps}) '
                                                            f'but the shorter stage has {stage} steps.')

    def _validate_frozen_generator(self) -> None:
        "`generator` names the existing masked LM of an objective whose generator is frozen, and only of one."
        frozen = OBJECTIVES[self.objective].generator == 'frozen'
        takers = names_where(lambda o: o.generator == 'frozen')
        need(frozen == bool(self.generator), 'generator',
             f"objective {self.objective} samples from an existing masked LM: give it with --generator NAME_OR_DIR "
             f"(--config {self.objective} sets the rest)" if frozen else
             f"an existing, frozen generator is objective {takers}'s; objective '{self.objective}' trains its own "
             f"or has none: set --objective {takers}, or leave generator empty.")

    def inputs(self) -> list[tuple[str, str]]:
        "(key, path) of every local file and folder the run reads: corpora, tokenizer, init_from, generator."
        corpora = [c for c in self.corpus if not corpus_name(c)]
        return [*local_paths('corpus', corpora), *local_paths('tokenizer', [self.tokenizer]),
                *local_paths('init_from', [s.strip() for s in self.init_from.split(',')]),
                *local_paths('generator', [self.generator])]

    def check_folders(self) -> None:
        """The folders the run writes apart from what it reads (config/paths.py): output_dir and cache_dir outside its
        inputs; no input in its own run folder or among its checkpoints. Another run's export under the same
        output_dir is an input like any other (continued pretraining, the README's --init_from)."""
        run = f'{self.run_name}_{self.seed}'
        owns = [Owned('output_dir', Path(self.output_dir) / run, '--run_name'),
                Owned('output_dir', self.output_dir, '--run_name', f'{run}_*%*.pth')]
        check_apart([('output_dir', self.output_dir), ('cache_dir', self.cache_dir)], owns, self.inputs())
        check_case_apart('run_name', self.output_dir, run, 'run', lambda twin: twin.rsplit('_', 1)[0])

    @property
    def two_stage_switch(self) -> int:
        "The step after which two-stage training switches from the generator to the discriminator (0: joint training)."
        return round(self.two_stage * self.steps)


def generator_shape(hidden_size: int, num_attention_heads: int, generator_size: float) -> tuple[int, int]:
    """The generator's (hidden size, heads) for a discriminator of `hidden_size` and `num_attention_heads`: hidden
    round(hidden_size x generator_size), heads max(1, hidden // 64) (google-research/electra run_pretraining.py
    `get_generator_config`); a full-size generator keeps the discriminator's own (small++)."""
    if generator_size == 1.0: return hidden_size, num_attention_heads
    hidden = round(hidden_size * generator_size)
    return hidden, _heads(hidden)


def _heads(hidden: int) -> int:
    "A derived generator's attention heads: one per 64 of its hidden size, at least one (`get_generator_config`)."
    return max(1, hidden // 64)


def _size_for(hidden: int, hidden_size: int) -> str:
    "The shortest decimal generator_size whose generator has `hidden` (round(hidden_size x it) == hidden)."
    return next(text for digits in range(1, 12) if round(hidden_size * float(text := f'{hidden / hidden_size:.{digits}g}'))
                == hidden)


def percent(fraction: float) -> str:
    "How a checkpoint's fraction of the run names its file: '12.5' for 0.125 (six significant digits)."
    return f'{fraction * 100:g}'


def saved_config(values: dict, source: str) -> PretrainConfig:
    """The config a run was saved with (a checkpoint's), checked as any config. Its warnings about that run's own
    settings (a warm-up as long as the run) were given when it ran; whoever loads its weights is not told again."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RunWarning)
        return config_from_dict(PretrainConfig, values, source=source)
