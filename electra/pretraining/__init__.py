"""The pretraining job: its fastai callbacks (`callbacks`), held-out evaluation (`evaluation`), the Learner's assembly,
resume and the training call (`learner`), and export to `from_pretrained` directories (`export`)."""
