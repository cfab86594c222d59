"""The pretraining job end to end, run through the real driver `pretrain.py` (in-process with runpy, as a user runs it):
checkpoints, export to transformers, exact resume, bad input, held-out evaluation, and learning on real corpora."""
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from transformers import ElectraForPreTraining

from electra.config.errors import ConfigError
from electra.pretraining.learner import RUN_FILES
from electra.training.checkpoint import load_checkpoint
from tests.support.corpora import needs_shared, sotu_slice
from tests.support.pretrain import ROOT, TINY, pretrain
from tests.support.script_end import script_exit

WIKI = ROOT.parent / 'shared' / 'data' / 'corpus' / 'wikipedia_leads.txt'


@pytest.fixture(scope='module')
def straight(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('straight')
    return tmp, pretrain(tmp, *TINY, '--run_name', 'vanilla', '--checkpoint_at', '0.0625,0.125,0.25,0.5,1.0')


def test_checkpoints_named_and_complete(straight):
    tmp, g = straight
    names = sorted(p.name for p in (tmp / 'ckpt').glob('*.pth'))
    assert names == sorted(f'vanilla_11081_{p}%.pth' for p in ['6.25', '12.5', '25', '50', '100'])
    ckpt = load_checkpoint(tmp / 'ckpt' / 'vanilla_11081_50%.pth')
    assert ckpt['step'] == 12 and ckpt['config']['hidden_size'] == 32
    assert {'model', 'opt', 'rng', 'tokenizer', 'config', 'scaler'} <= set(ckpt)
    assert (tmp / 'ckpt' / 'vanilla_11081' / 'config.yaml').exists()
    assert not list((tmp / 'ckpt').glob('.*.tmp'))  # atomic writes leave no partial files


def test_metrics_file(straight):
    tmp, _ = straight
    rows = list(csv.DictReader((tmp / 'ckpt' / 'vanilla_11081' / 'metrics.csv').open()))
    assert [int(r['step']) for r in rows] == [6, 12, 18, 24]
    for r in rows:
        assert float(r['loss']) == pytest.approx(float(r['gen_loss']) + 50 * float(r['disc_loss']), rel=1e-3)
        # the rate step t trained with (set before it, at t - 1 steps done): 5e-4 * min(1, (t-1)/4) * (1 - (t-1)/24)
        t = int(r['step']) - 1
        assert float(r['lr']) == pytest.approx(5e-4 * min(1, t / 4) * (1 - t / 24), rel=1e-5)
        assert int(r['skipped_steps']) == 0


def test_exported_discriminator_matches_own_model(straight):
    tmp, g = straight
    model, tokenizer = g['model'].eval(), g['tokenizer']
    loaded = ElectraForPreTraining.from_pretrained(tmp / 'ckpt' / 'vanilla_11081' / 'discriminator').eval()
    enc = tokenizer(['the first sentence.', 'another, longer example sentence here.'], padding=True, return_tensors='pt')
    with torch.no_grad():
        ours = model.discriminator(**enc).logits
        theirs = loaded(**enc).logits
    assert torch.allclose(ours, theirs, atol=1e-6)
    from transformers import AutoTokenizer, ElectraForMaskedLM
    gen = ElectraForMaskedLM.from_pretrained(tmp / 'ckpt' / 'vanilla_11081' / 'generator')
    assert torch.equal(gen.electra.embeddings.word_embeddings.weight, model.discriminator.electra.embeddings.word_embeddings.weight)
    assert AutoTokenizer.from_pretrained(tmp / 'ckpt' / 'vanilla_11081' / 'discriminator').vocab == tokenizer.vocab


def test_half_then_resume_equals_straight(straight, tmp_path):
    tmp, g = straight
    argv = [*TINY, '--run_name', 'vanilla', '--checkpoint_at', '0.5,1.0']
    pretrain(tmp_path, *argv)
    (tmp_path / 'ckpt' / 'vanilla_11081_100%.pth').unlink()      # as if interrupted after the 50% checkpoint
    resumed = pretrain(tmp_path, *argv, '--resume')
    assert resumed['start_step'] == 12
    final = {k: v for k, v in resumed['model'].state_dict().items()}
    for k, v in g['model'].state_dict().items():
        assert torch.allclose(final[k], v, rtol=0, atol=1e-6), k
    rows = list(csv.DictReader((tmp_path / 'ckpt' / 'vanilla_11081' / 'metrics.csv').open()))
    assert [int(r['step']) for r in rows] == [6, 12, 18, 24]        # no duplicated rows after the resume


def flip_one_bit_in_the_largest_tensor(path: Path) -> None:
    "Damage a checkpoint as a bad disk would: one bit of tensor data flipped; the file still unpickles."
    import zipfile
    with zipfile.ZipFile(path) as z:
        info = max(z.infolist(), key=lambda i: i.file_size)
    data = bytearray(path.read_bytes())
    header = 30 + int.from_bytes(data[info.header_offset + 26:info.header_offset + 28], 'little') \
        + int.from_bytes(data[info.header_offset + 28:info.header_offset + 30], 'little')   # zip local file header
    data[info.header_offset + header + info.file_size // 2] ^= 0x10
    path.write_bytes(bytes(data))


def test_damaged_checkpoint_is_refused_on_resume(straight, tmp_path):
    tmp, _ = straight
    argv = [*TINY, '--run_name', 'vanilla', '--checkpoint_at', '0.5,1.0']
    pretrain(tmp_path, *argv)
    damaged = tmp_path / 'ckpt' / 'vanilla_11081_100%.pth'
    torch.load(damaged, weights_only=True)                             # sound before
    flip_one_bit_in_the_largest_tensor(damaged)
    assert torch.load(damaged, weights_only=True)['step'] == 24        # still unpickles: only the checksum sees it
    with pytest.raises(ConfigError, match=r"vanilla_11081_100%\.pth: damaged: .*checksum.*The run's previous "
                                          r"checkpoint is .*vanilla_11081_50%\.pth"):
        pretrain(tmp_path, *argv, '--resume')
    damaged.write_bytes(damaged.read_bytes()[:1000])                   # truncated: not even a zip
    with pytest.raises(ConfigError, match=r"cannot read this checkpoint: it is cut short.*previous checkpoint is "
                                          r".*vanilla_11081_50%\.pth"):
        pretrain(tmp_path, *argv, '--resume')
    umask = os.umask(0o022)
    os.umask(umask)
    assert (tmp_path / 'ckpt' / 'vanilla_11081_50%.pth').stat().st_mode & 0o777 == 0o666 & ~umask  # not private 0600


def test_interrupted_overwrite_then_resume_never_resumes_the_old_run(tmp_path):
    """An --overwrite run stopped before its first checkpoint (here by a bad corpus, after it removed the old run),
    then --resume: it starts at step 0 rather than resuming the old run's 100% checkpoint."""
    argv = [*TINY, '--run_name', 'again', '--checkpoint_at', '0.5,1.0']
    pretrain(tmp_path, *argv)
    assert (tmp_path / 'ckpt' / 'again_11081_100%.pth').exists()
    with pytest.raises(ConfigError, match='missing.txt'):
        pretrain(tmp_path, *argv, '--overwrite', 'true', '--corpus', str(tmp_path / 'missing.txt'))
    assert not list((tmp_path / 'ckpt').glob('again_11081_*.pth'))     # the old run is gone, not half-kept
    assert (tmp_path / 'ckpt' / '.again_11081.overwriting').exists()
    g = pretrain(tmp_path, *argv, '--resume', '--steps', '12')
    assert g['start_step'] == 0 and int(g['learn'].train_iter) == 12
    assert not (tmp_path / 'ckpt' / '.again_11081.overwriting').exists()  # the new run wrote its checkpoints
    assert sorted(p.name for p in (tmp_path / 'ckpt').glob('again_11081_*.pth')) == ['again_11081_100%.pth',
                                                                                     'again_11081_50%.pth']
    assert load_checkpoint(tmp_path / 'ckpt' / 'again_11081_100%.pth')['step'] == 12


def test_overwrite_trains_a_new_tokenizer_for_new_settings(tmp_path):
    """--overwrite starts the run over: a tokenizer trained for the old run (another vocabulary size, another corpus)
    is not reused. Before: the new run trained with the old run's vocabulary of 500, a warning aside."""
    argv = [*TINY, '--run_name', 'tok', '--steps', '2', '--checkpoint_at', '1.0', '--eval_examples', '0']
    assert len(pretrain(tmp_path, *argv)['tokenizer']) == 500
    g = pretrain(tmp_path, *argv, '--overwrite', 'true', '--vocab_size', '600')
    assert len(g['tokenizer']) == 600
    saved = json.loads(load_checkpoint(tmp_path / 'ckpt' / 'tok_11081_100%.pth')['tokenizer']['tokenizer.json'])
    assert len(saved['model']['vocab']) == 600



def test_overwrite_removes_the_old_runs_tensorboard_events(tmp_path):
    """--overwrite replaces the run's TensorBoard events with its checkpoints: read back, train/loss is the new run's
    metrics.csv alone. Before: the old run's 4 points stayed beside the new run's 2 (steps 2, 4 twice)."""
    from tests.test_trackers import as_written, csv_columns, tensorboard_scalars
    argv = [*TINY, '--run_name', 'ow', '--checkpoint_at', '1.0', '--eval_examples', '0', '--log_every', '2',
            '--logger', 'tensorboard']
    pretrain(tmp_path, *argv, '--steps', '8')
    g = pretrain(tmp_path, *argv, '--steps', '4', '--lr', '1e-3', '--overwrite', 'true')
    folder = g['run_dir'] / 'tensorboard'
    assert len(list(folder.glob('events.out.tfevents.*'))) == 1
    new = csv_columns(g['run_dir'] / 'metrics.csv')['loss']
    assert [s for s, _ in new] == [2, 4]
    assert tensorboard_scalars(folder, 'train/loss') == as_written(new)

def test_one_process_per_run_and_a_dead_ones_lock_taken_over(tmp_path):
    """A second process of the same run is refused, naming the holder; once the holder is killed, its lock is taken
    over, and the partial checkpoint files of this run (a killed write) are removed."""
    run_dir = tmp_path / 'ckpt' / 'demo_11081'
    run_dir.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, '-c', 'import sys, time; from electra.runtime.files import lock_run_dir; '
                               f'lock_run_dir({str(run_dir)!r}); print("locked", flush=True); time.sleep(120)'],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == 'locked'
        with pytest.raises(ConfigError, match=rf'demo_11081/\.lock: run demo_11081 is already running \(PID {holder.pid} '):
            pretrain(tmp_path, *TINY, '--run_name', 'demo')
    finally:
        holder.kill()  # like kill -9: no clean-up, the lock file stays
        holder.wait()
    assert (run_dir / '.lock').read_text().split()[0] == str(holder.pid)
    partial = tmp_path / 'ckpt' / '.demo_11081_50%.pth.k2x9.tmp'  # what a kill during a checkpoint write leaves
    other = tmp_path / 'ckpt' / '.demo2_11081_50%.pth.k2x9.tmp'   # another run's: not this run's to remove
    partial.write_bytes(b'half a checkpoint')
    other.write_bytes(b'half a checkpoint')
    g = pretrain(tmp_path, *TINY, '--run_name', 'demo', '--steps', '6')
    assert g['learn'].train_iter == 6 and not (run_dir / '.lock').exists()  # released when training ended
    assert not partial.exists() and other.exists()


FINISHED = [*TINY, '--steps', '8', '--run_name', 'done', '--checkpoint_at', '0.5,1.0']


@pytest.fixture(scope='module')
def finished(tmp_path_factory):
    "A run of 8 steps that ran to its end and exported, to be copied by each test that resumes it."
    tmp = tmp_path_factory.mktemp('finished')
    pretrain(tmp, *FINISHED)
    return tmp


def copy_of(finished: Path, tmp: Path) -> Path:
    shutil.copytree(finished / 'ckpt', tmp / 'ckpt')
    (tmp / 'cache').symlink_to(finished / 'cache')
    return tmp / 'ckpt'


def files(root: Path) -> dict[str, bytes]:
    "Every file under `root` and its bytes, but the run's log.txt, to which every start of the run adds its lines."
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob('*'))
            if p.is_file() and p.name != 'log.txt'}


def resume_to_its_end(tmp: Path, capsys) -> str:
    "`pretrain.py ... --resume` of the finished run copied to `tmp`: it must end with status 0; its last line."
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        pretrain(tmp, *FINISHED, '--resume')
    assert stop.value.code == 0
    return capsys.readouterr().out.splitlines()[-1]


def test_resuming_a_finished_run_leaves_it_as_it_is(finished, tmp_path, capsys):
    """--resume of a run whose last checkpoint is at its last step: nothing trained, nothing written (checkpoints,
    export, metrics byte for byte as they were), one line saying so, status 0, the run's lock given back."""
    ckpt = copy_of(finished, tmp_path)
    before = files(ckpt)
    assert resume_to_its_end(tmp_path, capsys) == (
        f'run done_11081 finished at step 8; nothing to do: its checkpoints and export ({ckpt / "done_11081"}) are '
        'left as they are.')
    assert files(ckpt) == before  # no .lock left either


@pytest.mark.parametrize('damage', ['generator missing', 'weights cut short', 'other weights'])
def test_resuming_a_finished_run_whose_export_is_damaged_writes_it_from_its_last_checkpoint(finished, tmp_path,
                                                                                           capsys, damage):
    """A kill during the export leaves it missing or cut short; an export of other weights (the untrained model that
    such a resume used to export) is not the run's either: the export is written again from the last checkpoint, the
    same bytes as the run's own export, and nothing is trained."""
    ckpt = copy_of(finished, tmp_path)
    before = files(ckpt)
    disc = ckpt / 'done_11081' / 'discriminator' / 'model.safetensors'
    if damage == 'generator missing': shutil.rmtree(ckpt / 'done_11081' / 'generator')
    if damage == 'weights cut short': disc.write_bytes(disc.read_bytes()[:len(disc.read_bytes()) // 2])
    if damage == 'other weights':
        model = ElectraForPreTraining.from_pretrained(disc.parent)
        torch.nn.init.normal_(model.electra.encoder.layer[0].output.dense.weight)
        model.save_pretrained(disc.parent)
    assert files(ckpt) != before
    assert resume_to_its_end(tmp_path, capsys) == (
        f'run done_11081 finished at step 8; its export in {ckpt / "done_11081"} was missing, incomplete or not the '
        f'weights of its last checkpoint {ckpt / "done_11081_100%.pth"}: written from that checkpoint.')
    assert files(ckpt) == before


def test_resuming_a_finished_run_with_fewer_steps_is_refused(finished, tmp_path):
    ckpt = copy_of(finished, tmp_path)
    before = files(ckpt)
    with pytest.raises(ConfigError, match=r"done_11081_100%\.pth: run done_11081 is at step 8, past --steps 4: "
                                          r"nothing to resume\. Give --steps 8 \(the run is finished\) or more"):
        pretrain(tmp_path, *FINISHED, '--resume', '--steps', '4')
    after = files(ckpt)
    after.pop('done_11081/.lock')  # this process's until it exits (a notebook's kernel may take it again)
    assert after == before


def test_rerun_without_resume_refuses_to_overwrite(straight):
    tmp, _ = straight
    with pytest.raises(ConfigError, match='already has checkpoints.*--resume.*--run_name.*--overwrite'):
        pretrain(tmp, *TINY, '--run_name', 'vanilla', '--overwrite', 'false')


@pytest.mark.parametrize('source', ['vanilla_11081', 'vanilla_11081_100%.pth'])  # an export, a checkpoint
def test_continued_pretraining_starts_from_exactly_the_source_weights(straight, tmp_path, source):
    tmp, g = straight
    (tmp_path / 'cache').symlink_to(tmp / 'cache')  # the same held-out examples, without building them again
    more = pretrain(tmp_path, *TINY, '--run_name', 'more', '--init_from', str(tmp / 'ckpt' / source))
    # the held-out metrics before its first step are the source's last ones (same examples, masks and noise)
    first = (tmp_path / 'ckpt' / 'more_11081' / 'eval_metrics.csv').read_text().splitlines()
    last = (tmp / 'ckpt' / 'vanilla_11081' / 'eval_metrics.csv').read_text().splitlines()
    assert first[1].split(',')[0] == '0' and first[1].split(',')[1:] == last[-1].split(',')[1:]
    assert [int(r.split(',')[0]) for r in first[1:]] == [0, 6, 12, 18, 24]
    # it trained on from there (fresh optimizer, warm-up from step 0) and exported
    assert first[-1] != first[1] and (tmp_path / 'ckpt' / 'more_11081' / 'discriminator' / 'config.json').is_file()
    rows = list(csv.DictReader((tmp_path / 'ckpt' / 'more_11081' / 'metrics.csv').open()))
    assert float(rows[0]['lr']) == pytest.approx(5e-4 * min(1, 5 / 4) * (1 - 5 / 24), rel=1e-5)  # step 6: as a new run
    assert more['model'].generator.electra.embeddings is more['model'].discriminator.electra.embeddings  # tied again
    assert more['tokenizer'].vocab == g['tokenizer'].vocab


def test_a_run_continued_at_a_shorter_length_records_the_length_its_positions_were_trained_at(straight, tmp_path):
    """`--init_from` a run pretrained at 32 with `--max_length 16` exported `pretraining_max_length: 16`, and
    fine-tuning at 32 then said positions 16 to 31 "were never trained" (they are the source's trained rows). The
    length carries over from the source (`init_max_length` in the run's config): the export's config.json and the
    discriminator read back from the run's .pth record 32, the warning is not given at 32, and past it names 32."""
    from electra.objective.model import past_pretraining
    from electra.pretrained.export import load_discriminator
    tmp, _ = straight
    (tmp_path / 'cache').symlink_to(tmp / 'cache')
    pretrain(tmp_path, *TINY, '--run_name', 'short', '--max_length', '16', '--steps', '2', '--warmup_steps', '1',
             '--checkpoint_at', '1.0', '--init_from', str(tmp / 'ckpt' / 'vanilla_11081'))
    run = tmp_path / 'ckpt' / 'short_11081'
    assert json.loads((run / 'discriminator' / 'config.json').read_text())['pretraining_max_length'] == 32
    assert yaml.safe_load((run / 'config.yaml').read_text())['init_max_length'] == 32
    assert ('of up to 16 tokens' in (card := (run / 'discriminator' / 'README.md').read_text()) and
            'Those weights were pretrained at 32 tokens, so its position rows are trained up to 32' in card)
    disc, _ = load_discriminator(tmp_path / 'ckpt' / 'short_11081_100%.pth')
    assert disc.config.pretraining_max_length == 32
    assert past_pretraining(disc.config, 32, 'the model m') == ''
    assert past_pretraining(disc.config, 40, 'the model m') == ('past the 32 tokens the model m was pretrained at: '
                                                               'positions 32 to 39 were never trained')


def test_resume_with_other_shape_or_tokenizer_refused(straight, tmp_path):
    tmp, _ = straight
    with pytest.raises(ConfigError, match="cannot resume: 'hidden_size' was 32 in the checkpoint but is 64"):
        pretrain(tmp, *TINY, '--run_name', 'vanilla', '--resume', '--hidden_size', '64')
    vocab = tmp_path / 'vocab.txt'
    vocab.write_text('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'the', 'a', '.']) + '\n')
    with pytest.raises(ConfigError, match='tokenizer differs'):
        pretrain(tmp, *TINY, '--run_name', 'vanilla', '--resume', '--tokenizer', str(vocab))


@pytest.mark.parametrize('key, value, saved', [
    ('dropout', '0.2', 0.1), ('objective', 'electra_15', 'electra'), ('disc_loss_weight', '10', 50.0),
    ('weight_decay', '0', 0.01), ('warmup_steps', '2', 4), ('min_line_chars', '5', 0)])
def test_a_resume_that_would_train_otherwise_is_refused_naming_the_key_and_the_fix(finished, tmp_path, key, value, saved):
    """Every key that changes what the run trains (the model, the objective, the loss, the optimisation, the examples:
    RESUME_SAME) is the checkpoint's on a resume, or refused before any data is built. Before, only the shapes and the
    data keys were checked: a resume with another dropout or objective went on as another run under the same name."""
    ckpt = copy_of(finished, tmp_path)
    before = files(ckpt)
    with pytest.raises(ConfigError, match=re.escape(f"done_11081_100%.pth: cannot resume: '{key}' was {saved!r} in the "
                                                    f"checkpoint but is ") + rf".*now\. Give --{key} {saved} to continue "
                                                    r"the run, start another with --run_name NAME, or start this one "
                                                    r"over with --overwrite true\.$"):
        pretrain(tmp_path, *FINISHED, '--resume', '--steps', '10', f'--{key}', value)
    after = files(ckpt)
    after.pop('done_11081/.lock')
    assert after == before


@pytest.fixture(scope='module')
def on_a_file(tmp_path_factory):
    "A run of 2 steps on a text file, to be copied by each test that resumes it."
    from electra.data.demo import write_demo_corpus
    tmp = tmp_path_factory.mktemp('on_a_file')
    pretrain(tmp, *ON_A_FILE, '--corpus', str(write_demo_corpus(tmp / 'text' / 'corpus.txt', n_docs=300)))
    return tmp


ON_A_FILE = [*TINY, '--steps', '2', '--run_name', 'file', '--checkpoint_at', '1.0', '--eval_examples', '0']


def test_a_resume_checks_its_corpus_by_content_and_says_what_it_may_change(on_a_file, tmp_path, capsys):
    """The corpus moved to another folder (and so touched): the same examples, the run goes on, said in one line, as
    more steps and a lower learning rate are. A word of it edited: refused, naming the corpus and the fix (before, the
    run went on over other examples, the corpus's path being the same)."""
    for name in ('ckpt', 'cache'): shutil.copytree(on_a_file / name, tmp_path / name)
    corpus = tmp_path / 'elsewhere' / 'corpus.txt'
    corpus.parent.mkdir()
    shutil.copy(on_a_file / 'text' / 'corpus.txt', corpus)  # a new modification time
    capsys.readouterr()
    g = pretrain(tmp_path, *ON_A_FILE, '--corpus', str(corpus), '--resume', '--steps', '3', '--lr', '2.5e-4')
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith('resume:')]
    assert said == ["resume: steps was 2 in the checkpoint and is 3 now; lr was 0.0005 in the checkpoint and is 0.00025 "
                    "now: the run goes on from step 2 with the new values.",
                    f"resume: corpus was ['{on_a_file / 'text' / 'corpus.txt'}'] in the checkpoint and is ['{corpus}'] "
                    "now: the same examples, so the run goes on.",
                    # an extended run: its old end keeps its percent of the 2 steps it was written under
                    "resume: the run now has 3 steps; its checkpoints written under fewer keep their percent of those, "
                    "renamed file_11081_100%_of_2.pth"]
    assert g['start_step'] == 2 and load_checkpoint(tmp_path / 'ckpt' / 'file_11081_100%.pth')['step'] == 3
    assert load_checkpoint(tmp_path / 'ckpt' / 'file_11081_100%_of_2.pth')['step'] == 2
    corpus.write_text(corpus.read_text().replace(' the ', ' a ', 1))
    with pytest.raises(ConfigError, match=re.escape(f"file_11081_100%.pth: cannot resume: the corpus ['{corpus}'] is "
                                                    "not the one this run was trained on") + r'.*Restore that corpus'):
        pretrain(tmp_path, *ON_A_FILE, '--corpus', str(corpus), '--resume', '--steps', '4')


def test_a_finished_run_resumed_on_an_edited_corpus_is_refused_as_an_unfinished_one(on_a_file, tmp_path, capsys):
    """Fresh eyes round 3 (R3-2): a --resume of a finished run ended 'finished at step 2; nothing to do', status 0,
    before its corpus was compared with the checkpoint's, so a comparison over a corpus edited since went on, its old
    runs beside new ones on the new text. Now refused as the resume of an unfinished run is; the same corpus: nothing to do."""
    for name in ('ckpt', 'cache', 'text'): shutil.copytree(on_a_file / name, tmp_path / name)
    corpus = tmp_path / 'text' / 'corpus.txt'
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        pretrain(tmp_path, *ON_A_FILE, '--corpus', str(corpus), '--resume')
    assert done.value.code == 0 and 'run file_11081 finished at step 2; nothing to do' in capsys.readouterr().out
    corpus.write_text(corpus.read_text().replace(' the ', ' a ', 1))
    before = {p: p.read_bytes() for p in (tmp_path / 'ckpt').rglob('*') if p.is_file() and p.name not in ('.lock', 'log.txt')}
    with pytest.raises(ConfigError, match=re.escape(f"file_11081_100%.pth: cannot resume: the corpus ['{corpus}'] is "
                                                    "not the one this run was trained on") + r'.*Restore that corpus'):
        pretrain(tmp_path, *ON_A_FILE, '--corpus', str(corpus), '--resume')
    assert 'nothing to do' not in capsys.readouterr().out
    assert {p: p.read_bytes() for p in before} == before


@pytest.mark.parametrize('make,match', [
    (lambda d: d / 'missing.txt', 'missing.txt'),
    (lambda d: (d / 'empty.txt').write_text('') and None or d / 'empty.txt', 'empty.txt'),
    (lambda d: (d / 'bin.txt').write_bytes(b'\x00\xff\xfe binary \x89PNG' * 50) and None or d / 'bin.txt', 'bin.txt'),
])
def test_bad_corpus_named(tmp_path, make, match):
    path = make(tmp_path)
    with pytest.raises(ConfigError, match=match):
        pretrain(tmp_path, *TINY, '--corpus', str(path))


def test_unwritable_output_dir(tmp_path):
    blocker = tmp_path / 'a_file'
    blocker.write_text('not a directory')
    with pytest.raises(ConfigError, match='output_dir: cannot write to'):
        pretrain(tmp_path, *TINY, '--output_dir', str(blocker / 'sub'))


@pytest.mark.parametrize('name', ['discriminator', 'tokenizer'])
def test_an_export_folder_that_cannot_be_made_stops_the_run_before_its_first_step(tmp_path, name):
    "A file where the run writes its tokenizer (before training) or its export (after): refused before any step."
    run_dir = tmp_path / 'ckpt' / 'blocked_11081'
    run_dir.mkdir(parents=True)
    (run_dir / name).write_text('in the way')
    with pytest.raises(ConfigError, match=rf"^output_dir: cannot write to '{run_dir / name}' \('{run_dir / name}' is a "
                                          r"file, not a folder\)\. .*or move that file away\.$"):
        pretrain(tmp_path, *TINY, '--run_name', 'blocked')
    assert not list((tmp_path / 'ckpt').glob('*.pth')) and not (tmp_path / 'cache').exists()


@pytest.mark.parametrize('name', ['config.yaml', 'metrics.csv', 'eval_metrics.csv', 'log.txt', 'losses.png',
                                  'schedules.yaml', '../blocked_11081_100%.pth'])
def test_a_folder_where_the_run_writes_a_file_stops_it_before_its_first_step(tmp_path, name):
    """A folder where the run writes a file (its record, metrics, log and plot, a checkpoint beside the run's folder):
    refused before any step, naming it. Before: a traceback (IsADirectoryError), the plot's only after training."""
    run_dir = tmp_path / 'ckpt' / 'blocked_11081'
    (run_dir / name).mkdir(parents=True)
    path = (run_dir / name).resolve()
    with pytest.raises(ConfigError, match=rf"^output_dir: cannot write to '{re.escape(str(path))}' \(it is a folder, "
                                          r"not a file\)\. Move that folder away, or choose another directory with "
                                          r"--output_dir\.$"):
        pretrain(tmp_path, *TINY, '--run_name', 'blocked')
    assert not [p for p in (tmp_path / 'ckpt').glob('*.pth') if p.is_file()] and not (tmp_path / 'cache').exists()


def test_every_file_of_a_run_s_folder_is_one_checked_before_its_first_step(straight):
    "A file the run writes in its folder but not named in RUN_FILES would meet a folder in its place only when written."
    tmp, _ = straight
    written = {p.name for p in (tmp / 'ckpt' / 'vanilla_11081').iterdir() if p.is_file() and not p.name.startswith('.')}
    assert written == set(RUN_FILES)


def test_uncreatable_cache_dir_named(tmp_path):
    with pytest.raises(ConfigError, match=r"cache_dir: cannot write to '/proc/electra_cache'.*--cache_dir"):
        pretrain(tmp_path, *TINY, '--cache_dir', '/proc/electra_cache')


def test_neptune_offline_logger_from_another_folder(tmp_path):
    # NEPTUNE_MODE=offline (tests/conftest.py): no account, no network; the run is stored under ./.neptune
    pretrain(tmp_path, *TINY, '--steps', '6', '--logger', 'neptune', cwd=tmp_path)
    # neptune's offline operation log stores each metric's path as a list of names
    logs = list((tmp_path / '.neptune').rglob('data-*.log'))
    assert logs and any(b'"path": ["train", "loss"]' in p.read_bytes() for p in logs)


def one_megabyte_document(tmp: Path) -> str:
    "A corpus of one document on one 1.5 MB line: the build skips lines over 1 MiB, so nothing is left."
    (tmp / 'one.txt').write_text('word ' * 300_000 + '\n')
    return str(tmp / 'one.txt')


@pytest.mark.parametrize('argv, message', [
    (['--stpes', '3'], "command line: unknown key 'stpes'. Did you mean 'steps'? Run with --help for the list of keys."),
    (['--dropout', '1.5'], "command line: key 'dropout': 1.5 is not a number in [0, 1) (hidden and attention dropout of "
                           "both networks)"),
    (['--seed', '-1'], "command line: key 'seed': -1 is not a whole number in [0, 2**32) (random seed for data order, "
                       "masking, sampling and initialisation)"),
    (['--lr', 'nan'], "command line: key 'lr': nan is not a finite number > 0 (peak learning rate)")])
def test_bad_input_is_one_line_and_status_2(tmp_path, capsys, argv, message):
    """The whole of stderr is the one error line, status 2: no traceback, no warning around it. In this process (a
    process to start costs seconds): what pretrain.py raises, given to the hook it installs, as Python would; the corpus
    case below, which imports and runs the most before its error, in a real process."""
    assert script_exit(lambda: pretrain(tmp_path, *argv)) == (2, [])
    assert capsys.readouterr().err == f'error: {message}\n'


def test_bad_corpus_is_one_line_and_status_2_in_a_real_process(tmp_path):
    "The whole of stderr of pretrain.py is the one error line: no traceback, no warning around it, importing included."
    r = subprocess.run([sys.executable, 'pretrain.py', '--output_dir', str(tmp_path / 'ckpt'), '--cache_dir',
                        str(tmp_path / 'cache'), '--corpus', one_megabyte_document(tmp_path), '--warmup_steps', '1'],
                       cwd=ROOT, capture_output=True, text=True, env={**os.environ, 'HF_HUB_OFFLINE': '1'})
    assert (r.returncode, r.stderr) == (2, f'error: no text to train a tokenizer on in {tmp_path}/one.txt (skipped 1 '
                                           'lines over 1 MiB). Give a corpus with readable lines of text, or a '
                                           '`tokenizer`.\n')


@pytest.mark.skipif(not WIKI.exists(), reason='../shared/data is absent')
def test_learns_on_wikipedia_leads(tmp_path):
    pretrain(tmp_path, '--config', 'demo', '--corpus', str(WIKI), '--run_name', 'wiki', '--device', 'cpu')
    rows = list(csv.DictReader((tmp_path / 'ckpt' / 'wiki_11081' / 'metrics.csv').open()))
    first, last = rows[0], rows[-1]
    assert float(last['loss']) < 0.8 * float(first['loss'])
    # always answering "original" scores 1 - (share of replaced tokens); the discriminator must beat that
    assert float(last['disc_accuracy']) > 1 - float(last['replaced_fraction'])
    assert float(last['replaced_precision']) > 0.5   # what it flags as replaced mostly is


@needs_shared
def test_sotu_trains_with_held_out_evaluation(tmp_path):
    from tests.support.pretrain import TINY, pretrain
    corpus = sotu_slice(tmp_path / 'sotu', 4)
    g = pretrain(tmp_path, *TINY, '--corpus', str(corpus), '--run_name', 'sotu', '--eval_examples', '16')
    import csv
    rows = list(csv.DictReader((tmp_path / 'ckpt' / 'sotu_11081' / 'eval_metrics.csv').open()))
    assert [int(r['step']) for r in rows] == [6, 12, 18, 24]
    for r in rows:
        assert int(r['examples']) == 16
    assert float(rows[-1]['disc_loss']) < float(rows[0]['disc_loss'])
    assert len(g['held_out']) == 16 and len(g['dataset']) + 16 == len(g['parts'][0])


def test_the_readme_demo_preset_warns_of_nothing(tmp_path, recwarn, capsys):
    """The README's first command uses the demo preset as it is: nothing in its settings warns (a held-out share the
    corpus cannot give, a warm-up as long as the run, ...). Only the steps are cut, with the warm-up and the
    checkpoints (the preset's fractions of 3 steps fall on one step, which is said)."""
    pretrain(tmp_path, '--config', 'demo', '--steps', '3', '--warmup_steps', '1', '--threads', '1', '--log_every', '3',
             '--checkpoint_at', '1.0')
    assert [str(w.message) for w in recwarn if issubclass(w.category, UserWarning)] == []
    out = capsys.readouterr()
    assert 'warning' not in (out.out + out.err).lower() and '225 held out' in out.out


def test_a_corpus_s_repeated_text_and_other_formats_in_the_driver(tmp_path, capsys):
    """pretrain.py on a folder holding a file and a link to it: one line says what was dropped, and the held-out
    examples share no example with training. The same folder with a PyTorch checkpoint in it: refused before any work
    (no tokenizer trained, nothing cached), naming the checkpoint."""
    from electra.data.demo import write_demo_corpus
    folder = tmp_path / 'corpus'
    text = write_demo_corpus(folder / 'demo.txt', n_docs=300)
    (folder / 'again.txt').symlink_to(text)
    g = pretrain(tmp_path, *TINY, '--steps', '1', '--corpus', str(folder), '--eval_examples', '16')
    out = capsys.readouterr().out.splitlines()
    assert f'corpus {folder}: 2 files, 1 duplicate file and 0 repeated documents dropped' in out
    held = {tuple(ids) for ids in g['held_out']['input_ids']}
    assert len(held) == 16 and not held & {tuple(ids) for ids in g['dataset']['input_ids']}
    torch.save({'weight': torch.zeros(2)}, folder / 'model.pth')
    with pytest.raises(ConfigError, match=re.escape(f"corpus directory {folder}: {folder / 'model.pth'} is a PyTorch "
                                                    "checkpoint, not text.")):
        pretrain(tmp_path / 'second', *TINY, '--steps', '1', '--corpus', str(folder))
    # the run's lock, and its log holding the refusal: no checkpoint, no cache
    assert sorted(f.name for f in (tmp_path / 'second').rglob('*') if f.is_file()) == ['.lock', 'log.txt']


def test_a_weighted_run_says_each_corpus_s_share_and_passes_and_its_card_the_weights(tmp_path, capsys):
    """With corpus_weights the run said '... training examples' as without them: not the share each corpus gets, nor
    that the small one is seen many times over. By hand: 24 steps x 8 rows = 192 rows, weights 1:3, so 48 and 144."""
    from electra.data.demo import write_demo_corpus
    big = write_demo_corpus(tmp_path / 'a' / 'a.txt', n_docs=200)
    small = write_demo_corpus(tmp_path / 'b' / 'b.txt', n_docs=20, seed=5)
    g = pretrain(tmp_path, *TINY, '--corpus', f'{big},{small}', '--corpus_weights', '1,3', '--eval_examples', '0')
    sizes = [len(p) for p in g['train_parts']]
    total = sum(sizes)  # the sampler's slots: total split 1:3 by largest remainder
    exact = [total / 4, 3 * total / 4]
    quotas = [int(e) for e in exact]
    quotas[max(range(2), key=lambda k: exact[k] - quotas[k])] += total - sum(quotas)
    rows = [24 * 8 * q / total for q in quotas]
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith('corpus_weights:')]
    assert said == ['corpus_weights: ' + ', '.join(
        f"{name} {w} ({q / total:.0%} of the rows, about {r:.0f} in 24 steps: {r / n:.2f} passes over its {n} examples)"
        for name, w, q, r, n in zip((big, small), (1, 3), quotas, rows, sizes))]
    card = (g['run_dir'] / 'discriminator' / 'README.md').read_text(encoding='utf-8')
    assert f'Corpus: {big} (weight 1), {small} (weight 3); tokenizer:' in card


@pytest.mark.parametrize('eval_examples', ['0', '30'])
def test_a_weighted_corpus_entry_that_de_duplication_empties_is_refused_naming_it(tmp_path, eval_examples):
    """An entry whose every document repeats an earlier entry's keeps no example, and a weight has nothing to draw
    from: a ValueError traceback from the batch sampler ('parts [120, 0, 1191] must be positive ... and weights [1.0,
    5.0, 1.0] must be positive'), after a warning about its held-out share that did not help."""
    from electra.data.demo import write_demo_corpus
    text = write_demo_corpus(tmp_path / 'a' / 'a.txt', n_docs=200)
    again = tmp_path / 'c' / 'c.txt'
    again.parent.mkdir()
    again.write_text('\n\n'.join(text.read_text(encoding='utf-8').split('\n\n')[:10]) + '\n', encoding='utf-8')
    with pytest.raises(ConfigError, match=rf"^corpus_weights: {re.escape(str(again))} has no examples left \(each of "
                                          r"its documents repeats one of an earlier entry, or it holds none\), so its "
                                          r"weight 5\.0 has nothing to draw from\. Drop it from corpus and its "
                                          r"weight from corpus_weights, or set deduplicate false to train on it again\.$"):
        pretrain(tmp_path, *TINY, '--steps', '1', '--corpus', f'{text},{again}', '--corpus_weights', '1,5',
                 '--eval_examples', eval_examples)


def test_a_run_s_config_yaml_names_its_corpus_by_absolute_path_and_reads_it_from_any_folder(tmp_path, capsys):
    """README: "The resolved config is saved beside the run as `config.yaml`, loadable again with `--config`". A corpus
    typed as a relative path was saved as typed: loaded from another folder holding another `dup/a.txt`, the run
    trained on that one with status 0 (27 examples against 542). Saved absolute, it reads the original from anywhere:
    the same examples (the checkpoints' corpus digest), said in the card too."""
    from electra.data.demo import write_demo_corpus
    first, other = tmp_path / 'first', tmp_path / 'other'
    write_demo_corpus(first / 'dup' / 'a.txt', n_docs=200)
    write_demo_corpus(other / 'dup' / 'a.txt', n_docs=20)
    one = [*TINY, '--steps', '1', '--checkpoint_at', '1.0', '--eval_examples', '0', '--run_name', 'rel']
    g = pretrain(tmp_path, *one, '--corpus', 'dup/a.txt', cwd=first)
    saved = yaml.safe_load((g['run_dir'] / 'config.yaml').read_text(encoding='utf-8'))
    assert saved['corpus'] == [str(first / 'dup' / 'a.txt')] and saved['output_dir'] == str(tmp_path / 'ckpt')
    assert f"Corpus: {first / 'dup' / 'a.txt'};" in (g['run_dir'] / 'discriminator' / 'README.md').read_text()
    again = pretrain(tmp_path, '--config', str(g['run_dir'] / 'config.yaml'), '--output_dir', str(tmp_path / 'ckpt2'),
                     cwd=other)
    digest = [load_checkpoint(tmp_path / f / 'rel_11081_100%.pth')['corpus_digest'] for f in ('ckpt', 'ckpt2')]
    assert digest[0] == digest[1] and len(again['dataset']) == len(g['dataset'])


def _checkpoint_names_hold_their_steps(folder: Path, total: int) -> dict[str, int]:
    """Each checkpoint of `folder` by name -> the step it records; asserting that its name is true: the percent in a
    plain name is of `total` (the run's steps now), that of a `_of_<N>` name of the N steps it was written under."""
    out = {}
    for p in sorted(folder.glob('*.pth')):
        m = re.fullmatch(r'.*_([0-9.]+)%(?:_of_(\d+))?\.pth', p.name)
        step = load_checkpoint(p)['step']
        of = int(m[2]) if m[2] else total
        assert max(1, round(float(m[1]) / 100 * of)) == step, (p.name, step)
        assert load_checkpoint(p)['config']['steps'] == of, p.name
        out[p.name] = step
    return out


def test_an_extended_run_stopped_by_ctrl_c_resumes_from_its_latest_step_with_true_names_and_card(tmp_path, monkeypatch,
                                                                                                  capsys):
    """A finished 12-step run extended to 24 (--resume --steps 24) and stopped by Ctrl-C at step 18: the printed
    command went back to the old end (step 12, its `100%` file named higher than the stop's `75%`) and trained steps
    12-24 again, dropping the 6 done; the old `50%` file then held 25% of the run. Now the resume takes the latest
    checkpoint by the step it records, the checkpoints written under 12 steps are renamed `..._of_12.pth` (the old
    end is kept, loadable), and the card and schedule record say both schedules trained."""
    from electra.pretraining.callbacks import StopOnInterrupt
    from electra.runtime.errors import TrainingStopped
    argv = [*TINY, '--run_name', 'ext', '--checkpoint_at', '0.5,1.0']
    pretrain(tmp_path, *argv[:1], '12', *argv[2:])
    plain = StopOnInterrupt.after_batch

    def ctrl_c_at_18(self):
        if self.train_iter == 18: self._request(signal.SIGINT, None)
        return plain(self)
    monkeypatch.setattr(StopOnInterrupt, 'after_batch', ctrl_c_at_18)
    with pytest.raises(TrainingStopped, match=r'at step 18 of 24 by Ctrl-C; checkpoint \S+ext_11081_75%\.pth written'):
        pretrain(tmp_path, *argv, '--resume')
    monkeypatch.setattr(StopOnInterrupt, 'after_batch', plain)
    capsys.readouterr()
    resumed = pretrain(tmp_path, *argv, '--resume')
    assert resumed['start_step'] == 18 and 'starting at step 18 of 24' in capsys.readouterr().out
    steps = _checkpoint_names_hold_their_steps(tmp_path / 'ckpt', 24)
    assert steps == {'ext_11081_50%_of_12.pth': 6, 'ext_11081_100%_of_12.pth': 12, 'ext_11081_75%.pth': 18,
                     'ext_11081_50%.pth': 12, 'ext_11081_100%.pth': 24} or steps == {
                     'ext_11081_50%_of_12.pth': 6, 'ext_11081_100%_of_12.pth': 12, 'ext_11081_75%.pth': 18,
                     'ext_11081_100%.pth': 24}
    card = (tmp_path / 'ckpt' / 'ext_11081' / 'discriminator' / 'README.md').read_text()
    assert ("so its learning rate followed more than one schedule (`schedules.yaml`): steps 0 to 12 under a schedule "
            "of 12 steps (peak 0.0005, 4 warm-up steps; it ran to the schedule's end), then steps 12 to 24 under a "
            "schedule of 24 steps (peak 0.0005, 4 warm-up steps; it ran to the schedule's end).") in card
    assert [s['steps'] for s in load_checkpoint(tmp_path / 'ckpt' / 'ext_11081_100%.pth')['schedules']] == [12, 24]
    # a shorter --steps than the run reached is refused before any line says the run goes on
    with pytest.raises(ConfigError, match=r'is at step 24, past --steps 6'):
        pretrain(tmp_path, *argv[:1], '6', *argv[2:], '--resume')
    said = capsys.readouterr().out
    assert 'goes on' not in said and 'starting at step' not in said, said


@pytest.mark.parametrize('flags', [['--overwrite', 'false'], ['--resume'], ['--resume', '--overwrite', 'true']])
def test_a_run_folder_holding_an_export_without_checkpoints_is_refused_not_replaced(tmp_path, flags):
    """A finished run whose .pth files were removed keeps its export (the run's main product): starting the run again
    is refused before any data is built, naming the folder and the fix; nothing changes. With --resume (the demo
    preset sets overwrite: true) too: there is nothing to resume. Before: it trained from step 0 and replaced the
    export, status 0."""
    run = tmp_path / 'ckpt' / 'keep_11081'
    (run / 'discriminator').mkdir(parents=True)
    for name, text in [('discriminator/model.safetensors', 'weights'), ('config.yaml', 'steps: 4\n'),
                       ('metrics.csv', 'step,loss\n4,1.0\n'), ('log.txt', 'the first run\n')]:
        (run / name).write_text(text)
    with pytest.raises(ConfigError) as e:
        pretrain(tmp_path, *TINY, '--run_name', 'keep', *flags)
    assert str(run) in str(e.value) and '--overwrite true' in str(e.value) and '--run_name' in str(e.value)
    assert ('without --resume' in str(e.value)) == ('--resume' in flags)
    assert 'no checkpoint' in str(e.value) and 'discriminator' in str(e.value)
    assert (run / 'discriminator' / 'model.safetensors').read_text() == 'weights'
    assert (run / 'metrics.csv').read_text() == 'step,loss\n4,1.0\n' and not (tmp_path / 'cache').exists()
    assert (run / 'config.yaml').read_text() == 'steps: 4\n' and (run / 'log.txt').read_text().startswith('the first run\n')


def exported_source(finished: Path, tmp: Path) -> Path:
    "The finished run's export (discriminator/, generator/) copied outside any output folder: weights to start from."
    source = tmp / 'source'
    for net in ('discriminator', 'generator'): shutil.copytree(finished / 'ckpt' / 'done_11081' / net, source / net)
    return source


def saved_init_from(run: Path) -> str:
    import yaml
    return yaml.safe_load((run / 'config.yaml').read_text())['init_from']


def test_init_from_on_a_resume_of_a_run_begun_from_scratch_is_refused_and_the_fixes_it_names_work(finished, tmp_path):
    """A resume continues its own weights: pretrain.py loads --init_from's only at step 0. Given on a resume of a run
    that began from a fresh initialisation, it was taken (status 0) and config.yaml and the card said the run
    continued from its weights, which played no part. Refused in one line before anything is written; the two fixes
    it names (the resume without it, another --run_name with it) are run."""
    ckpt, source = copy_of(finished, tmp_path), exported_source(finished, tmp_path)
    before = files(ckpt)
    with pytest.raises(ConfigError) as e:
        pretrain(tmp_path, *FINISHED, '--resume', '--steps', '12', '--init_from', str(source))
    assert str(e.value) == (
        f"init_from: run done_11081 began from a fresh initialisation (its checkpoint {ckpt / 'done_11081_100%.pth'} "
        f"records no init_from), and a resume goes on from the run's own weights, never {source}'s. Drop --init_from "
        f"to continue the run, or start a run from {source} with another --run_name NAME.")
    after = files(ckpt)
    after.pop('done_11081/.lock', None)
    assert after == before
    g = pretrain(tmp_path, *FINISHED, '--resume', '--steps', '12')
    assert g['start_step'] == 8 and saved_init_from(ckpt / 'done_11081') == ''
    g = pretrain(tmp_path, *FINISHED, '--run_name', 'other', '--init_from', str(source))
    assert g['start_step'] == 0 and saved_init_from(ckpt / 'other_11081') == str(source)


def test_a_resume_of_a_run_begun_from_weights_goes_on_without_repeating_init_from(finished, tmp_path, capsys):
    """`--resume` of an --init_from run "continues from its own checkpoints" (README): without --init_from it was
    refused (the tokenizer called different, a fix that failed in turn). It takes the checkpoint's init_from, says so
    in one line, and trains exactly as the resume that repeats --init_from (the same exported weights); a --tokenizer
    on such a resume is refused, the run's tokenizer being that of its weights, kept in its checkpoint."""
    source = exported_source(finished, tmp_path)
    start = [*TINY, '--steps', '8', '--run_name', 'fx', '--checkpoint_at', '0.5,1.0']
    pretrain(tmp_path / 'a', *start, '--init_from', str(source))
    shutil.copytree(tmp_path / 'a', tmp_path / 'b')
    capsys.readouterr()
    g = pretrain(tmp_path / 'a', *start, '--steps', '12', '--resume')
    assert g['start_step'] == 8
    assert (f"resume: run fx_11081 began from the weights of {source} (init_from in its checkpoint "
            f"{tmp_path / 'a' / 'ckpt' / 'fx_11081_100%.pth'}): it goes on from its own checkpoint, with its tokenizer."
            ) in capsys.readouterr().out.splitlines()
    run = tmp_path / 'a' / 'ckpt' / 'fx_11081'
    assert saved_init_from(run) == str(source)
    assert f'continued from the weights of {source}' in (run / 'discriminator' / 'README.md').read_text()
    pretrain(tmp_path / 'b', *start, '--steps', '12', '--resume', '--init_from', str(source))
    weights = lambda root: (root / 'ckpt' / 'fx_11081' / 'discriminator' / 'model.safetensors').read_bytes()
    assert weights(tmp_path / 'a') == weights(tmp_path / 'b')
    shutil.copytree(source / 'discriminator', tmp_path / 'tok')  # their very tokenizer, a copy
    with pytest.raises(ConfigError) as e:
        pretrain(tmp_path / 'a', *start, '--steps', '16', '--resume', '--tokenizer', str(tmp_path / 'tok'))
    assert str(e.value) == (f"tokenizer: run fx_11081 began from the weights of {source}, and goes on with their "
                            "tokenizer, kept in its checkpoint: drop --tokenizer to continue it.")
    assert pretrain(tmp_path / 'a', *start, '--steps', '16', '--resume')['start_step'] == 12  # the fix it names


def test_a_resume_given_another_tokenizer_is_refused_with_a_fix_that_works(finished, tmp_path):
    """The refusal's fix was "pass the run's own tokenizer/ with --tokenizer", a folder inside the output folder, which
    is refused in turn. The run trained its own tokenizer at its start: the fix is to drop --tokenizer, and it works."""
    from transformers import AutoTokenizer
    ckpt = copy_of(finished, tmp_path)
    run = ckpt / 'done_11081' / 'discriminator'  # its export: the tokenizer it trained at its start
    vocab = tmp_path / 'vocab.txt'
    vocab.write_text('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'the', 'a', '.']) + '\n')
    with pytest.raises(ConfigError) as e:
        pretrain(tmp_path, *FINISHED, '--resume', '--steps', '12', '--tokenizer', str(vocab))
    assert str(e.value) == (f"{ckpt / 'done_11081_100%.pth'}: cannot resume: the tokenizer differs from the one this "
                            f"checkpoint was trained with (8 entries now, {len(AutoTokenizer.from_pretrained(run))} "
                            "then). Drop --tokenizer: the run goes on with the tokenizer "
                            "it trained at its start (its tokenizer/).")
    assert pretrain(tmp_path, *FINISHED, '--resume', '--steps', '12')['start_step'] == 8


def test_a_resume_over_the_runs_own_tokenizer_edited_names_that_folder_and_a_fix_that_works(finished, tmp_path):
    """The run's own tokenizer/ (trained at its start) edited by hand, no --tokenizer given: refused with "Drop
    --tokenizer", which was not given (R20a-3). The line names that folder, and the fix it gives works: the folder
    removed, the run trains it again from its corpus, the same, and goes on."""
    import json
    ckpt = copy_of(finished, tmp_path)
    own = ckpt / 'done_11081' / 'tokenizer'
    kept = (own / 'tokenizer.json').read_text(encoding='utf-8')
    data = json.loads(kept)
    vocab = data['model']['vocab']
    by_id = sorted(vocab, key=vocab.get)
    a, b = by_id[100], by_id[101]
    vocab[a], vocab[b] = 101, 100
    (own / 'tokenizer.json').write_text(json.dumps(data), encoding='utf-8')
    with pytest.raises(ConfigError) as e:
        pretrain(tmp_path, *FINISHED, '--resume', '--steps', '12')
    assert str(e.value) == (f"{ckpt / 'done_11081_100%.pth'}: cannot resume: the run's own tokenizer {own}, trained "
                            f"at its start, has changed since (2 entries differ, the first at id 100: {b!r} now, {a!r} "
                            "then). Restore it, or remove that folder for the run to train it again from its corpus "
                            "(the same, with the corpus unchanged), or start another run with --run_name NAME.")
    shutil.rmtree(own)
    assert pretrain(tmp_path, *FINISHED, '--resume', '--steps', '12')['start_step'] == 8  # the fix it names
    assert (own / 'tokenizer.json').read_text(encoding='utf-8') == kept


def test_a_resume_over_a_tokenizer_file_edited_in_place_names_the_change(tmp_path):
    """A run begun with --tokenizer vocab.txt whose file was edited since is refused on a resume; the fix was "give
    --tokenizer vocab.txt", the path typed already. The line says the file changed, where (the first entry that
    differs, both spellings, how many differ) and that restoring it, or another run, is the way on."""
    g = pretrain(tmp_path, *TINY, '--steps', '4', '--run_name', 'own')
    entries = sorted(g['tokenizer'].vocab, key=g['tokenizer'].vocab.get)
    vocab = tmp_path / 'vocab.txt'
    vocab.write_text('\n'.join(entries) + '\n')
    start = [*TINY, '--run_name', 'own2', '--tokenizer', str(vocab), '--checkpoint_at', '1.0']
    pretrain(tmp_path, *start, '--steps', '4')
    i, j = len(entries) - 2, len(entries) - 1
    entries[i], entries[j] = entries[j], entries[i]
    vocab.write_text('\n'.join(entries) + '\n')
    with pytest.raises(ConfigError) as e:
        pretrain(tmp_path, *start, '--steps', '6', '--resume')
    ckpt = tmp_path / 'ckpt' / 'own2_11081_100%.pth'
    assert str(e.value) == (
        f"{ckpt}: cannot resume: the tokenizer {vocab} has changed since this run began (2 entries differ, the first "
        f"at id {i}: {entries[i]!r} now, {entries[j]!r} then). Restore that file to continue the run, or start "
        "another with --run_name NAME.")


def test_the_walkthrough_shows_each_slot_s_own_sample_and_what_the_discriminator_saw(tmp_path):
    """R29b-3: with mask_mode with_replacement a position drawn in several slots showed one token for every slot (the
    token written into the input), though each slot draws its own sample; the input itself was written by a scatter
    (one slot's sample), not as the model writes it (the floor of the slots' mean, the official scatter_update)."""
    import torch
    from electra.objective.masking import write_at_positions
    from electra.tools.walkthrough import generator_samples
    g = pretrain(tmp_path, *TINY, '--steps', '1', '--eval_examples', '0', '--mask_mode', 'with_replacement',
                 '--mask_prob', '0.4')
    rtd, tok = g['rtd'], g['tokenizer']
    table = generator_samples(rtd, tok, n=rtd.original.shape[0])
    written = write_at_positions(rtd.masked, rtd.positions, rtd.sampled, rtd.chosen)
    assert torch.equal(rtd.corrupted, written)
    slots = [(r, s) for r in range(rtd.original.shape[0]) for s in range(rtd.positions.shape[1]) if rtd.chosen[r, s]]
    assert len(table) == len(slots)
    for (r, s), row in zip(sorted(slots, key=lambda rs: (rs[0], int(rtd.positions[rs]), rs[1])), table.itertuples()):
        p = int(rtd.positions[r, s])
        assert (row.example, row.position) == (r, p)
        assert row.sample == tok.convert_ids_to_tokens(int(rtd.sampled[r, s]))
        assert row._6 == tok.convert_ids_to_tokens(int(written[r, p]))  # 'discriminator input'
    repeated = table.groupby(['example', 'position'])['sample'].nunique()
    assert (repeated > 1).any()  # slots of one position drew other tokens, which the table now shows
