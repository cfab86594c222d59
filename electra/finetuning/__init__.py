"""Fine-tuning: the classifier head (`classifier`), layer-wise learning rates (`layerwise`), the pretrained model a job
starts from and a fine-tuned run read back (`loading`), one run with a fastai Learner (`learner`), the runs of a task
trained and saved (`runs`), the resumable sweep and test predictions (`sweep`), runs spread over worker processes
(`workers`), the results table and summary (`results`), and the task kinds (`tasks`: GLUE, tasks from files, token
tagging, extractive QA)."""
# The task kinds register themselves when imported: the task catalogue that FinetuneConfig checks `tasks` with
# (tasks/files.py), each kind's reader of task files (tasks/files.py) and its head model (loading.py `HEAD_MODELS`).
# Importing them here, in the package every fine-tuning module is imported through, fills those registries before any
# is read.
from electra.finetuning.tasks import classification  # noqa: F401
from electra.finetuning.tasks.tagging import task as tagging_task  # noqa: F401
from electra.finetuning.tasks.qa import task as qa_task  # noqa: F401
