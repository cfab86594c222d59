"""The two jobs as the installed package runs them: `pretrain.py` and `finetune.py` here are the repository's drivers,
written byte for byte by the same export from `notebooks/` (`python -m electra.tools.notebooks export`; its `check`
fails when a copy differs). The console commands of `commands` run them, and the other programs, as `python -m` would.
Nothing in the library imports this package."""
