"""Experiments: run an agent or a workflow over a dataset of cases, score every run, resume
after a crash, and compare two versions case by case — on this machine, or on a Ray cluster.

```python
from tether.evals import evaluate

report = await evaluate(lab, "assistant", "cases.jsonl", experiment="baseline")
report["evaluators"]            # {"contains": {"passed": 9, "total": 10, "rate": 0.9}, ...}
```

or on the command line `tether eval run assistant --dataset
cases.jsonl`. Each case is an ordinary episode or workflow run tagged `experiment:<name>` and
`case:<id>` (plus the `version:` / `commit:` provenance), so the run records, the CLI and the
UI show it like any other; the experiment itself is a run of kind ``"experiment"`` whose events
are its results (see `tether.evals._record`).
"""

from ._case import CASE_SCOPE_PREFIX, EXPERIMENT_TAG_PREFIX, Plan, Target, resolve_target
from ._dataset import AGENT_INPUT_KEYS, Case, Dataset, load_dataset, load_evaluators
from ._evaluators import (
    CaseResult,
    EvaluationResult,
    Evaluator,
    EvaluatorContext,
    FunctionEvaluator,
    evaluator_from_spec,
)
from ._experiment import Engine, Progress, ProgressEvent, evaluate, show
from ._record import EXPERIMENT_KIND, experiment_run_id, list_experiments, read_experiment
from ._report import compare, percentiles, report

__all__ = [
    "AGENT_INPUT_KEYS",
    "CASE_SCOPE_PREFIX",
    "EXPERIMENT_KIND",
    "EXPERIMENT_TAG_PREFIX",
    "Case",
    "CaseResult",
    "Dataset",
    "Engine",
    "EvaluationResult",
    "Evaluator",
    "EvaluatorContext",
    "FunctionEvaluator",
    "Plan",
    "Progress",
    "ProgressEvent",
    "Target",
    "compare",
    "evaluate",
    "evaluator_from_spec",
    "experiment_run_id",
    "list_experiments",
    "load_dataset",
    "load_evaluators",
    "percentiles",
    "read_experiment",
    "report",
    "resolve_target",
    "show",
]
