"""Experiments over whole jobs: `compare` reruns the paper's comparisons of pretraining objectives at equal compute
(Table 5, Figure 3) by launching `pretrain.py` and `finetune.py` for every variant and seed, and tabulates and plots
the dev scores. `plan` resolves and checks every variant before anything runs, `runs` launches the jobs and records
them (a rerun skips what is done), `table` rebuilds the table and plot from what is on disk."""
