"""System-prompt templates: Jinja2 files (or strings) with a typed input and strict variables.

A template renders with `StrictUndefined`: a variable the input does not define is an error
(`TemplateError` naming the template and the variable), never an empty string in a prompt.
The file is read when the template renders, and re-read when it changes on disk, so editing it
changes the next new conversation; a conversation that already pinned its prompt keeps it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import pydantic

from ..errors import TemplateError

if TYPE_CHECKING:
    import jinja2  # imported when a template is first compiled: most commands never render one

__all__ = ["PromptInspection", "Template", "TemplateOptions", "create_template"]

_UNDEFINED = re.compile(r"'([^']+)' is undefined")
_NO_ATTRIBUTE = re.compile(r"has no attribute '([^']+)'")


@dataclass(slots=True, frozen=True)
class PromptInspection:
    """What a system prompt renders to right now, for the inspection UI."""

    text: str | None
    """The rendered prompt, or None when it cannot render."""
    error: str | None = None
    """Why it cannot render."""

    @property
    def is_err(self) -> bool:
        return self.error is not None


def _template_error(name: str, message: str, variable: str | None = None) -> TemplateError:
    return TemplateError(message, template=name, variable=variable)


class TemplateOptions(TypedDict, total=False):
    """Where a template comes from (exactly one of `path` and `source`) and its input: the
    keywords of `create_template`, `Runtime.create_template` and `Template`."""

    path: str | PathLike[str] | None
    """A template file, resolved against `relative_to`."""
    relative_to: str | PathLike[str] | None
    """A directory, or a file such as `__file__` whose directory is used (default: the
    working directory; `Runtime.create_template`: the runtime's root)."""
    source: str | None
    """The template as a string."""
    input_data: Any
    """The input's type: a pydantic model or any type pydantic can validate into a mapping."""
    data: Mapping[str, Any] | pydantic.BaseModel | None
    """The input to render with when `render()` is given none (checked now)."""


class Template:
    """A Jinja2 template with an optional typed input (`input_data`: a pydantic model or any
    type pydantic can validate into a mapping).

    Build one with `Runtime.create_template(...)` or `create_template(...)`. `render(data)`
    validates `data` against `input_data` (defaults fill in), then renders strictly.
    """

    def __init__(self, *, name: str | None = None, **options: Unpack[TemplateOptions]) -> None:
        path, source = options.get("path"), options.get("source")
        relative_to, input_data = options.get("relative_to"), options.get("input_data")
        if (path is None) == (source is None):
            raise TemplateError("a template needs exactly one of path= or source=")
        self.path: Path | None = None
        if path is not None:
            p = Path(path)
            if not p.is_absolute():
                base = Path(relative_to) if relative_to is not None else Path.cwd()
                if relative_to is not None and (base.is_file() or base.suffix == ".py"):
                    base = base.parent
                p = base / p
            self.path = p
        self.source = source
        self.name = name or (str(path) if path is not None else "<string>")
        """How errors name this template: the path as given, or `<string>`."""
        self.input_data = input_data
        self._adapter = pydantic.TypeAdapter(input_data) if input_data is not None else None
        self._env: jinja2.Environment | None = None
        self._compiled: jinja2.Template | None = None
        self._bound: dict[str, Any] | None = None
        data = options.get("data")
        if data is not None:
            self._bound = self._validate(data)

    def __repr__(self) -> str:
        return f"Template({self.name!r})"

    def with_input(self, data: Mapping[str, Any] | pydantic.BaseModel) -> Template:
        """A copy that renders with `data` (checked now) when rendered without arguments."""
        copy = Template.__new__(Template)
        copy.path, copy.source, copy.name = self.path, self.source, self.name
        copy.input_data, copy._adapter = self.input_data, self._adapter
        copy._env, copy._compiled = self._env, self._compiled
        copy._bound = self._validate(data)
        return copy

    def _validate(self, data: Mapping[str, Any] | pydantic.BaseModel | None) -> dict[str, Any]:
        value: Any = {} if data is None else data
        if self._adapter is not None:
            if isinstance(value, pydantic.BaseModel):
                value = value.model_dump()
            try:
                value = self._adapter.validate_python(value)
            except pydantic.ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(x) for x in first["loc"]) or "(input)"
                raise _template_error(
                    self.name,
                    f"template {self.name}: input does not match input_data: "
                    f"{where}: {first['msg']}",
                    where,
                ) from exc
        if isinstance(value, pydantic.BaseModel):
            value = {k: getattr(value, k) for k in type(value).model_fields}
        if not isinstance(value, Mapping):
            raise _template_error(
                self.name,
                f"template {self.name}: input must be a mapping of variables, "
                f"got {type(value).__name__}",
            )
        return dict(value)

    def _template(self) -> jinja2.Template:
        import jinja2

        if self.source is not None:
            if self._compiled is None:
                env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
                try:
                    self._compiled = env.from_string(self.source)
                except jinja2.TemplateSyntaxError as exc:
                    raise _template_error(
                        self.name,
                        f"template {self.name}: syntax error on line {exc.lineno}: {exc.message}",
                    ) from exc
            return self._compiled
        assert self.path is not None
        if self._env is None:
            # auto_reload: the loader checks the file's mtime, so an edit is picked up.
            self._env = jinja2.Environment(
                loader=jinja2.FileSystemLoader(self.path.parent),
                undefined=jinja2.StrictUndefined,
                autoescape=False,
                auto_reload=True,
                keep_trailing_newline=False,
            )
        try:
            return self._env.get_template(self.path.name)
        except jinja2.TemplateNotFound as exc:
            raise _template_error(
                self.name, f"template {self.name}: no such file: {self.path}"
            ) from exc
        except jinja2.TemplateSyntaxError as exc:
            raise _template_error(
                self.name,
                f"template {self.name}: syntax error on line {exc.lineno}: {exc.message}",
            ) from exc

    def render(self, data: Mapping[str, Any] | pydantic.BaseModel | None = None) -> str:
        """Render with `data` (or the bound input, or nothing).

        Raises:
            TemplateError: the file is missing or malformed, the input does not match
                `input_data`, or the template uses a variable the input does not define (the
                error's `template` and `variable` attributes name them).
        """
        import jinja2

        variables = (
            self._validate(data) if data is not None else (self._bound or self._validate(None))
        )
        template = self._template()
        try:
            return template.render(variables)
        except jinja2.UndefinedError as exc:
            message = str(exc.message or exc)
            match = _UNDEFINED.search(message) or _NO_ATTRIBUTE.search(message)
            variable = match.group(1) if match else None
            raise _template_error(
                self.name,
                f"template {self.name}: variable {variable!r} is undefined ({message})"
                if variable
                else f"template {self.name}: {message}",
                variable,
            ) from exc
        except jinja2.TemplateError as exc:
            raise _template_error(self.name, f"template {self.name}: {exc}") from exc

    def inspect(self) -> PromptInspection:
        """Render now, reporting a failure instead of raising it."""
        try:
            return PromptInspection(self.render())
        except TemplateError as exc:
            return PromptInspection(None, str(exc))


def create_template(**options: Unpack[TemplateOptions]) -> Template:
    """A template from a file (`path`, resolved against `relative_to`: a directory, or a file
    such as `__file__` whose directory is used) or from a `source` string."""
    return Template(**options)
