"""Tools around the library, not part of its core: notebook export and check (`notebooks`), a notebook's figures
written as files (`figures`), and the notebooks' helpers (`walkthrough`, `data_views`, `explore`, `token_view`,
`pictures`). The benchmark programs live outside the library, in benchmarks/."""
