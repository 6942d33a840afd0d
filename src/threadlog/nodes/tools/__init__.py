"""The tool step: one tool call becomes exactly one result.

`node.py` (`ToolNode`), `routing.py` (which calls a step answers, `tools_condition`,
`send_tool_calls`), `approval.py` (interrupt before approval-required tools), `running.py`
(sync/async execution under timeouts), `results.py` (what happened → one `ToolMessage`,
and the error texts the model reads), `checks.py` (a tool's return value checked before
it reaches the log), `storage_check.py` (can the checkpointer store the result).
"""
