"""Reaching the Hugging Face hub: one quick check before a download, so that a machine without network fails at once.

`transformers` and `datasets` retry a failed request five times with back-off, about 30 s before they give up. A single
request with a short timeout answers the question first: when the hub does not answer, models already in the local
cache are loaded from it and anything else is refused at once, naming the local alternative.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

__all__ = ['OFFLINE_VARIABLES', 'hub_offline', 'hub_unreachable', 'shadowed_hub_name']


OFFLINE_VARIABLES = ('HF_HUB_OFFLINE', 'HF_DATASETS_OFFLINE', 'TRANSFORMERS_OFFLINE')


def hub_offline() -> bool:
    "Whether the environment asks the libraries never to contact the hub (they then fail at once by themselves)."
    return any(os.environ.get(v, '').strip().upper() in ('1', 'ON', 'YES', 'TRUE') for v in OFFLINE_VARIABLES)


def hub_unreachable(timeout: float = 5.0) -> Optional[str]:
    """Why the hub (HF_ENDPOINT) cannot be reached, after one request with no retry through the `huggingface_hub`
    session (proxies and certificates as configured for it); None when it answers at all, or in offline mode."""
    if hub_offline(): return None
    from huggingface_hub import constants, get_session
    try:
        get_session().head(constants.ENDPOINT, timeout=timeout)
    except Exception as e:  # the session is httpx or requests depending on the version: each has its own errors
        return f'{constants.ENDPOINT}: {type(e).__name__}: {e}'
    return None


def shadowed_hub_name(name: str) -> Optional[str]:
    """What a folder or file of hub dataset `name`'s name in the current folder is said as, or None when there is none:
    `datasets.load_dataset(name)` reads that path before it looks on the hub (and in its cache of the hub)."""
    path = Path(name)
    if not path.exists(): return None
    return f"{path.resolve()} is a {'folder' if path.is_dir() else 'file'} of that name here, which `datasets` reads " \
           f"instead of the hub's"
