"""Tools around the library, not part of its core: notebook export and check (`notebooks`), and the notebooks'
helpers (`walkthrough`, `data_views`, `explore`). The benchmark programs live outside the library, in benchmarks/."""
