"""Pretraining data: reading corpora (`corpus`), the official example builder and the parallel build (`builder`), the
verified Arrow cache (`cache`), held-out examples and resumable batches (`batches`), the WordPiece tokenizer
(`tokenizer`), the built-in demo corpus (`demo`) and reaching the Hugging Face hub (`hub`)."""
