"""Reference twins: faithful, minimal transcriptions (or direct runs) of the original code behind a
protocol, metric or baseline csbench reproduces, each naming its source (repository, path, commit or
release) in its docstring. Tests feed a twin and csbench the same inputs and assert identical output."""
