"""electra/data/sentences.py: the sentence splitter's language."""
import pytest

from electra.config.errors import ConfigError


def test_unknown_sentence_split_language_is_a_config_error(tmp_path):
    from electra.data.sentences import sentencizer
    with pytest.raises(ConfigError, match="sentence_split: spaCy has no language 'qq'"):
        sentencizer('qq')
