"""GLUE: task definitions (`tasks`), readers for the hub, TSV and saved sources (`sources`), encoding and loaders
(`encoding`), per-task metrics (`metrics`), the submission files (`submission`) and the demo tasks (`demo`)."""
