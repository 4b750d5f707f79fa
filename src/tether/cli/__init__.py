"""The `tether` command line: run and inspect a project's agents and workflows.

```
tether init [DIR] [--model M]
tether prompt TEXT [-m MODEL] [-s SYSTEM] [--attach FILE]     (also: tether TEXT)
tether chat AGENT [--scope S] [-m MODEL]
tether models [--json]
tether keys set PROVIDER
tether agent list
tether agent run ID --input TEXT [--attach PATH] [--scope S] [-c JSON] [--json]
tether workflow list
tether workflow run ID [--input JSON|TEXT] [--run-id RUN_ID] [--json]
tether runs list [--limit N] [--kind agent|workflow] [--json]
tether runs show RUN_ID [--json]
tether ui [--host H] [--port P]
```

`init`, `prompt`, `models` and `keys` need no project (outside one, `runs` and `ui` show the
prompts `tether prompt` logged). The other commands read the project's registry (`tether.toml`
or `[tool.tether]`, found upward from the current directory, or `--config PATH`); `--store URL`
replaces its store. The full help is generated into `docs/cli.md` by `scripts/cli_docs.py`.
"""

from ._app import app, main
from ._errors import (
    EXIT_INTERRUPTED,
    EXIT_PROJECT,
    EXIT_RUN_FAILED,
    EXIT_USAGE,
    CliError,
    CommandLineError,
    Interrupted,
    ProjectError,
    RunFailedError,
)

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_PROJECT",
    "EXIT_RUN_FAILED",
    "EXIT_USAGE",
    "CliError",
    "CommandLineError",
    "Interrupted",
    "ProjectError",
    "RunFailedError",
    "app",
    "main",
]
