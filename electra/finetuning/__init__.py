"""Fine-tuning: the classifier head and layer-wise learning rates (`classifier`), one run with a fastai Learner
(`learner`), the resumable sweep and test predictions (`sweep`), the results table and summary (`results`), and the
tasks (`tasks.glue`: task definitions, data sources, encoding, metrics, the submission files, the demo tasks)."""
