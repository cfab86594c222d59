"""Job configs: the typed config machinery (`base`: defaults < YAML preset < CLI overrides, checked) and the two job
configs, `pretrain.PretrainConfig` and `finetune.FinetuneConfig`. Configs import constants only, never data or
training code."""
