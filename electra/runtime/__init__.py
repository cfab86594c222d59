"""What a job needs of the operating system, whatever it runs: files written safely and the run lock (`files`), each
process's place in a torchrun job, how it was started and processes that end with their parent (`processes`), how a
job ends when it cannot go on, in one line with its exit status (`errors`). Every floor above uses it, so it knows
nothing of models, data or training."""
