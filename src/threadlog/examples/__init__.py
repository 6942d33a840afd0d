"""Runnable examples built only from what `threadlog` exports.

They ship inside the package so that `threadlog demo` works after a plain `pip install`;
the `graphs/` folder of the repository serves them with `langgraph dev`.
"""
