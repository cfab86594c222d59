"""Fine-tuning task kinds: `glue` (the nine GLUE tasks and the diagnostic set), `classification` (GLUE and tasks from
files, `files`), `tagging` (token tagging) and `qa` (extractive QA); `base`: what the sweep needs of a kind;
`metrics`: which metric fits which kind and number of classes."""
