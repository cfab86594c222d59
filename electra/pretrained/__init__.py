"""What pretraining hands to fine-tuning: a run's networks written as plain transformers models and read back, from
that export, a pretraining `.pth` or a hub name (`export`). Both jobs import it; it imports neither."""
