"""Fine-tuning task kinds: `glue` (the nine GLUE tasks and the diagnostic set), `classification` (GLUE and tasks from
files, `files`), `tagging` (token tagging) and `qa` (extractive QA). What they share: `base` (what the sweep needs of
a kind, `TaskInfo`), `sources` (`Examples`, `TaskSource`), `encoding` (sentence encoding, token caches, batches),
`metrics` (the metrics, and which fits which kind and number of classes), `values` (the labels' and ids' domains)."""
