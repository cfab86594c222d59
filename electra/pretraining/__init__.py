"""The pretraining job: its fastai callbacks (`callbacks`), held-out evaluation (`evaluation`), the Learner's assembly,
resume and the training call (`learner`); the export it writes at the end is `electra.pretrained.export`."""
