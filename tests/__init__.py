"""The test suite: tests/<pkg>/test_<module>.py tests electra/<pkg>/<module>.py; drivers and notebooks at the top."""
