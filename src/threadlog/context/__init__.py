"""What the model sees: `ContextPolicy` and its pure `plan_context`/`build_context`
(`policy.py`), and the compaction events that record every trim and summary
(`compaction.py`). Not nodes: `ModelNode` and `ContextNode` (in `threadlog.nodes.model`)
use them."""
