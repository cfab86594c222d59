#!/usr/bin/env bash
# The package as another project installs it: the wheel built (offline, from a copy of the sources, so the checkout is
# left as it is), installed into a virtual environment outside the checkout that reuses what requirements.lock
# installed (--system-site-packages; --no-deps --no-index: nothing downloaded); then, from an empty folder, the demo
# pretraining (its stdout into a reader that stops after 3 lines, as `| head -3`: it runs on, its output in its log
# file) and a one-epoch demo fine-tuning through the console commands, `import electra` (the environment's, not the
# checkout's) and the exported discriminator loaded with transformers' Auto classes. Last, an editable install
# (`pip install -e`) of the same sources, whose commands run the drivers at the root (a wheel's are in electra/jobs/).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
work=$(mktemp -d "${TMPDIR:-/tmp}/electra-package.XXXXXX")
trap 'rm -rf "$work"' EXIT
unset PYTHONPATH  # the checkout must not be importable from the environment

mkdir "$work/src"
cp -r pyproject.toml setup.py README.md LICENSE MANIFEST.in electra configs notebooks pretrain.py finetune.py "$work/src/"
find "$work/src" -name __pycache__ -prune -exec rm -rf {} +
python3 -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation --no-index -w "$work/dist" "$work/src"
wheel=$(echo "$work"/dist/electra-*.whl)
python3 - "$wheel" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
count = lambda test: sum(map(test, names))
print(f"wheel {sys.argv[1].rsplit('/', 1)[1]}: {count(lambda n: n.endswith('.py'))} modules, "
      f"{count(lambda n: n.startswith('electra/configs/'))} presets (electra/configs/), drivers "
      f"{sorted(n for n in names if n.startswith('electra/jobs/') and n.endswith(('pretrain.py', 'finetune.py')))}")
EOF

python3 -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-index "$wheel"
mkdir "$work/elsewhere"
cd "$work/elsewhere"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1

logged() {  # run a command with its output in the log file $1; on failure show the log's end
    local log=$1
    shift
    if ! "$@" > "$log" 2>&1; then echo "failed: $* (its last lines, from $log):"; tail -n 40 "$log"; exit 1; fi
}
# the demo preset, fewer steps (its checkpoint at 100% is what the fine-tuning demo reads); one epoch of each task
if ! "$work/venv/bin/electra-pretrain" --steps 40 --warmup_steps 8 --log_every 20 2> pretrain.err | head -3 > /dev/null \
   || grep -q Traceback pretrain.err; then
    echo "failed: electra-pretrain | head -3 (its stderr):"; tail -n 40 pretrain.err; exit 1
fi
log=checkpoints/pretrain/demo_11081/log.txt
grep -E '^(run |step 40 held-out|discriminator: |generator: )' "$log"
grep -E 'stdout: .*; the job goes on' "$log"
logged finetune.log "$work/venv/bin/electra-finetune" --runs 1 --epochs 1 --task_overrides '{}' --threads 1
grep -E '^(model: |\| (task|CoLA|STS-B|GLUE score) )' finetune.log
[ "$("$work/venv/bin/electra-convert" --version)" = "python -m electra.convert (electra $("$work/venv/bin/python" -c 'import electra; print(electra.__version__)'))" ]

"$work/venv/bin/python" - "$work/venv" <<'EOF'
import sys
from pathlib import Path

import electra
import torch
from transformers import AutoModelForMaskedLM, AutoModelForPreTraining, AutoTokenizer
from transformers.utils import logging

logging.disable_progress_bar()

venv, here = Path(sys.argv[1]).resolve(), Path.cwd()
assert Path(electra.__file__).resolve().is_relative_to(venv), f'electra imported from {electra.__file__}, not {venv}'
run = here / 'checkpoints' / 'pretrain' / 'demo_11081'
tokenizer = AutoTokenizer.from_pretrained(run / 'discriminator')
discriminator = AutoModelForPreTraining.from_pretrained(run / 'discriminator').eval()
generator = AutoModelForMaskedLM.from_pretrained(run / 'generator').eval()
batch = tokenizer(['the cow eats the grass in the barn.'], return_tensors='pt')
with torch.no_grad(): replaced = discriminator(**batch).logits.sigmoid()
assert replaced.shape == batch['input_ids'].shape and torch.isfinite(replaced).all()
cards = [run / 'discriminator' / 'README.md', run / 'generator' / 'README.md', here / 'checkpoints/glue/demo/README.md']
assert all(card.read_text().startswith('---\n') for card in cards), cards
finetuned = electra.load_finetuned(here / 'checkpoints/glue/demo/STS-B_0.pth')
from transformers import pipeline
sst2 = pipeline('text-classification', model=str(here / 'checkpoints/glue/demo/SST-2_0'))('a moving film')[0]
assert sst2['label'] in ('negative', 'positive'), sst2  # the task's label names, not LABEL_1
print(f'electra {electra.__version__} from {Path(electra.__file__).parent}; {type(discriminator).__name__} and '
      f'{type(generator).__name__} loaded with the Auto classes, p(replaced) of "{tokenizer.decode(batch["input_ids"][0])}": '
      f'{[round(p, 2) for p in replaced[0].tolist()]}; cards: {", ".join(str(c.relative_to(here)) for c in cards)}; '
      f'{type(finetuned).__name__} from STS-B_0.pth; SST-2_0/ in a transformers pipeline: {sst2}')
EOF

# (--without-pip: a venv's own setuptools would be older than the system's, which builds it)
python3 -m venv --system-site-packages --without-pip "$work/editable"
python3 -m pip --python "$work/editable/bin/python" install -q --disable-pip-version-check --no-deps --no-index \
    --no-build-isolation -e "$work/src"
for command in pretrain finetune; do
    logged "$command-editable.log" "$work/editable/bin/electra-$command" --help
    echo "editable install: electra-$command --help: $(head -n 1 "$command-editable.log" | cut -c 1-60)"
done
echo "package check passed in $((SECONDS - start)) s"
