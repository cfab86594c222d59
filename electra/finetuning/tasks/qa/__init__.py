"""Extractive question answering as the official ELECTRA code does it (SQuAD 1.1 / 2.0, MRQA): readers (`data`),
windowed features (`features`), the QA head, its loss and the decoding of answers (`heads`), the official evaluation
and prediction files (`metrics`), and a generated demo set (`demo`)."""
