"""Why a figure is what it is: the wake-up floor of a Python server, cold caches after idle,
garbage collection, the heap and the transport's share of an idle connection, and the
timeline of a backlog drain. Each backs a section of docs/benchmarks.md."""
