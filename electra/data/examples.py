"""The official example builder: tokenized sentences in, `[CLS] A [SEP] B [SEP]` examples out, drawing from its
RNG in the official order (google-research/electra, build_pretraining_dataset.py, `ExampleBuilder`)."""
from __future__ import annotations

import random
from typing import Optional

__all__ = ['Example', 'ExampleBuilder']

Example = tuple[list[int], list[int]]  # (input_ids, token_type_ids), unpadded


class ExampleBuilder:
    """Turns a stream of tokenized sentences into pretraining examples, as the official `ExampleBuilder`.

    Sentences are accumulated until their total length reaches the target length, then split into
    segments A and B: `[CLS] A [SEP] B [SEP]` with token types 0 for `[CLS] A [SEP]` and 1 for `B [SEP]`
    (B may be empty: `[CLS] A [SEP]`). The end of a document emits what has been accumulated, so examples
    never span documents. Every random draw comes from `rng`, in the official order.
    """

    def __init__(self, max_length: int, cls_id: int, sep_id: int, rng: random.Random):
        self.max_length, self.cls_id, self.sep_id, self.rng = max_length, cls_id, sep_id, rng
        self.sentences: list[list[int]] = []
        self.length = 0
        self.target_length = max_length
        self.cut_tokens = 0  # tokens trimmed off examples (text past what an example holds): trained on by none
        self.overlong_tokens = 0  # of them, those of sentences longer than an example holds (cut whatever the draws)

    def add_sentence(self, ids: list[int]) -> Optional[Example]:
        "Add one sentence's token ids (no special tokens); return an example once the target length is reached."
        self.sentences.append(ids)
        self.length += len(ids)
        self.overlong_tokens += max(0, len(ids) - (self.max_length - 2))
        return self._create_example() if self.length >= self.target_length else None

    def end_document(self) -> Optional[Example]:
        "A blank line: emit the pending sentences, if any, as a (possibly short) example."
        return self._create_example() if self.length != 0 else None

    def _create_example(self) -> Example:
        # small chance of a single segment, as in classification tasks; -3 leaves room for [CLS] and two [SEP]
        first_target = 100000 if self.rng.random() < 0.1 else (self.target_length - 3) // 2
        a, b = [], []
        for s in self.sentences:
            # A takes the sentence if A is empty, if it fits under the target, or (only while B is empty and A is
            # under target) half the time when it pushes A over; `and`/`or` short-circuit exactly as the
            # official condition, so the coin is flipped only in that last case
            if not a or len(a) + len(s) < first_target or (not b and len(a) < first_target and self.rng.random() < 0.5):
                a += s
            else:
                b += s
        # trim to max_length, leaving room for [CLS] and one or two [SEP]
        given = len(a) + len(b)
        a = a[:self.max_length - 2]
        b = b[:max(0, self.max_length - len(a) - 3)]
        self.cut_tokens += given - len(a) - len(b)
        self.sentences, self.length = [], 0
        # small chance of a shorter example, so the model also sees short inputs
        self.target_length = self.rng.randint(5, self.max_length) if self.rng.random() < 0.05 else self.max_length
        ids = [self.cls_id] + a + [self.sep_id]
        types = [0] * len(ids)
        if b:
            ids += b + [self.sep_id]
            types += [1] * (len(b) + 1)
        return ids, types
