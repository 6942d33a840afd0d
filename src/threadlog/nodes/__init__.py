"""LangGraph nodes over a threadlog message log: the model, context and tool steps (their
public names are re-exported by `threadlog`)."""
