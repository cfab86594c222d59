"""electra/training/sinks.py: a Neptune run that cannot start is one line naming the fix."""
import pytest

from electra.config.base import ConfigError
from electra.training.sinks import start_neptune_run


def test_a_neptune_run_without_a_token_is_one_line(monkeypatch, tmp_path):
    """Before: Neptune's 20-line banner (with colour codes) sat inside the error line, between the parentheses."""
    monkeypatch.chdir(tmp_path)
    for key in ('NEPTUNE_MODE', 'NEPTUNE_API_TOKEN', 'NEPTUNE_PROJECT'): monkeypatch.delenv(key, raising=False)
    with pytest.raises(ConfigError) as e:
        start_neptune_run('me/electra', 'run')
    message = str(e.value)
    assert '\n' not in message and '\x1b' not in message, message
    assert message.startswith('logger: cannot start a Neptune run (NeptuneMissingApiTokenException')
    assert message.endswith('Set NEPTUNE_API_TOKEN and --neptune_project, or NEPTUNE_MODE=offline, or use --logger none.')
