"""electra/data/hub.py: hub names on a machine that cannot reach the hub."""
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
import transformers

from electra.data.hub import OFFLINE_VARIABLES

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def silent_hub():
    "A TCP server that reads each request's first line and closes the connection unanswered; yields (URL, lines)."
    server = socket.create_server(('127.0.0.1', 0))
    seen = []

    def serve():
        while True:
            try: conn, _ = server.accept()
            except OSError: return
            conn.settimeout(5)
            try: seen.append(conn.recv(4096).split(b'\r\n')[0].decode())
            except OSError: seen.append('')
            conn.close()
    threading.Thread(target=serve, daemon=True).start()
    yield f'http://127.0.0.1:{server.getsockname()[1]}', seen
    server.close()


def cached_tiny_model(hf_home: Path, name: str) -> None:
    "A tiny ELECTRA discriminator and tokenizer laid out in the hub cache as a download of `name` leaves them."
    snapshot = hf_home / 'hub' / f"models--{name.replace('/', '--')}" / 'snapshots' / ('0' * 40)
    config = transformers.ElectraConfig(vocab_size=16, embedding_size=8, hidden_size=8, num_hidden_layers=1,
                                        num_attention_heads=1, intermediate_size=16)
    torch.manual_seed(0)
    transformers.ElectraForPreTraining(config).save_pretrained(snapshot)
    vocab = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'a', 'b']
    transformers.ElectraTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(snapshot)
    (snapshot.parents[1] / 'refs').mkdir()
    (snapshot.parents[1] / 'refs' / 'main').write_text('0' * 40)


def test_unreachable_hub_fails_at_once_and_the_cache_still_serves(silent_hub, tmp_path):
    endpoint, seen = silent_hub
    cached_tiny_model(tmp_path / 'hf', 'someone/tiny-electra')
    script = '''
import json
from pathlib import Path
from electra.config.errors import ConfigError
from electra.data.corpus import BuildSettings, resolve_corpus
from electra.finetuning.tasks.glue.tasks import TASKS
from electra.finetuning.tasks.glue.sources import open_source
from electra.pretrained.export import load_discriminator

def attempt(f):
    try: return f()
    except ConfigError as e: return str(e)

print(json.dumps([
    attempt(lambda: load_discriminator('someone/missing-electra')),
    attempt(lambda: load_discriminator('someone/tiny-electra')[0].config.hidden_size),
    attempt(lambda: resolve_corpus(['hub:someone/corpus'], Path('cache'), BuildSettings())),
    attempt(lambda: open_source('hub').load(TASKS['RTE'], 'train')),
]))
'''
    env = {k: v for k, v in os.environ.items() if k not in OFFLINE_VARIABLES}
    r = subprocess.run([sys.executable, '-c', script], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env={**env, 'HF_ENDPOINT': endpoint, 'HF_HOME': str(tmp_path / 'hf'), 'PYTHONPATH': str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    missing, cached, corpus, glue = json.loads(r.stdout.strip().splitlines()[-1])
    assert missing.startswith(f"model: cannot load the discriminator 'someone/missing-electra' (the hub cannot be "
                              f"reached ({endpoint}: ") and 'not in the local cache' in missing
    assert 'Use local copies instead: a save_pretrained directory' in missing
    assert cached == 8
    assert corpus.startswith(f"corpus 'hub:someone/corpus': the Hugging Face hub cannot be reached ({endpoint}: ")
    assert glue.startswith('data: cannot load nyu-mll/glue/rte from the HF hub') and endpoint in glue
    # one request per name (HEAD of the endpoint), where the libraries' own retries made 5 or more each;
    # huggingface_hub fetches one list of its own once per process
    probes = [line for line in seen if line.startswith('HEAD / ')]
    assert len(probes) == 4 and len(seen) - len(probes) <= 1, seen
