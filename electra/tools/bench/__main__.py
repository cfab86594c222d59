"Runs `electra.tools.bench.cli.main`: `python -m electra.tools.bench pretrain|finetune|scaling ...`."
from electra.tools.bench.cli import main

main()
