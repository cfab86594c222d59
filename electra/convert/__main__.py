"""`python -m electra.convert SUBCOMMAND ...`: convert models from other formats (see --help)."""
from __future__ import annotations

import argparse
import json
import sys

from electra.config.paths import expand_path
from electra.config.version import command_parser
from electra.convert.tf import convert_tf_checkpoint
from electra.convert.tf_checkpoint import TFCheckpoint
from electra.runtime.errors import friendly_errors


def _parser() -> argparse.ArgumentParser:
    parser = command_parser('python -m electra.convert', 'Convert ELECTRA models from other formats into '
                            'save_pretrained directories of this library.')
    sub = parser.add_subparsers(dest='command', required=True)
    tf = sub.add_parser('tf', help='an official ELECTRA TensorFlow checkpoint (google-research/electra) into '
                        'discriminator/ and generator/ save_pretrained directories; no TensorFlow needed',
                        description='Convert an official ELECTRA TensorFlow 1 checkpoint without TensorFlow.')
    tf.add_argument('src', help='the checkpoint: a directory (its `checkpoint` file or only *.index) or a prefix '
                    'DIR/model.ckpt-N')
    tf.add_argument('--out', required=True, help='output directory: discriminator/, generator/ (an Electric '
                    "checkpoint's: cloze/, its two-tower cloze model), conversion.json")
    tf.add_argument('--hparams', help="the run's run_pretraining.py hparams JSON file (attention heads, lower-casing); "
                    'without it, the official defaults (heads = max(1, hidden // 64), lower-cased)')
    tf.add_argument('--vocab', help='its vocab.txt, when not beside the checkpoint or up to two folders above')
    tf.add_argument('--no-verify', action='store_true', help="skip the tensors' CRC-32C checks")
    tf.add_argument('--overwrite', action='store_true', help='replace a conversion already in --out')
    ls = sub.add_parser('ls', help="list a TensorFlow checkpoint's variables: name, dtype, shape",
                        description="List a TensorFlow checkpoint's variables without TensorFlow.")
    ls.add_argument('src', help='a directory or a prefix DIR/model.ckpt-N')
    sub.metavar = '{' + ','.join(sub.choices) + '}'  # so a missing subcommand is named with its choices, not 'command'
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    for key in ('src', 'out', 'hparams', 'vocab'):  # written as the jobs' paths are: `~`, `$VAR` (config/paths.py)
        if getattr(args, key, None):
            setattr(args, key, expand_path(getattr(args, key), key if key == 'src' else f'--{key}'))
    if args.command == 'ls':
        ckpt = TFCheckpoint(args.src)
        for name, entry in sorted(ckpt.entries.items()):
            print(f'{name}\t{entry.dtype_name}\t{list(entry.shape)}')
        return 0
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()  # per-shard bars for a one-shot conversion are noise
    paths = convert_tf_checkpoint(args.src, args.out, hparams=args.hparams, vocab=args.vocab,
                                  verify=not args.no_verify, overwrite=args.overwrite)
    for role, path in paths.items(): print(f'{role}: {path}')
    report = paths['discriminator'].parent / 'conversion.json'
    generator = json.loads(report.read_text(encoding='utf-8'))['generator']
    if generator.startswith('none: '): print(f'generator: {generator}')  # Electric's: where its generator went
    print(f"report: {report}")
    return 0


if __name__ == '__main__':
    friendly_errors()
    sys.exit(main())
