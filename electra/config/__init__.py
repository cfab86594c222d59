"""Job configs: the typed config machinery and the job configs built on it. A key is declared with its domain
(`fields`), its value converted and checked (`values`), read from presets and the command line (`cli`: defaults < YAML
presets < `--key value` flags), refused in one line (`errors`); YAML and text files read strictly (`yaml_reader`,
`text_files`), names safe as file names (`file_names`), paths expanded and kept apart (`paths`), the keys several jobs
share (`shared_keys`), the objectives' registry (`objectives`), the registries a job fills (`registries`), the library's version (`version`); the job configs
`pretrain.PretrainConfig`, `finetune.FinetuneConfig`, `compare.CompareConfig`. Configs import constants only, never
data or training code."""
