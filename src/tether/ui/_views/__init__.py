"""What the pages and the JSON API show, read from the runtime's stores: one module per page
(the runs list, one run, conversations, agents and workflows) over a shared catalog.

Everything here returns plain data (dataclasses, JSON-safe dicts); the templates and the API
only format it. Nothing here escapes anything: values stay exactly what the stores hold, and
the Jinja environment (autoescape on) or the JSON encoder encodes them where they are embedded.

A stored record that does not parse never takes a page down: the part it belongs to carries
the error (`StoreCorruptError`'s message) and the rest of the page renders.
"""

from ._agents import (
    STATS_RUNS,
    WorkflowStats,
    agent_detail_json,
    agent_json,
    workflow_json,
    workflow_stats,
)
from ._catalog import Catalog
from ._common import (
    BATCH,
    EVENTS_PER_POLL,
    PAGE_SIZE,
    TREE_DEPTH,
    TREE_NODES,
    Unreadable,
    guarded_read,
)
from ._conversations import (
    EPISODES_PER_PAGE,
    RECORDS_PER_PAGE,
    ConversationView,
    PromptView,
    ScopeRow,
    Turn,
    build_conversation,
    list_scopes,
    prompt_for,
    scope_json,
    search_scopes,
    split_turns,
    totals_json,
)
from ._run import (
    RunView,
    StepView,
    TreeNode,
    TreeTotals,
    build_run,
    build_tree,
    steps_from_events,
    timeline,
    tree_totals,
)
from ._runs import (
    RunFilters,
    RunRow,
    duration,
    list_runs,
    page_runs,
    run_batch,
    run_json,
    runs_where,
)

__all__ = [
    "BATCH",
    "EPISODES_PER_PAGE",
    "EVENTS_PER_POLL",
    "PAGE_SIZE",
    "RECORDS_PER_PAGE",
    "STATS_RUNS",
    "TREE_DEPTH",
    "TREE_NODES",
    "Catalog",
    "ConversationView",
    "PromptView",
    "RunFilters",
    "RunRow",
    "RunView",
    "ScopeRow",
    "StepView",
    "TreeNode",
    "TreeTotals",
    "Turn",
    "Unreadable",
    "WorkflowStats",
    "agent_detail_json",
    "agent_json",
    "build_conversation",
    "build_run",
    "build_tree",
    "duration",
    "guarded_read",
    "list_runs",
    "list_scopes",
    "page_runs",
    "prompt_for",
    "run_batch",
    "run_json",
    "runs_where",
    "scope_json",
    "search_scopes",
    "split_turns",
    "steps_from_events",
    "timeline",
    "totals_json",
    "tree_totals",
    "workflow_json",
    "workflow_stats",
]
