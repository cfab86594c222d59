"""Tools around the library, not part of its core: benchmarks (`bench`, `data_bench`), notebook export and check
(`notebooks`), and the notebooks' helpers (`walkthrough`, `data_views`, `explore`)."""
