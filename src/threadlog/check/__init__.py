"""Tools that judge, write or execute on stored threads — apart from `threadlog.inspect`,
which only reads.

| module | one idea |
|---|---|
| `database` | `check`: which stored threads a provider would reject, and why |
| `served` | the same for a LangGraph server URL; `check` sends each source to its reader |
| `repair` | `check --repair`: answer open calls by appending |
| `replay` | re-run stored turns through the current graph, as a regression test |
"""
