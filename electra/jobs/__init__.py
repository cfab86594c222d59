"""The two jobs as the installed package runs them. The repository holds each driver once, at its root (`pretrain.py`,
`finetune.py`: the notebooks' export, `python -m electra.tools.notebooks export`); the package build copies them here
(setup.py), so that a wheel holds `electra/jobs/pretrain.py` and `electra/jobs/finetune.py`. The console commands of
`commands` run them, the copies of a wheel or the root ones of a checkout and an editable install, and the other
programs as `python -m` would. Nothing in the library imports this package."""
