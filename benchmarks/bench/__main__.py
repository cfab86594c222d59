"Runs `benchmarks.bench.cli.main`: `python -m benchmarks.bench pretrain|finetune|scaling ...`."
from benchmarks.bench.cli import main

main()
