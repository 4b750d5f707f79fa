"""What is registered: the agents and workflows a page lists."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...lab import LabAgent, Registry, Runtime
from ...stores.run_store import RunInfo
from ...workflows import Workflow

# -- what is registered ----------------------------------------------------------------------


@dataclass(slots=True)
class Catalog:
    """The agents and workflows the UI lists, and so which runs and conversations it lists.

    From a project registry, exactly what it declares. Without one, every agent and workflow
    the runtime created, except workflows that serve as some agent's `title_workflow`: title
    runs stay out of the lists unless a registry names their workflow (seed 002).
    """

    runtime: Runtime
    agents: dict[str, LabAgent[Any]]
    workflows: dict[str, Workflow[Any, Any]]
    title_workflows: dict[str, list[str]]
    """Workflow id -> the ids of the agents it names conversations for."""

    @classmethod
    def of(cls, runtime: Runtime, registry: Registry | None) -> Catalog:
        known_agents = dict(runtime.agents)
        if registry is not None:
            known_agents.update(registry.agents)
        titles: dict[str, list[str]] = {}
        for agent in known_agents.values():
            if agent.title_workflow is not None:
                titles.setdefault(agent.title_workflow.id, []).append(agent.id)
        if registry is not None:
            return cls(runtime, dict(registry.agents), dict(registry.workflows), titles)
        workflows = {k: v for k, v in runtime.workflows.items() if k not in titles}
        return cls(runtime, known_agents, workflows, titles)

    def agent(self, agent_id: str | None) -> LabAgent[Any] | None:
        """A live agent definition by id: the listed ones first, then any the runtime knows."""
        if agent_id is None:
            return None
        return self.agents.get(agent_id) or self.runtime.agents.get(agent_id)

    def lists_run(self, info: RunInfo) -> bool:
        """A root run of a registered agent or workflow; nested runs show in their tree."""
        if info.workflow_run_id is not None or info.parent_run_id is not None:
            return False
        if info.kind == "workflow":
            return info.name in self.workflows
        if info.kind == "agent":
            return info.name in self.agents
        return True
