"""Other formats of ELECTRA models into this library's (HF transformers models written by `save_pretrained`).

`python -m electra.convert tf DIR --out OUT` converts an official TensorFlow checkpoint (google-research/electra)
without TensorFlow: `tf_checkpoint` reads the tensor-bundle format, `tf` maps its variables.
"""
from electra.convert.tf import convert_tf_checkpoint
from electra.convert.tf_checkpoint import CheckpointFormatError, TFCheckpoint, list_variables, read_variable

__all__ = ['convert_tf_checkpoint', 'CheckpointFormatError', 'TFCheckpoint', 'list_variables', 'read_variable']
