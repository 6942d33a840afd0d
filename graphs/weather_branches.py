"""The weather demo with one `Send` task per tool call, served as "weather_branches".

Ask about several cities ("北京和上海今天要带伞吗？"): each `get_weather` call runs as its
own task, the faster city finishes first, and the message log still lists the results in
call order. The graph is wired by hand from threadlog's nodes in
`threadlog.examples.weather.build_branching_graph`.
"""

from threadlog.examples.weather import build_branching_graph, get_weather

__all__ = ["build_branching_graph", "get_weather", "graph"]

# No checkpointer here: `langgraph dev` (and LangGraph Platform) provide persistence.
graph = build_branching_graph()
