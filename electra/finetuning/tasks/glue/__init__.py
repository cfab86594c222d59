"""GLUE: the task table and the file layouts (`tasks`), readers for the hub, TSV and saved sources (`sources`), the
paper's GLUE score (`metrics`), the submission files (`submission`) and the demo tasks (`demo`)."""
