"""LangGraph apps served by `langgraph dev` (see langgraph.json at the repository root)."""
