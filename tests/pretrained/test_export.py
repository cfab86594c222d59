"""electra/pretrained/export.py: a padded model exports unpadded; unusable model directories refused."""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from transformers import ElectraForMaskedLM, ElectraForPreTraining

from electra.config.errors import ConfigError, RunWarning
from electra.config.pretrain import PretrainConfig
from electra.config.values import config_from_dict, config_to_dict
from electra.data.tokenizer import load_tokenizer, tokenizer_state
from electra.finetuning import loading
from electra.pretrained.export import load_discriminator
from electra.objective.masking import MaskingSettings
from electra.objective.model import build_pretraining_model
from electra.pretraining.init_from import load_init, save_init_checkpoint
from electra.runtime.files import atomic_save
from electra.training.checkpoint import FORMAT
from tests.support.finetune import saved_as_bert
from tests.support.tiny import V, tiny_cfg

pytestmark = pytest.mark.usefixtures('one_thread')


def test_padded_vocab_export_loads_unpadded_with_identical_logits(tmp_path):
    from electra.data.tokenizer import load_tokenizer, tokenizer_state
    from electra.pretrained.export import export_pretrained, load_discriminator
    from electra.runtime.files import atomic_save
    from electra.training.checkpoint import FORMAT
    vocab = tmp_path / 'vocab.txt'
    vocab.write_text('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'w{i}' for i in range(V - 5)]) + '\n')
    tok = load_tokenizer(str(vocab))
    assert len(tok) == V
    cfg = tiny_cfg(dropout=0.0, pad_vocab_multiple=64)
    torch.manual_seed(0)
    model = build_pretraining_model(cfg, MaskingSettings.for_tokenizer(tok)).eval()
    with torch.no_grad(): model.generator.generator_lm_head.bias.normal_()  # a zero bias would hide a lost one
    assert model.discriminator.config.vocab_size == 128
    paths = export_pretrained(model, tok, tmp_path / 'run')
    disc = ElectraForPreTraining.from_pretrained(paths['discriminator']).eval()
    gen = ElectraForMaskedLM.from_pretrained(paths['generator']).eval()
    assert disc.config.vocab_size == V and gen.config.vocab_size == V
    enc = tok(['w1 w2 w3', 'w4 w5'], padding=True, return_tensors='pt')
    with torch.no_grad():
        assert torch.allclose(disc(**enc).logits, model.discriminator(**enc).logits, atol=1e-6)
        assert torch.allclose(gen(**enc).logits, model.generator(**enc).logits[..., :V], atol=1e-5)
    # a pretraining checkpoint of the padded model loads as the unpadded discriminator too
    ckpt = tmp_path / 'run_1_100%.pth'
    atomic_save({'format': FORMAT, 'config': config_to_dict(cfg), 'tokenizer': tokenizer_state(tok),
                 'model': model.state_dict()}, ckpt)
    loaded, _ = load_discriminator(ckpt)
    with torch.no_grad(): assert torch.allclose(loaded.eval()(**enc).logits, disc(**enc).logits, atol=1e-6)
    with pytest.raises(ConfigError, match='pad_vocab_multiple'):  # its domain is checked when a config is read
        config_from_dict(PretrainConfig, {'pad_vocab_multiple': -1}, base=tiny_cfg())


def test_a_checkpoints_warnings_are_not_repeated_by_those_who_load_it(tmp_path):
    """Its run warned once that its warm-up was as long as the run; fine-tuning from it (`load_discriminator`) and
    continuing from it (`load_init`) build its networks from its config without warning again."""
    vocab = tmp_path / 'vocab.txt'
    vocab.write_text('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'w{i}' for i in range(V - 5)]) + '\n')
    tok = load_tokenizer(str(vocab))
    cfg = tiny_cfg(steps=20, warmup_steps=20)
    with pytest.warns(RunWarning, match=r'warmup_steps \(20\) is not shorter than the run'): cfg.validate()
    ckpt = tmp_path / 'short_1_100%.pth'
    atomic_save({'format': FORMAT, 'config': config_to_dict(cfg), 'tokenizer': tokenizer_state(tok),
                 'model': build_pretraining_model(cfg, MaskingSettings.for_tokenizer(tok)).state_dict()}, ckpt)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        disc, _ = load_discriminator(ckpt)
        init = load_init(str(ckpt))
    assert disc.config.hidden_size == 32 and init.discriminator.config.hidden_size == 32
    assert not [w for w in caught if issubclass(w.category, RunWarning)], [str(w.message) for w in caught]


def test_model_directories_that_cannot_work_are_refused(tiny, tmp_path):
    "No tokenizer files, no config.json, or a BERT model: each refused in one message naming the fix."
    import shutil
    model, tok = tiny
    good = tmp_path / 'good'
    model.save_pretrained(good)
    tok.save_pretrained(good)
    no_tok = tmp_path / 'no_tokenizer'
    model.save_pretrained(no_tok)
    with pytest.raises(ConfigError, match='no tokenizer files .neither tokenizer.json nor vocab.txt.'):
        loading.load_pretrained(str(no_tok))
    no_config = tmp_path / 'no_config'
    shutil.copytree(good, no_config)
    (no_config / 'config.json').unlink()
    with pytest.raises(ConfigError, match='no config.json, so not a save_pretrained directory'):
        loading.load_pretrained(str(no_config))
    with pytest.raises(ConfigError, match='a bert model, not ELECTRA'):
        loading.load_pretrained(str(saved_as_bert(tiny, tmp_path / 'bert')))
    assert loading.load_pretrained(str(good))[0].config.model_type == 'electra'
    # a file of the directory, not the directory: transformers read it as pickled weights (a traceback of
    # UnpicklingError, the sweep's F11)
    for name in ('tokenizer.json', 'config.json'):
        with pytest.raises(ConfigError) as e: loading.load_pretrained(str(good / name))
        assert str(e.value) == (f'model: {good / name} is a file but not a checkpoint of pretrain.py (torch.save writes '
                                f'a zip archive): give a pretrain.py checkpoint (any name), a save_pretrained folder '
                                f'(here perhaps {good}) or a hub name.')


@pytest.mark.parametrize('kw', [dict(tie_weights='gdes'), dict(objective='mlm'), dict(objective='all_tokens_mlm'),
                                dict(uniform_generator=True)])
def test_every_objective_exports_a_discriminator_that_fine_tuning_loads(tmp_path, kw):
    """Gradient-disentangled sharing exports the tables made whole (generator's + residual); BERT and the uniform
    generator have no generator to export; the export and the .pth both load as the model's own discriminator."""
    from electra.data.tokenizer import load_tokenizer, tokenizer_state
    from electra.pretrained.export import export_pretrained, load_discriminator
    from electra.runtime.files import atomic_save
    from electra.training.checkpoint import FORMAT
    vocab = tmp_path / 'vocab.txt'
    vocab.write_text('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'w{i}' for i in range(V - 5)]) + '\n')
    tok = load_tokenizer(str(vocab))
    cfg = tiny_cfg(dropout=0.0, **kw)
    torch.manual_seed(0)
    model = build_pretraining_model(cfg, MaskingSettings.for_tokenizer(tok)).eval()
    if kw.get('tie_weights') == 'gdes':  # a residual of zero would hide a lost one
        with torch.no_grad(): model.discriminator.electra.embeddings.word_embeddings.weight.normal_()
    paths = export_pretrained(model, tok, tmp_path / 'run')
    assert sorted(paths) == (['discriminator', 'generator'] if model.generator is not None else ['discriminator'])
    enc = tok(['w1 w2 w3', 'w4 w5'], padding=True, return_tensors='pt')
    with torch.no_grad():
        own = model.discriminator(**enc).logits
        disc = ElectraForPreTraining.from_pretrained(paths['discriminator']).eval()
        assert torch.allclose(disc(**enc).logits, own, atol=1e-5)
        ckpt = tmp_path / 'run_1_100%.pth'
        atomic_save({'format': FORMAT, 'config': config_to_dict(cfg), 'tokenizer': tokenizer_state(tok),
                     'model': model.state_dict()}, ckpt)
        loaded, _ = load_discriminator(ckpt)
        assert torch.allclose(loaded.eval()(**enc).logits, own, atol=1e-5)


def test_a_model_s_fingerprint_follows_its_content_not_its_path(tmp_path, monkeypatch):
    import hashlib
    import shutil

    from huggingface_hub import constants

    from electra.pretrained.export import model_fingerprint
    pth = tmp_path / 'run_100%.pth'
    pth.write_bytes(b'weights one')
    assert model_fingerprint(pth) == hashlib.sha256(b'\0' + hashlib.sha256(b'weights one').digest()).hexdigest()[:16]
    shutil.copy(pth, tmp_path / 'elsewhere.pth')
    assert model_fingerprint(tmp_path / 'elsewhere.pth') == model_fingerprint(pth)      # a copy is the same model
    before = model_fingerprint(pth)
    pth.write_bytes(b'weights two')                                                     # pretrained again, --overwrite
    assert model_fingerprint(pth) != before
    folder = tmp_path / 'discriminator'
    folder.mkdir()
    (folder / 'config.json').write_text('{}')
    (folder / 'model.safetensors').write_bytes(b'w')
    exported = model_fingerprint(folder)
    (folder / '.write_test_1').write_text('ok')                                         # hidden: not read by from_pretrained
    (folder / 'logs').mkdir()
    (folder / 'logs' / 'x.txt').write_text('x')                                         # a subfolder: neither
    assert model_fingerprint(folder) == exported
    (folder / 'vocab.txt').write_text('[PAD]\n')                                        # the tokenizer is part of the model
    assert model_fingerprint(folder) != exported
    # a hub name: the commit of its files in the local cache, which a new upload changes
    monkeypatch.setattr(constants, 'HF_HUB_CACHE', str(tmp_path / 'hub'))
    repo = tmp_path / 'hub' / 'models--someone--tiny-electra'
    uncached = model_fingerprint('someone/tiny-electra')
    for commit in ('a' * 40, 'b' * 40):
        (repo / 'snapshots' / commit).mkdir(parents=True)
        (repo / 'snapshots' / commit / 'config.json').write_text('{}')
        (repo / 'refs').mkdir(exist_ok=True)
        (repo / 'refs' / 'main').write_text(commit)
        assert model_fingerprint('someone/tiny-electra') == hashlib.sha256(
            f'hub:someone/tiny-electra@{commit}'.encode()).hexdigest()[:16] != uncached
    assert model_fingerprint('not a/hub name') == hashlib.sha256(b'hub:not a/hub name@').hexdigest()[:16]


def test_the_export_s_tokenizer_cuts_long_inputs_at_the_model_s_positions(tmp_path):
    """transformers' Auto classes and pipelines truncate at the tokenizer's `model_max_length`: the export's must be
    the model's position table, or `truncation=True` keeps every token and a long input fails inside the model."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer, pipeline
    from electra.pretrained.export import export_pretrained
    vocab = tmp_path / 'vocab.txt'
    vocab.write_text('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'w{i}' for i in range(V - 5)]) + '\n')
    tok = load_tokenizer(str(vocab))
    cfg = tiny_cfg(max_position_embeddings=40, max_length=32)
    model = build_pretraining_model(cfg, MaskingSettings.for_tokenizer(tok)).eval()
    paths = export_pretrained(model, tok, tmp_path / 'run')
    long = ' '.join(f'w{i % 50}' for i in range(300))
    for path in paths.values():
        loaded = AutoTokenizer.from_pretrained(path)
        assert loaded.model_max_length == 40
        assert len(loaded(long, truncation=True)['input_ids']) == 40
    fill = pipeline('fill-mask', model=str(paths['generator']), tokenizer=str(paths['generator']))
    assert len(fill('[MASK] ' + long, tokenizer_kwargs={'truncation': True})) == 5  # top 5, no error
    ckpt = tmp_path / 'run_1_100%.pth'  # the tokenizer fine-tuning gets with the model knows its length too
    atomic_save({'format': FORMAT, 'config': config_to_dict(cfg), 'tokenizer': tokenizer_state(tok),
                 'model': model.state_dict()}, ckpt)
    assert load_discriminator(ckpt)[1].model_max_length == 40
    assert AutoModelForMaskedLM.from_pretrained(paths['generator']).config.max_position_embeddings == 40


@pytest.mark.parametrize('kw, kind', [(dict(objective='mlm'), 'mlm'), (dict(uniform_generator=True), 'electra'),
                                      (dict(objective='electric'), 'electric')])
def test_init_from_refuses_a_checkpoint_without_a_masked_lm_generator_in_one_line(tmp_path, kw, kind):
    """A run that trained no masked LM of its own (BERT, the uniform generator, Electric's two towers) has no generator
    to continue: refused in one line naming the checkpoint, while fine-tuning reads its discriminator."""
    vocab = tmp_path / 'vocab.txt'
    vocab.write_text('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'w{i}' for i in range(V - 5)]) + '\n')
    tok = load_tokenizer(str(vocab))
    cfg = tiny_cfg(**kw)
    ckpt = tmp_path / 'run_1_100%.pth'
    atomic_save({'format': FORMAT, 'config': config_to_dict(cfg), 'tokenizer': tokenizer_state(tok),
                 'model': build_pretraining_model(cfg, MaskingSettings.from_config(cfg, tok)).state_dict()}, ckpt)
    assert load_discriminator(ckpt)[0].config.hidden_size == 32
    with pytest.raises(ConfigError, match=rf"^init_from: .*run_1_100%\.pth is a {kind} run's.*, whose generator is "
                                          r"not a masked LM it trained: continuing from it is not supported"):
        load_init(str(ckpt))


def test_a_model_whose_tokenizer_cannot_reach_its_upper_case_entries_is_fine_tuned_as_saved_and_said(tmp_path, tiny_dir):
    """R1-4 on fine-tuning's tokenizer, the model's own: it was pretrained with it, so it is kept as saved (refusing
    would block a model that is what it is), and one warning names the entries its lower-casing leaves unreachable."""
    import shutil
    from transformers import ElectraTokenizerFast
    folder = shutil.copytree(tiny_dir, tmp_path / 'model')
    vocab = ElectraTokenizerFast.from_pretrained(folder).get_vocab()
    words = sorted(vocab, key=vocab.get)
    words[10] = words[10].capitalize()
    ElectraTokenizerFast(vocab={w: i for i, w in enumerate(words)}, do_lower_case=True).save_pretrained(folder)
    with pytest.warns(RunWarning, match=rf"^model {folder}: its tokenizer lower-cases the text, but its vocabulary "
                                        rf"holds 1 upper-case entry \('{words[10]}'\) that no input reaches\. Fine-tuning "
                                        r"uses the tokenizer as saved, the one the model was pretrained with"):
        _, tok = load_discriminator(folder)
    assert tok.convert_tokens_to_ids(words[10]) == 10 and tok.backend_tokenizer.normalizer.normalize_str('A') == 'a'
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        load_discriminator(tiny_dir)  # its entries all reachable: no word


def test_a_model_whose_tokenizer_keeps_case_on_an_uncased_vocabulary_is_fine_tuned_as_saved_and_said(tmp_path, tiny_dir):
    """R24b-6: the reverse of R1-4, a folder's tokenizer saved with do_lower_case false on a vocabulary with no upper-case
    entry, makes every capitalised word [UNK]; only the splits' [UNK] warnings spoke, blaming the model's pretraining
    text. One warning at the model now names the contradiction and the fix; the tokenizer is kept as saved."""
    import shutil
    from transformers import ElectraTokenizerFast
    folder = shutil.copytree(tiny_dir, tmp_path / 'model')
    vocab = ElectraTokenizerFast.from_pretrained(folder).get_vocab()
    assert not [w for w in vocab if w != w.lower() and not w.startswith('[')] and 'the' in vocab
    ElectraTokenizerFast(vocab=vocab, do_lower_case=False).save_pretrained(folder)
    with pytest.warns(RunWarning, match=rf"^model {folder}: its tokenizer keeps case \(do_lower_case: false\), but no "
                                        r"entry of its vocabulary is upper case: a word with a capital letter is \[UNK\]"
                                        r"\. Fine-tuning uses the tokenizer as saved, the one the model was pretrained "
                                        r"with; if its pretraining text was lower-cased, save its tokenizer lower-casing "
                                        r"\(do_lower_case: true\) with it\.$"):
        _, tok = load_discriminator(folder)
    assert tok.tokenize('The') == ['[UNK]'] and tok.tokenize('the') == ['the']


def test_a_run_with_a_bpe_tokenizer_exports_one_that_encodes_a_pair_as_pretraining_fed_it(tmp_path, monkeypatch):
    """R7a-2: a run given a byte-level BPE with RoBERTa's post-processor exported it as given, whose pair was
    `<s> A </s></s> B </s>` without token types; pretraining fed `<s> A </s> B </s>`, types 0 then 1
    (`ExampleBuilder`). Both exported networks' tokenizers now give that, and the cards say nothing of it; where it
    cannot be done (here: the template not set), each card says what its tokenizer does instead."""
    from transformers import AutoTokenizer

    from electra.data.demo import write_demo_corpus
    from electra.pretrained.export import export_pretrained
    from tests.support.tokenizers import bpe_folder
    texts = write_demo_corpus(tmp_path / 'demo.txt', n_docs=50).read_text(encoding='utf-8').splitlines()
    tok = load_tokenizer(str(bpe_folder(tmp_path / 'bpe', texts, vocab_size=V)))
    model = build_pretraining_model(tiny_cfg(), MaskingSettings.for_tokenizer(tok))
    a, b = 'The first segment.', 'And the second'
    ia, ib = (tok(t, add_special_tokens=False)['input_ids'] for t in (a, b))
    fed = [tok.cls_token_id, *ia, tok.sep_token_id, *ib, tok.sep_token_id]  # ExampleBuilder's `_create_example`
    for path in export_pretrained(model, tok, tmp_path / 'run').values():
        assert dict(AutoTokenizer.from_pretrained(path)(a, b)) == {
            'input_ids': fed, 'token_type_ids': [0] * (len(ia) + 2) + [1] * (len(ib) + 1), 'attention_mask': [1] * len(fed)}
        assert 'does not encode as the run did' not in (path / 'README.md').read_text(encoding='utf-8')
    from electra.config.errors import RunWarning
    from electra.data import tokenizer as tokenizers
    monkeypatch.setattr(tokenizers, '_as_run', lambda tok, words: tok)
    with pytest.warns(RunWarning, match='does not encode as the run did') as said:
        paths = export_pretrained(model, tok, tmp_path / 'other')
    assert len(said) == len(paths) == 2
    for path, warning in zip(paths.values(), said):
        note = str(warning.message).removeprefix(f'{path}: ')
        assert note.startswith('Its tokenizer does not encode') and note in (path / 'README.md').read_text(encoding='utf-8')


def _eval_mode_and_repeatable(net: torch.nn.Module, call) -> None:
    "Every module of `net` in eval mode (dropout off) and two calls of `call(net)` equal, bit for bit."
    assert [name for name, m in net.named_modules() if m.training] == []
    with torch.no_grad(): assert torch.equal(call(net), call(net))


def test_every_loader_returns_its_networks_in_eval_mode_whatever_the_source(tmp_path):
    """R15a-3: a pretrain.py .pth came back in training mode (dropout on: a text's p(replaced) changed from call to
    call), its export in eval mode (transformers' `from_pretrained`). Each loader now returns eval mode from each source,
    as transformers does; training sets its own mode (fastai's `Learner.fit`)."""
    from electra.pretrained.export import export_pretrained
    from electra.pretrained.generator import load_generator
    vocab = tmp_path / 'vocab.txt'
    vocab.write_text('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'w{i}' for i in range(V - 5)]) + '\n')
    tok = load_tokenizer(str(vocab))
    cfg = tiny_cfg(dropout=0.1)  # dropout on: a network in training mode gives other outputs at each call
    torch.manual_seed(0)
    model = build_pretraining_model(cfg, MaskingSettings.for_tokenizer(tok))
    paths = export_pretrained(model, tok, tmp_path / 'run')
    ckpt = tmp_path / 'run_1_100%.pth'
    atomic_save({'format': FORMAT, 'config': config_to_dict(cfg), 'tokenizer': tokenizer_state(tok),
                 'model': model.state_dict()}, ckpt)
    enc = tok(['w1 w2 w3 w4 w5 w6', 'w7 w8'], padding=True, return_tensors='pt')
    logits = lambda net: net(**enc).logits
    for source in (ckpt, paths['discriminator']):
        for load in (load_discriminator, loading.load_pretrained):
            _eval_mode_and_repeatable(load(str(source))[0], logits)
    for source in (ckpt, tmp_path / 'run'):  # init_from: a .pth, an export's generator/ and discriminator/
        init = load_init(str(source))
        for net in (init.generator, init.discriminator): _eval_mode_and_repeatable(net, logits)
    _eval_mode_and_repeatable(load_generator(str(paths['generator'])).net, logits)
    # Electric's export: its discriminator and cloze model, alone and in the scorer
    from electra.pretrained.electric import ElectricScorer
    from electra.pretrained.export import load_cloze
    electric = build_pretraining_model(tiny_cfg(objective='electric', dropout=0.1), MaskingSettings.for_tokenizer(tok))
    paths = export_pretrained(electric, tok, tmp_path / 'electric')
    cloze_logits = lambda net: net(enc['input_ids'], enc['attention_mask'].bool(), enc['token_type_ids'])
    _eval_mode_and_repeatable(load_cloze(paths['cloze'], paths['discriminator'])[0], cloze_logits)
    scorer = ElectricScorer.from_export(paths['discriminator'])
    _eval_mode_and_repeatable(scorer.discriminator, logits)
    _eval_mode_and_repeatable(scorer.cloze, cloze_logits)


def test_a_pretraining_checkpoint_says_the_step_its_run_was_at_by_its_content(tmp_path, tmp_path_factory, tiny_dir):
    """R21a-3: fine-tuning from `_25%.pth` named the file only. A pretrain.py checkpoint says the step and the steps
    it records, under any name (here one that says 100%); a folder, a hub name and a torch file of another kind say
    nothing."""
    from electra.pretrained.export import pretraining_progress
    from tests.support.notebook_runs import tiny_pretraining
    pretraining = tiny_pretraining(tmp_path_factory)
    run, run_dir = Path(pretraining['checkpoint']), pretraining['run_dir']
    assert pretraining_progress(run) == 'pretrained to step 20 of 20, a checkpoint of pretrain.py'
    lying = tmp_path / 'tiny_11081_100%.pth'
    lying.write_bytes(run.with_name('tiny_11081_25%.pth').read_bytes())
    assert pretraining_progress(str(lying)) == 'pretrained to step 5 of 20, a checkpoint of pretrain.py'
    continued = tmp_path / 'continued.pth'  # a run from released weights (--init_from) records them
    torch.save({'format': FORMAT, 'step': 3, 'config': {'steps': 10, 'init_from': 'google/electra-small'}}, continued)
    assert pretraining_progress(continued) == ('pretrained to step 3 of 10 from google/electra-small, a checkpoint of '
                                               'pretrain.py')
    converted = save_init_checkpoint(load_init(run_dir), tmp_path / 'converted.pth')  # a conversion's: step 0
    assert pretraining_progress(converted) == f"the weights of {run_dir}, a checkpoint of pretrain.py at step 0"
    torch.save({'weights': torch.zeros(2)}, tmp_path / 'other.pth')
    for source in (tiny_dir, str(tmp_path / 'other.pth'), 'google/electra-small-discriminator', tmp_path / 'none.pth'):
        assert pretraining_progress(source) == '', source
