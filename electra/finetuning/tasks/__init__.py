"""Fine-tuning tasks: `glue` (the nine GLUE tasks and the diagnostic set)."""
