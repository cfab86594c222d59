"""What every training loop shares: the official optimizer (`optim`) and schedule (`schedule`), precision, compilation
and the device prefetcher (`speed`), safe file writes and the run lock (`files`), checkpoint I/O (`checkpoint`) and
metric sinks (`sinks`), jobs that end with their parent (`processes`). Distributed training lives here too."""
