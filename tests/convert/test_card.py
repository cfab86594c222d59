"""electra/convert/card.py: the model card (README.md) of each folder a conversion writes, parsed back: the official
checkpoint it came from, its sizes and config.json, what the conversion checked (equal to conversion.json)."""
import json
import re

import pytest
import yaml

import electra
from tests.convert.test_tf import FIXTURES, VARIANTS, converted  # noqa: F401 (converted: the fixture)

pytestmark = pytest.mark.usefixtures('one_thread')


def _card_metadata(text: str) -> dict:
    match = re.match(r'---\n(.*?)\n---\n', text, re.S)
    assert match, text[:200]
    return yaml.safe_load(match[1])


@pytest.mark.parametrize('variant', VARIANTS)
def test_each_converted_folder_has_a_card_naming_its_checkpoint_config_and_checks(converted, variant):
    "README.md of discriminator/ and generator/: the official checkpoint, its sizes, what was verified (parsed back)."
    paths, out = converted[variant]
    report = json.loads((out / 'conversion.json').read_text())
    assert report['electra_version'] == electra.__version__
    for role in ('discriminator', 'generator'):
        text = (paths[role] / 'README.md').read_text(encoding='utf-8')
        meta = _card_metadata(text)
        assert meta['license'] == 'apache-2.0' and meta['library_name'] == 'transformers'
        assert meta['electra_version'] == electra.__version__ and {'electra', role, 'converted'} <= set(meta['tags'])
        assert f"`{FIXTURES / variant / 'model.ckpt-5'}`" in text and 'step 5' in text
        blocks = [yaml.safe_load(b) for b in re.findall(r'```yaml\n(.*?)\n```', text, re.S)]
        assert report['sizes'][role] in blocks  # its config as the conversion inferred it
        assert json.loads((paths[role] / 'config.json').read_text()) in blocks
        checked = [c.split(': ', 1)[1] for c in report['checked'] if c.startswith(f'{role}: ')]
        assert checked and all(f'`{c}`' in text for c in checked)
        assert 'CRC-32C of every tensor verified' in text and f"{len(report['mapped'])} variables mapped" in text
