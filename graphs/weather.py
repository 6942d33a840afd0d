"""The weather demo graph, served by `langgraph dev` as "weather" (see langgraph.json).

The graph is built in `threadlog.examples.weather`, which ships inside the package so that
`threadlog demo` runs the very same graph after a plain `pip install`. Copy that module to
start your own app; this file only names the graph for the server.
"""

from threadlog.examples.weather import build_graph, get_weather

__all__ = ["build_graph", "get_weather", "graph"]

# No checkpointer here: `langgraph dev` (and LangGraph Platform) provide persistence.
graph = build_graph()
