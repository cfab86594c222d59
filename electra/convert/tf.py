"""An official ELECTRA TensorFlow checkpoint (google-research/electra: the released electra_small/base/large archives,
or what its run_pretraining.py writes) as this library's models, without TensorFlow.

Variable scopes of the official graph (run_pretraining.py `PretrainingModel`, model/modeling.py `BertModel`):

    electra/embeddings/{word,position,token_type}_embeddings, LayerNorm/{gamma,beta}   the discriminator's embeddings
    electra/embeddings_project/{kernel,bias}          only when embedding size != hidden size
    electra/encoder/layer_K/...                       the discriminator's transformer
    discriminator_predictions/dense{,_1}/{kernel,bias} its replaced-token head (hidden -> hidden -> 1)
    generator/...                                     the generator's transformer (`untied_generator`, the default);
                                                      its embeddings are electra/embeddings (shared) or, with
                                                      `untied_generator_embeddings`, generator/embeddings
    generator_predictions/{dense,LayerNorm,output_bias} the MLM head; its output matrix is the embedding table
    */adam_m, */adam_v, global_step                    optimizer state (model/optimization.py): skipped
    generator_ltr/..., generator_rtl/..., cloze_predictions/...   Electric's two-tower cloze generator
                                                      (`electric_objective`): no transformers counterpart, written
                                                      to cloze/ as an Electric run's export writes it (its score
                                                      needs it); the discriminator converts as ELECTRA's

Every size comes from the tensor shapes. Attention heads are not in any shape: they come from the official
run_pretraining.py hparams when given (`hparams`), else from the official rule, max(1, hidden // 64), which
util/training_utils.py `get_bert_config` applies to the discriminator and run_pretraining.py `get_generator_config`
to the generator (that rule gives the released models' 4 / 12 / 16 heads, and 4 for every released generator).
"""
from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

from electra.config.errors import ConfigError
from electra.config.paths import Owned, check_apart, local_paths
from electra.config.text_files import load_json
from electra.config.version import __version__
from electra.convert.card import write_conversion_card
from electra.convert.tf_checkpoint import STRING, TFCheckpoint, resolve_prefix
from electra.data.tokenizer import CaseSetting, load_tokenizer, save_exported_tokenizer, vocab_entries
from electra.objective.model import TwoTowerClozeGenerator
from electra.pretrained.export import load_cloze, save_cloze, save_model
from electra.pretraining.init_from import load_init, save_init_checkpoint
from electra.runtime.files import writable_dir

__all__ = ['convert_tf_checkpoint', 'Body', 'find_bodies', 'read_hparams', 'official_configs', 'verify_conversion',
           'electric_plan', 'electric_state']

# AdamWeightDecayOptimizer's slots are `<variable>/adam_m`, `/adam_v` (official model/optimization.py `apply_gradients`)
SLOT_SUFFIXES = ('/adam_m', '/adam_v')
BOOKKEEPING = ('global_step',)  # tf.train.get_or_create_global_step (model/optimization.py `create_optimizer`)
# The public code's sampling temperature is a constant (configure_pretraining.py `temperature`), but the released
# checkpoints were trained by an earlier version that may have stored it as a variable: no model weight either.
TEMPERATURE = 'temperature'
# Electric's generator (run_pretraining.py `TwoTowerClozeTransformer`, `_get_cloze_outputs`): its discriminator converts
# as ELECTRA's; the generator has no transformers counterpart: it converts to this library's own
# `TwoTowerClozeGenerator`, written to cloze/ in the files an Electric run's export writes (`save_cloze`), since the
# discriminator's score needs its log q (`electric_state` reads the whole model)
ELECTRIC_SCOPES = ('generator_ltr/', 'generator_rtl/', 'cloze_predictions/')
ELECTRIC_GENERATOR = ("Electric's two-tower cloze generator, in cloze/: no transformers counterpart (a left-to-right and "
                      "a right-to-left transformer whose shifted outputs are concatenated), written in the electra "
                      "library's own files, which electra.electric_scores reads with the discriminator")
MODEL_SIZES = {'small': (256, 12), 'base': (768, 12), 'large': (1024, 24)}  # training_utils.get_bert_config
# configure_pretraining.py `PretrainingConfig` defaults of the keys that decide the model's shape
HPARAM_DEFAULTS = {'model_size': 'small', 'model_hparam_overrides': {}, 'embedding_size': None, 'vocab_size': 30522,
                   'do_lower_case': True, 'debug': False, 'untied_generator': True,
                   'untied_generator_embeddings': False, 'generator_hidden_size': 0.25, 'generator_layers': 1.0,
                   'electric_objective': False, 'two_tower_generator': False, 'max_seq_length': 128,
                   'mask_prob': 0.15}


@dataclass
class Body:
    "One transformer as the checkpoint holds it: its scope, its embeddings' scope and the sizes the shapes give."
    scope: str
    embeddings: str
    vocab: int
    embedding: int
    hidden: int
    layers: int
    intermediate: int
    positions: int
    types: int
    project: bool


def _shape(shapes: dict, name: str, where: str, rank: int) -> tuple[int, ...]:
    "The shape of variable `name`, which must exist with `rank` dimensions."
    if name not in shapes:
        raise ConfigError(f"{where}: missing variable '{name}' (an official ELECTRA checkpoint has it)")
    shape = shapes[name]
    if len(shape) != rank:
        raise ConfigError(f"{where}: variable '{name}' has shape {list(shape)}, expected {rank} dimensions")
    return shape


def find_body(shapes: dict, scope: str, embeddings: str, where: str) -> Body:
    """The sizes of the transformer under `scope` reading its embeddings under `embeddings`: word embeddings [V, E],
    positions [P, E], token types [T, E], `embeddings_project` kernel [E, H] when E != H, query kernel [H, H],
    intermediate kernel [H, I]; the layers are layer_0 .. layer_{L-1}."""
    vocab, embedding = _shape(shapes, f'{embeddings}/word_embeddings', where, 2)
    positions = _shape(shapes, f'{embeddings}/position_embeddings', where, 2)[0]
    types = _shape(shapes, f'{embeddings}/token_type_embeddings', where, 2)[0]
    project = f'{scope}/embeddings_project/kernel' in shapes
    hidden = _shape(shapes, f'{scope}/encoder/layer_0/attention/self/query/kernel', where, 2)[1]
    layer_ids = {int(m.group(1)) for n in shapes if (m := re.match(rf'{re.escape(scope)}/encoder/layer_(\d+)/', n))}
    intermediate = _shape(shapes, f'{scope}/encoder/layer_0/intermediate/dense/kernel', where, 2)[1]
    if project != (embedding != hidden):
        # modeling.py BertModel adds the projection exactly when the embedding width differs from the hidden size
        need = 'needs' if embedding != hidden else 'must not have'
        raise ConfigError(f"{where}: '{scope}' has embedding size {embedding} ({embeddings}/word_embeddings) and "
                          f"hidden size {hidden}: it {need} the variable '{scope}/embeddings_project/kernel'")
    return Body(scope, embeddings, vocab, embedding, hidden, max(layer_ids) + 1, intermediate, positions, types, project)


def find_bodies(shapes: dict, where: str) -> tuple[Body, Body | None]:
    """The discriminator (scope `electra`) and the generator: scope `generator` (own or shared embeddings), the
    discriminator's own body when only `generator_predictions` exists (`untied_generator: false`, all weights
    tied), or None when there is no generator head."""
    disc = find_body(shapes, 'electra', 'electra/embeddings', where)
    if any(n.startswith('generator/') for n in shapes):
        untied = 'generator/embeddings/word_embeddings' in shapes
        gen = find_body(shapes, 'generator', 'generator/embeddings' if untied else 'electra/embeddings', where)
    elif any(n.startswith('generator_predictions/') for n in shapes): gen = disc
    else: gen = None
    return disc, gen


def read_hparams(path: str | Path) -> dict:
    "An official run_pretraining.py `--hparams` JSON file, over the configure_pretraining.py defaults that matter here."
    path = Path(path)
    try: text = path.read_text(encoding='utf-8')
    except OSError as e: raise ConfigError(f"--hparams {path}: cannot read ({e.strerror})") from None
    except ValueError as e: raise ConfigError(f"--hparams {path}: not UTF-8 text ({e})") from None
    given = load_json(text, f'--hparams {path}')
    if not isinstance(given, dict): raise ConfigError(f"--hparams {path}: expected a JSON object of hparams")
    hp = {**HPARAM_DEFAULTS, **given, 'path': str(path), 'given': sorted(given)}
    if hp['model_size'] not in MODEL_SIZES:
        raise ConfigError(f"--hparams {path}: model_size {hp['model_size']!r} is not one of small, base, large "
                          "(as util/training_utils.py get_bert_config requires)")
    if not isinstance(hp['model_hparam_overrides'], dict):
        raise ConfigError(f"--hparams {path}: model_hparam_overrides must be a JSON object")
    n = hp['max_seq_length']
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"--hparams {path}: max_seq_length {n!r} is not a positive whole number of tokens")
    return hp


def official_configs(hp: dict) -> tuple[dict, dict]:
    """The BERT configs the official code builds from hparams `hp`: the discriminator's (training_utils.py
    `get_bert_config`, then the debug sizes of run_pretraining.py `PretrainingModel.__init__`) and the generator's
    (run_pretraining.py `get_generator_config`: hidden and layers scaled, FFN 4x, heads from its hidden size)."""
    hidden, layers = MODEL_SIZES[hp['model_size']]
    over = hp['model_hparam_overrides']
    bert = {'hidden_size': hidden, 'num_hidden_layers': layers, 'vocab_size': hp['vocab_size'], 'hidden_act': 'gelu',
            'max_position_embeddings': 512, 'type_vocab_size': 2, 'hidden_dropout_prob': 0.1,
            'attention_probs_dropout_prob': 0.1, **over}
    bert.setdefault('num_attention_heads', max(1, bert['hidden_size'] // 64))
    bert.setdefault('intermediate_size', 4 * bert['hidden_size'])
    if hp['debug']: bert.update(num_hidden_layers=3, hidden_size=144, intermediate_size=144 * 4, num_attention_heads=4)
    # configure_pretraining.py: embedding_size defaults to 128 for "small" and to the hidden size otherwise (None)
    # (it sets 128 after reading the hparams, then reads them again, so a given value, even null, wins)
    embedding = hp['embedding_size'] if 'embedding_size' in hp['given'] else 128 if hp['model_size'] == 'small' else None
    bert['embedding_size'] = bert['hidden_size'] if embedding is None else embedding
    gen = dict(bert)
    if hp['untied_generator']:
        gen['hidden_size'] = int(round(bert['hidden_size'] * hp['generator_hidden_size']))
        gen['num_hidden_layers'] = int(round(bert['num_hidden_layers'] * hp['generator_layers']))
        gen['intermediate_size'] = 4 * gen['hidden_size']
        gen['num_attention_heads'] = max(1, gen['hidden_size'] // 64)
        # untied embeddings are built with embedding_size=None: as wide as the generator's hidden size
        if hp['untied_generator_embeddings']: gen['embedding_size'] = gen['hidden_size']
    return bert, gen


SIZE_KEYS = {'vocab_size': 'vocab', 'embedding_size': 'embedding', 'hidden_size': 'hidden', 'num_hidden_layers': 'layers',
             'intermediate_size': 'intermediate', 'max_position_embeddings': 'positions', 'type_vocab_size': 'types'}


def check_hparams(hp: dict, configs: tuple[dict, dict], disc: Body, gen: Body | None, where: str) -> None:
    "The hparams must describe this checkpoint: its structure and every size, else its heads would be a guess."
    def fail(what: str):
        raise ConfigError(f"--hparams {hp['path']}: {what}, so these hparams are not {where}'s")
    if gen is not None and (gen is not disc) != bool(hp['untied_generator']):
        fail(f"untied_generator is {hp['untied_generator']}, but the checkpoint "
             f"{'has' if gen is not disc else 'has no'} 'generator/' variables")
    if gen is not None and gen is not disc and (gen.embeddings == 'generator/embeddings') != bool(
            hp['untied_generator_embeddings']):
        fail(f"untied_generator_embeddings is {hp['untied_generator_embeddings']}, but the checkpoint "
             f"{'has' if gen.embeddings == 'generator/embeddings' else 'has no'} 'generator/embeddings/' variables")
    for role, cfg, body in (('discriminator', configs[0], disc), ('generator', configs[1], gen)):
        if body is None: continue
        for key, attr in SIZE_KEYS.items():
            if cfg[key] != getattr(body, attr):
                fail(f"the official code makes the {role}'s {key} {cfg[key]} from them, but the checkpoint's "
                     f"'{body.scope}' has {getattr(body, attr)}")


def model_settings(body: Body, hp: dict | None, cfg: dict | None, role: str, where: str) -> dict:
    "Heads, activation and dropout of one network: from the official config of `hp`, else the official defaults."
    if cfg is None: cfg = {'num_attention_heads': max(1, body.hidden // 64), 'hidden_act': 'gelu',
                           'hidden_dropout_prob': 0.1, 'attention_probs_dropout_prob': 0.1}
    heads = cfg['num_attention_heads']
    if body.hidden % heads:
        source = f"--hparams {hp['path']}" if hp else 'the official rule max(1, hidden // 64)'
        raise ConfigError(f"{where}: the {role}'s hidden size {body.hidden} is not a multiple of its {heads} attention "
                          f"heads (from {source}); give the run's hparams JSON with --hparams")
    return {k: cfg[k] for k in ('num_attention_heads', 'hidden_act', 'hidden_dropout_prob',
                                'attention_probs_dropout_prob')}


def pretraining_length(hp: dict | None, disc: Body, where: str) -> int | None:
    """The length the run pretrained at: the hparams' max_seq_length (configure_pretraining.py, default 128), which
    must fit the position table (modeling.py `embedding_postprocessor` asserts it); unknown (None) without hparams."""
    if hp is None: return None
    n = hp['max_seq_length']
    if n > disc.positions:
        source = '' if 'max_seq_length' in hp['given'] else ' (the official default)'
        raise ConfigError(f"--hparams {hp['path']}: max_seq_length {n}{source} is past the checkpoint's {disc.positions} "
                          f"position embeddings ({where}), so these hparams are not its run's; give its max_seq_length")
    return n


def electra_config(body: Body, settings: dict, pad_token_id: int, length: int | None) -> ElectraConfig:
    # layer_norm_eps 1e-12: the epsilon of tf.contrib.layers.layer_norm (official modeling.py `layer_norm`);
    # pretraining_max_length: position rows past it were never trained (fine-tuning warns, as for our own exports)
    return ElectraConfig(vocab_size=body.vocab, embedding_size=body.embedding, hidden_size=body.hidden,
                         num_hidden_layers=body.layers, intermediate_size=body.intermediate,
                         max_position_embeddings=body.positions, type_vocab_size=body.types, layer_norm_eps=1e-12,
                         pad_token_id=pad_token_id, pretraining_max_length=length, **settings)


# --- variable plans: (TF name, HF parameter, transpose?) -----------------------------------------------------------

def _dense(tf: str, hf: str) -> list[tuple[str, str, bool]]:
    "tf.layers.dense keeps its kernel as [in, out]; torch's Linear weight is [out, in]."
    return [(f'{tf}/kernel', f'{hf}.weight', True), (f'{tf}/bias', f'{hf}.bias', False)]


def _norm(tf: str, hf: str) -> list[tuple[str, str, bool]]:
    return [(f'{tf}/gamma', f'{hf}.weight', False), (f'{tf}/beta', f'{hf}.bias', False)]


def body_plan(body: Body) -> list[tuple[str, str, bool]]:
    "The variables of one transformer (modeling.py `BertModel`, `transformer_model`) and their HF parameters."
    e, hf = body.embeddings, 'electra.embeddings'
    plan = [(f'{e}/{t}_embeddings', f'{hf}.{t}_embeddings.weight', False) for t in ('word', 'position', 'token_type')]
    plan += _norm(f'{e}/LayerNorm', f'{hf}.LayerNorm')
    if body.project: plan += _dense(f'{body.scope}/embeddings_project', 'electra.embeddings_project')
    for k in range(body.layers):
        tf, hf = f'{body.scope}/encoder/layer_{k}', f'electra.encoder.layer.{k}'
        for part in ('query', 'key', 'value'): plan += _dense(f'{tf}/attention/self/{part}', f'{hf}.attention.self.{part}')
        plan += _dense(f'{tf}/attention/output/dense', f'{hf}.attention.output.dense')
        plan += _norm(f'{tf}/attention/output/LayerNorm', f'{hf}.attention.output.LayerNorm')
        plan += _dense(f'{tf}/intermediate/dense', f'{hf}.intermediate.dense')
        plan += _dense(f'{tf}/output/dense', f'{hf}.output.dense')
        plan += _norm(f'{tf}/output/LayerNorm', f'{hf}.output.LayerNorm')
    return plan


# run_pretraining.py `_get_discriminator_output`: dense (hidden, gelu) then dense_1 (1 unit)
DISC_HEAD = _dense('discriminator_predictions/dense', 'discriminator_predictions.dense') + \
    _dense('discriminator_predictions/dense_1', 'discriminator_predictions.dense_prediction')
# run_pretraining.py `get_token_logits`: dense (embedding width, gelu), LayerNorm, then the embedding table^T + bias
GEN_HEAD = _dense('generator_predictions/dense', 'generator_predictions.dense') + \
    _norm('generator_predictions/LayerNorm', 'generator_predictions.LayerNorm') + \
    [('generator_predictions/output_bias', 'generator_lm_head.bias', False)]
TIED = 'generator_lm_head.weight'  # the MLM output matrix is the word-embedding table: no variable of its own
# run_pretraining.py `_get_cloze_outputs`: `get_token_logits` under cloze_predictions/, over both towers' outputs
CLOZE_HEAD = _dense('cloze_predictions/dense', 'cloze_predictions.dense') + \
    _norm('cloze_predictions/LayerNorm', 'cloze_predictions.LayerNorm') + \
    [('cloze_predictions/output_bias', 'output_bias', False)]


def check_plan(model, plan: list, shapes: dict, role: str, where: str) -> None:
    "Every variable of `plan` exists with the shape the model needs (transposed back for kernels); nothing is left out."
    state, c = model.state_dict(), model.config
    sizes = (f"vocabulary {c.vocab_size}, embedding size {c.embedding_size}, hidden size {c.hidden_size}, "
             f"FFN {c.intermediate_size}, {c.max_position_embeddings} positions, {c.type_vocab_size} token types")
    for tf, hf, transpose in plan:
        want = tuple(state[hf].shape)[::-1] if transpose else tuple(state[hf].shape)
        if tf not in shapes:
            raise ConfigError(f"{where}: missing variable '{tf}' (shape {list(want)}) of the {role} ({sizes})")
        if tuple(shapes[tf]) != want:
            raise ConfigError(f"{where}: variable '{tf}' has shape {list(shapes[tf])}, expected {list(want)} for the "
                              f"{role}'s {hf} ({sizes}, inferred from the other variables)")
    left = set(state) - {hf for _, hf, _ in plan} - {TIED}
    if left: raise AssertionError(f"no variable is mapped to the {role}'s {sorted(left)[:3]}")


def unmapped(ckpt: TFCheckpoint, plans: list[list]) -> dict[str, str]:
    "The variables no plan uses and why they are skipped; any other one is an error naming it."
    used = {tf for plan in plans for tf, _, _ in plan}
    skipped, unknown = {}, []
    for name, entry in sorted(ckpt.entries.items()):
        if name in used: continue
        if name.endswith(SLOT_SUFFIXES): skipped[name] = 'optimizer slot'
        elif name in BOOKKEEPING: skipped[name] = 'training bookkeeping'
        elif name.rsplit('/', 1)[-1] == TEMPERATURE: skipped[name] = 'sampling temperature'
        elif entry.dtype == STRING: skipped[name] = 'string tensor: not read'
        else: unknown.append(name)
    if unknown:
        first = unknown[0]
        why = ("no known ELECTRA variable has this name: expected electra/..., generator/..., generator_predictions/..., "
               "discriminator_predictions/..., generator_ltr/..., generator_rtl/..., cloze_predictions/..., optimizer "
               "slots (*/adam_m, */adam_v) or global_step")
        more = f" (and {len(unknown) - 1} more: {', '.join(unknown[1:4])})" if len(unknown) > 1 else ''
        raise ConfigError(f"{ckpt.index_path}: variable '{first}' {list(ckpt.entries[first].shape)}: {why}{more}")
    return skipped


def electric_plan(shapes: dict, where: str) -> list[tuple[str, str, bool]]:
    """The variables of an official Electric checkpoint and the parameters of this library's Electric model
    (`ElectraGeneratorDiscriminator` with the two-tower generator): the discriminator as ELECTRA's, each tower
    (`generator_ltr`, `generator_rtl`; embeddings shared under electra/embeddings or their own) as a transformers
    `ElectraModel`, and the cloze head."""
    disc = find_body(shapes, 'electra', 'electra/embeddings', where)
    plan = [(tf, f'discriminator.{hf}', t) for tf, hf, t in body_plan(disc) + DISC_HEAD]
    for tower in ('ltr', 'rtl'):
        scope = f'generator_{tower}'
        own = f'{scope}/embeddings/word_embeddings' in shapes  # untied_generator_embeddings
        body = find_body(shapes, scope, f'{scope}/embeddings' if own else 'electra/embeddings', where)
        plan += [(tf, f"generator.{tower}.{hf.removeprefix('electra.')}", t) for tf, hf, t in body_plan(body)]
    return plan + [(tf, f'generator.{hf}', t) for tf, hf, t in CLOZE_HEAD]


def electric_state(ckpt: TFCheckpoint) -> dict[str, torch.Tensor]:
    "An official Electric checkpoint as the `state_dict` of this library's Electric model (`electric_plan`)."
    return {hf: _torch(ckpt.read(tf), t) for tf, hf, t in electric_plan(ckpt.shapes(), str(ckpt.index_path))}


# --- conversion ---------------------------------------------------------------------------------------------------

def _torch(array: np.ndarray, transpose: bool) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array.T if transpose else array).astype(np.float32))


def load_weights(model, plan: list, ckpt: TFCheckpoint) -> None:
    "Read the plan's variables into `model` (float32), the MLM output matrix tied to the word embeddings."
    state = {}
    for tf, hf, transpose in plan:
        array = ckpt.read(tf)
        if not np.issubdtype(array.dtype, np.floating):
            raise ConfigError(f"{ckpt.index_path}: variable '{tf}' is {ckpt.entries[tf].dtype_name}, expected floats")
        state[hf] = _torch(array, transpose)
    if TIED in model.state_dict(): state[TIED] = state['electra.embeddings.word_embeddings.weight']
    model.load_state_dict(state, strict=True)


def find_vocab(prefix: Path, vocab: str | Path | None) -> Path:
    """`vocab`, else vocab.txt beside the checkpoint or up to two folders above it (the official layout is
    DATA_DIR/vocab.txt with the model in DATA_DIR/models/NAME, configure_pretraining.py `vocab_file`)."""
    if vocab is not None:
        if not Path(vocab).is_file(): raise ConfigError(f"--vocab {vocab}: no such file")
        return Path(vocab)
    places = list(dict.fromkeys([prefix.parent, prefix.parent.parent, prefix.parent.parent.parent]))
    for place in places:
        if (place / 'vocab.txt').is_file(): return place / 'vocab.txt'
    raise ConfigError(f"no vocab.txt beside the checkpoint {prefix} (looked in {', '.join(map(str, places))}); "
                      "give the WordPiece vocabulary it was trained with: --vocab FILE")


def _check_vocab_lines(vocab: Path, rows: int) -> None:
    """One token per line, one line per row of the embedding table (the official tokenization.py `load_vocab` gives
    line i the id i). Fewer lines would leave the upper rows without a token the tokenizer could ever produce; a
    repeated line, an id without one (the tokenizer keeps the last line's)."""
    lines = vocab_entries(vocab, str(vocab), 'Give the vocab.txt the checkpoint was trained with (--vocab FILE)')
    if len(lines) > rows:
        raise ConfigError(f"{vocab}: {len(lines)} tokens, but the checkpoint's embedding table has {rows} rows: not the "
                          "vocabulary of this checkpoint; give the right one with --vocab")
    if len(lines) < rows:
        n = len(lines)
        raise ConfigError(f"{vocab}: {n} tokens, but the checkpoint's embedding table has {rows} rows: ids {n}..{rows - 1} "
                          "would have no token. Give the vocab.txt the checkpoint was trained with (--vocab FILE); if its "
                          f"run set vocab_size above its vocabulary on purpose, append {rows - n} placeholder lines "
                          f"([unused{n}] ... [unused{rows - 1}]) to a copy of it and give that")


# how the converter's setting of lower-casing is named: the run's do_lower_case (configure_pretraining.py)
DO_LOWER_CASE = CaseSetting("do_lower_case is true (--hparams, or the released models' uncased default)",
                            'do_lower_case is false (--hparams)', 'give --hparams a JSON with "do_lower_case": false',
                            'give --hparams a JSON with "do_lower_case": true')


def _tokenizer(vocab: Path, lowercase: bool, vocab_rows: int, positions: int):
    _check_vocab_lines(Path(vocab), vocab_rows)
    tokenizer = load_tokenizer(str(vocab), lowercase, DO_LOWER_CASE)
    tokenizer.model_max_length = positions  # the position table's length
    return tokenizer


def plan_models(ckpt: TFCheckpoint, hp: dict | None, pad_token_id: int) -> dict:
    "The models (still untrained) and their plans, every size and shape checked; no tensor read yet."
    where, shapes = str(ckpt.index_path), ckpt.shapes()
    disc, gen = find_bodies(shapes, where)
    configs = official_configs(hp) if hp else (None, None)
    if hp: check_hparams(hp, configs, disc, gen, where)
    length = pretraining_length(hp, disc, where)
    roles = {'discriminator': (disc, ElectraForPreTraining, body_plan(disc) + DISC_HEAD, configs[0])}
    if gen is not None:
        roles['generator'] = (gen, ElectraForMaskedLM, body_plan(gen) + GEN_HEAD, configs[0] if gen is disc else configs[1])
    out = {}
    for role, (body, cls, plan, cfg) in roles.items():
        settings = model_settings(body, hp, cfg, role, where)
        if role == 'generator' and settings['hidden_act'] != 'gelu':
            # run_pretraining.py `get_token_logits` applies hidden_act; transformers' generator head is always gelu
            raise ConfigError(f"{where}: hidden_act {settings['hidden_act']!r}: transformers' ElectraForMaskedLM "
                              "applies gelu in its prediction head, so the generator cannot be converted exactly")
        model = cls(electra_config(body, settings, pad_token_id, length)).eval()
        check_plan(model, plan, shapes, role, where)
        out[role] = {'body': body, 'model': model, 'plan': plan, 'settings': settings}
    out['pretraining_max_length'] = length
    if gen is None and any(n.startswith(ELECTRIC_SCOPES[0]) for n in shapes):  # Electric: no ELECTRA generator
        out['cloze'] = _cloze_plan(shapes, hp, configs[1], pad_token_id, length, where)
        out['discriminator']['model'].config.electra_objective = 'electric'  # what its head gives (its card says)
    out['skipped'] = unmapped(ckpt, [out[r]['plan'] for r in (*roles, *(['cloze'] if 'cloze' in out else []))])
    return out


def _cloze_plan(shapes: dict, hp: dict | None, cfg: dict | None, pad_token_id: int, length: int | None,
                where: str) -> dict:
    """Electric's two-tower cloze model (still untrained) and its plan, the generator's part of `electric_plan`, every
    variable there (a missing one named) and of the shape the towers' sizes need; its run's `mask_prob` (the score's
    constant) from the hparams, else the official default."""
    plan = [(tf, hf.removeprefix('generator.'), t) for tf, hf, t in electric_plan(shapes, where) if hf.startswith('generator.')]
    missing = sorted(tf for tf, _, _ in plan if tf not in shapes)
    if missing: raise ConfigError(f"{where}: an Electric checkpoint without the variable '{missing[0]}'")
    own = 'generator_ltr/embeddings/word_embeddings' in shapes  # untied_generator_embeddings
    body = find_body(shapes, 'generator_ltr', 'generator_ltr/embeddings' if own else 'electra/embeddings', where)
    settings = model_settings(body, hp, cfg, 'cloze model', where)
    model = TwoTowerClozeGenerator(electra_config(body, settings, pad_token_id, length)).eval()
    if not own: model.rtl.embeddings = model.ltr.embeddings  # both towers read electra/embeddings, as in the run
    check_plan(model, plan, shapes, 'cloze model', where)
    return {'body': body, 'model': model, 'plan': plan, 'settings': settings,
            'mask_prob': (hp or HPARAM_DEFAULTS)['mask_prob']}


def verify_conversion(paths: dict[str, Path], plans: dict[str, list], ckpt: TFCheckpoint) -> list[str]:
    """Reload each saved model with `from_pretrained` (Electric's cloze model with `load_cloze`) and compare a few
    tensors (first and last of the plan, the embedding projection, the heads) with the checkpoint's, exactly; the MLM
    output matrix must be the embeddings."""
    checked = []
    for role, path in paths.items():
        cls = ElectraForPreTraining if role == 'discriminator' else ElectraForMaskedLM
        state = (load_cloze(path, paths['discriminator'])[0] if role == 'cloze' else cls.from_pretrained(path)).state_dict()
        plan = plans[role]
        picks = [plan[0], plan[len(plan) // 2], *[p for p in plan if 'embeddings_project' in p[0]], *plan[-3:]]
        for tf, hf, transpose in picks:
            if not torch.equal(state[hf], _torch(ckpt.read(tf), transpose)):
                raise ConfigError(f"{path}: after saving, {hf} differs from the checkpoint's '{tf}'")
            checked.append(f'{role}: {tf} == {hf}')
        if TIED in state and not torch.equal(state[TIED], state['electra.embeddings.word_embeddings.weight']):
            raise ConfigError(f"{path}: the reloaded generator's output matrix is not its word embeddings")
    return checked


# what a conversion writes: 3 folders (Electric's cloze model the third), 2 files
OUTPUTS = ('discriminator', 'generator', 'cloze', 'conversion.json', 'pretraining.pth')
FOLDERS = OUTPUTS[:3]


def _check_apart(src, prefix: Path, out: Path, hparams, vocab) -> None:
    """--out outside the checkpoint's folder (that of `prefix`, the checkpoint found at `src`) and the other inputs, and
    no input among the outputs a conversion replaces, as every job keeps them apart (`check_apart`), before the
    checkpoint is read."""
    folder = Path(src) if Path(src).is_dir() else prefix.parent  # as given, so that the line names it as written
    # a `checkpoint` file may name a prefix elsewhere: its folder is read too
    folders = [folder, *([prefix.parent] if prefix.parent.resolve() != folder.resolve() else [])]
    reads = [*local_paths('src', folders), *local_paths('--hparams', [hparams]), *local_paths('--vocab', [vocab])]
    owns = [*(Owned('out', out / n, '') for n in FOLDERS), *(Owned('out', out, '', n) for n in OUTPUTS[3:])]
    check_apart([('out', out)], owns, reads)


def _prepare_out(out: Path, overwrite: bool) -> None:
    """Refuse to mix a new conversion into an old one, or into what another job wrote (a pretraining run's export);
    with `overwrite`, remove an old conversion's outputs first."""
    old = [out / n for n in OUTPUTS if (out / n).exists()]
    if old and not (out / 'conversion.json').is_file():  # not a conversion: --overwrite would delete another job's work
        what = "a pretraining run's export (config.yaml beside it)" if (out / 'config.yaml').is_file() else 'models'
        raise ConfigError(f"--out {out}: already holds {what}: {', '.join(p.name for p in old)}, which no conversion "
                          "wrote (no conversion.json) and --overwrite does not replace; choose another directory")
    if old and not overwrite:
        raise ConfigError(f"--out {out}: already holds a conversion ({', '.join(p.name for p in old)}); choose another "
                          "directory or pass --overwrite")
    for path in old:
        if path.is_dir(): shutil.rmtree(path)
        else: path.unlink()
    out.mkdir(parents=True, exist_ok=True)


def _report(ckpt, vocab, lowercase, hp, planned, paths, checked) -> dict:
    roles = [r for r in FOLDERS if r in planned]
    sizes = {r: {**asdict(planned[r]['body']), **planned[r]['settings']} for r in roles}
    mapped = {}
    for r in roles:
        for tf, hf, transpose in planned[r]['plan']:
            mapped.setdefault(tf, []).append(f"{r}.{hf}{' (transposed)' * transpose}")
    gen = planned.get('generator')
    return {'electra_version': __version__, 'source': str(ckpt.prefix.resolve()), 'crc32c_verified': ckpt.verify,
            'vocab': str(Path(vocab).resolve()), 'do_lower_case': lowercase,
            'hparams': hp['path'] if hp else None, 'pretraining_max_length': planned['pretraining_max_length'],
            'heads_from': (f"hparams {hp['path']}" if hp else "the official rule max(1, hidden // 64) "
                           "(util/training_utils.py get_bert_config, run_pretraining.py get_generator_config)"),
            'generator': (('none: ' + ELECTRIC_GENERATOR if 'cloze' in planned else 'none')
                          if gen is None else 'the discriminator itself (untied_generator: false)'
                          if gen['body'] is planned['discriminator']['body'] else f"own body, {gen['body'].embeddings}"),
            'mask_prob': planned['cloze']['mask_prob'] if 'cloze' in planned else None,
            'sizes': sizes, 'outputs': {r: str(p) for r, p in paths.items()}, 'mapped': mapped,
            'skipped': planned['skipped'], 'checked': checked}


def convert_tf_checkpoint(src: str | Path, out: str | Path, hparams: str | Path | None = None,
                          vocab: str | Path | None = None, verify: bool = True, overwrite: bool = False
                          ) -> dict[str, Path]:
    """Convert the official TF checkpoint `src` (a directory, or a prefix DIR/model.ckpt-N) into `out/discriminator`
    (ElectraForPreTraining) and, when it has a generator, `out/generator` (ElectraForMaskedLM), each with its
    tokenizer, as `export_pretrained` writes them, plus `out/conversion.json`. `hparams`: the run's
    run_pretraining.py hparams JSON (heads, lower-casing); `vocab`: its vocab.txt when not beside the checkpoint;
    `verify`: check every tensor's CRC-32C. With a generator, also `out/pretraining.pth`, the pair as a checkpoint
    `pretrain.py --init_from` starts from (as it does from `out` itself). An `hparams.json` beside the checkpoint is
    read when `hparams` is not given. An Electric checkpoint writes `out/cloze` (its two-tower cloze model, as an
    Electric run's export does) in place of a generator. Returns the paths by role ('discriminator', 'generator',
    'cloze', 'pretraining')."""
    # what is read is found first, so that a missing checkpoint is named, never an --out beside where it would be;
    # then --out is weighed against it, before the checkpoint is read and verified
    prefix = resolve_prefix(src)
    out = writable_dir(out, 'out', create=False)
    _check_apart(src, prefix, out, hparams, vocab)
    ckpt = TFCheckpoint(prefix, verify=verify)
    beside = ckpt.prefix.parent / 'hparams.json'  # where a run's hparams are usually kept with its checkpoint
    if hparams is None and beside.is_file(): hparams = beside
    hp = read_hparams(hparams) if hparams is not None else None
    vocab = find_vocab(ckpt.prefix, vocab)
    lowercase = bool(hp['do_lower_case']) if hp else True  # the released models are uncased (configure_pretraining.py)
    disc_body = find_bodies(ckpt.shapes(), str(ckpt.index_path))[0]
    tokenizer = _tokenizer(vocab, lowercase, disc_body.vocab, disc_body.positions)
    planned = plan_models(ckpt, hp, tokenizer.pad_token_id)
    _prepare_out(out, overwrite)
    paths = {}
    for role in (r for r in FOLDERS if r in planned):  # the discriminator first: the cloze model records it
        load_weights(planned[role]['model'], planned[role]['plan'], ckpt)
        if role == 'cloze':
            paths[role] = save_cloze(planned[role]['model'], planned[role]['mask_prob'], out / role, paths['discriminator'])
        else:
            paths[role] = save_model(planned[role]['model'], out / role)
            save_exported_tokenizer(tokenizer, paths[role])  # a vocab.txt's WordPiece: saved as it is (BERT's encoding)
        planned[role]['model'] = None  # free it before the next one is read
    checked = verify_conversion(paths, {r: planned[r]['plan'] for r in paths}, ckpt)
    if 'generator' in paths:  # the pair as one pretraining checkpoint, for `pretrain.py --init_from`
        paths['pretraining'] = save_init_checkpoint(load_init(str(out)), out / 'pretraining.pth')
    report = _report(ckpt, vocab, lowercase, hp, planned, paths, checked)
    (out / 'conversion.json').write_text(json.dumps(report, indent=1) + '\n', encoding='utf-8')
    for role in FOLDERS:
        if role in paths: write_conversion_card(paths[role], role, report)  # README.md: source, config, checks
    return paths
