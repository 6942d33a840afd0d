"""The tool step: one tool call becomes exactly one result (`node.ToolNode`)."""
