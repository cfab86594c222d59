"""Token tagging (NER and similar), as the official tagging task: readers and checks of CoNLL / JSONL files (`data`),
word pieces in windows and back (`encoding`), the tagging head and its loss (`model`), entity and token metrics and
the prediction files (`metrics`) and a generated demo set (`demo`)."""
