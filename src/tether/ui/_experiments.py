"""The experiment pages: the list, one experiment's cases × evaluators grid (each cell linking
to the run it scored), and two experiments compared side by side.

They read the experiments' records from the run store (`tether.evals`) and render them with
the app's templates; `experiment_routes(pages)` is what `create_app` registers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from ..errors import StoreCorruptError, StoreError
from ..evals import compare, list_experiments, read_experiment, report

if TYPE_CHECKING:
    from ..lab import Runtime

__all__ = ["Cell", "Pages", "experiment_routes", "grid"]


class Pages(Protocol):
    """What the experiment pages need of the app's pages (`tether.ui._app`): the runtime and
    its templates. A protocol, so this module imports nothing of the app that imports it."""

    runtime: Runtime

    def render(
        self, request: Request, name: str, context: dict[str, Any], status: int = 200
    ) -> HTMLResponse: ...

    def error_page(
        self, request: Request, status: int, title: str, message: str
    ) -> HTMLResponse: ...


@dataclass(slots=True, frozen=True)
class Cell:
    """One case × evaluator verdict, and the run to open for it."""

    passed: bool | None
    """None: no verdict (not run, or undecided)."""
    label: str
    reason: str | None
    run_id: str | None
    error: bool = False


def grid(data: dict[str, Any]) -> list[tuple[dict[str, Any], list[Cell]]]:
    """Each case with one cell per evaluator. A cell links to the first run of the case that
    failed that evaluator (a repeat), else to the case's first run."""
    names = list(data["evaluators"])
    rows = []
    for case in data["cases"]:
        cells = []
        for name in names:
            verdict = case["results"].get(name)
            if verdict is None:
                cells.append(Cell(None, "·", None, case["run_id"]))
                continue
            run_id = case["run_id"]
            for run in case["runs"]:
                if run["results"].get(name, {}).get("passed") is False:
                    run_id = run["run_id"]
                    break
            passed = verdict.get("passed")
            if verdict.get("error"):
                label = "error"
            else:
                label = {True: "pass", False: "fail", None: "?"}[passed]
            cells.append(
                Cell(passed, label, verdict.get("reason"), run_id, bool(verdict.get("error")))
            )
        rows.append((case, cells))
    return rows


class _ExperimentPages:
    def __init__(self, pages: Pages) -> None:
        self.pages = pages

    async def _report(self, request: Request, name: str) -> dict[str, Any]:
        try:
            state = await read_experiment(self.pages.runtime.run_store, name)
        except (StoreCorruptError, StoreError) as exc:
            raise HTTPException(500, f"Experiment {name} cannot be read: {exc}") from exc
        if state is None:
            raise HTTPException(404, f"There is no experiment {name!r}.")
        return report(state)

    async def experiments(self, request: Request) -> Response:
        try:
            infos = await list_experiments(self.pages.runtime.run_store)
        except (StoreCorruptError, StoreError) as exc:
            return self.pages.error_page(request, 500, "Experiments cannot be read", str(exc))
        return self.pages.render(request, "experiments.html", {"experiments": infos})

    async def experiment(self, request: Request) -> Response:
        name = request.path_params["name"] or request.query_params.get("id", "")
        data = await self._report(request, name)
        return self.pages.render(request, "experiment.html", {"data": data, "rows": grid(data)})

    async def compare(self, request: Request) -> Response:
        a = request.query_params.get("a", "")
        b = request.query_params.get("b", "")
        if not a or not b:
            raise HTTPException(400, "Name two experiments: /compare?a=BASELINE&b=CANDIDATE.")
        first = await self._report(request, a)
        second = await self._report(request, b)
        return self.pages.render(
            request,
            "experiment_compare.html",
            {"diff": compare(first, second), "a": first, "b": second},
        )


def experiment_routes(pages: Pages) -> list[Route]:
    """The routes of the experiment pages."""
    handlers = _ExperimentPages(pages)
    return [
        Route("/experiments", handlers.experiments, methods=["GET"]),
        Route("/experiments/{name:path}", handlers.experiment, methods=["GET"]),
        Route("/compare", handlers.compare, methods=["GET"]),
    ]
