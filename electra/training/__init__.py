"""What every training loop shares: the official optimizer (`optim`) and schedule (`schedule`), precision, compilation
and the device prefetcher (`speed`), checkpoint I/O (`checkpoint`) and metric sinks (`sinks`). Distributed training
lives here too."""
