"""``@structured``: a typed function whose body is a prompt.

.. code-block:: python

    @structured(model=m, max_new_tokens=200)
    def classify(ticket: str) -> Literal["bug", "feature", "question"]:
        \"\"\"Classify this support ticket: {ticket}\"\"\"

    classify("The app crashes when I click save")   # -> "bug"
    classify.prompt("...")                           # exactly what the model receives

* The return annotation is the schema, resolved with :func:`typing.get_type_hints` at the first
  call (so ``from __future__ import annotations`` and forward references work).
* The docstring, dedented and formatted with the bound arguments (defaults applied), is the user
  message (``.user_message(...)``); write ``{{`` / ``}}`` for literal braces. ``.prompt(...)``
  shows the whole text the model receives (chat template and the schema's instruction). The
  function body is not run.
* The model comes from the decorator, else from an enclosing ``with structout.use_model(m):``,
  else :meth:`structout.Model.default`.
* ``async def`` functions return a coroutine; generation runs in a worker thread so the event loop
  stays responsive.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import string
import sys
import typing
from collections.abc import Coroutine, Iterator
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar, overload

if sys.version_info >= (3, 10):
    from typing import ParamSpec
else:  # pragma: no cover - typing_extensions comes with pydantic, which typed schemas need
    from typing_extensions import ParamSpec

if TYPE_CHECKING:  # pragma: no cover
    from structout.model import Model
    from structout.partial_stream import PartialStream

__all__ = ["StructuredFunction", "current_model", "structured", "use_model"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

_model_var: contextvars.ContextVar[Model | None] = contextvars.ContextVar(
    "structout_model", default=None
)


@contextlib.contextmanager
def use_model(model: Model) -> Iterator[Model]:
    """Make ``model`` the default for ``@structured`` functions inside the ``with`` block.

    Context-local (``contextvars``): nested blocks, threads and asyncio tasks each see their own.
    """
    token = _model_var.set(model)
    try:
        yield model
    finally:
        _model_var.reset(token)


def current_model() -> Model:
    """The model ``@structured`` functions use here: ``use_model``'s, else ``Model.default()``."""
    model = _model_var.get()
    if model is not None:
        return model
    from structout.model import Model

    return Model.default()


def _check_schema(schema: Any) -> None:
    """Translate ``schema`` under the default limits (what ``Model.default()`` uses), raising its
    SchemaError/UnsupportedSchemaError now; the KBNF lands in the compile cache the model reads."""
    from structout.compiling import schema_kbnf
    from structout.limits import Limits
    from structout.targets import resolve_schema

    target = resolve_schema(schema)
    if target.kbnf is None and target.json_schema is not None:
        schema_kbnf(target.json_schema, Limits().translator_options())


_GENERATE_OPTIONS = {
    "max_new_tokens",
    "temperature",
    "top_p",
    "seed",
    "jump_forward",
    "return_result",
    "chat_template",
    "schema_in_prompt",
    "loop_guard",
    "score_choices",
    "calibration",
    "property_order",
}


def _check_options(options: dict[str, Any]) -> None:
    unknown = set(options) - _GENERATE_OPTIONS
    if unknown:
        raise TypeError(
            f"unknown @structured option(s): {', '.join(sorted(unknown))} (known: "
            f"model, schema, system, {', '.join(sorted(_GENERATE_OPTIONS))})"
        )


class StructuredFunction(Generic[P, R]):
    """The callable ``@structured`` returns (keeps the wrapped function's name and docs).

    To a type checker it has the wrapped function's signature: ``f(...)`` is the return
    annotation's type (a coroutine of it for ``async def``; a ``GenerationResult`` with
    ``return_result=True``, which the types do not track).
    """

    def __init__(
        self,
        fn: Callable[P, R],
        model: Model | None,
        schema: Any,
        system: str | None,
        options: dict[str, Any],
    ) -> None:
        if not callable(fn):
            raise TypeError(f"@structured decorates a function, got {fn!r}")
        doc = fn.__doc__
        if not doc or not doc.strip():
            raise TypeError(
                f"@structured function {fn.__qualname__} needs a docstring: it is the prompt "
                "(use {param} placeholders for the arguments)"
            )
        _check_options(options)
        self.__wrapped__ = fn
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._model = model
        self._schema_override = schema
        self._system = system
        self._options = options
        self._signature = inspect.signature(fn)
        self._template = inspect.cleandoc(doc)
        self._is_async = inspect.iscoroutinefunction(fn)
        self._check_placeholders()

    def _check_placeholders(self) -> None:
        params = set(self._signature.parameters)
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(self._template) if f is not None]
        except ValueError as exc:
            raise ValueError(
                f"the docstring of {self._fn.__qualname__} is not a valid format string ({exc}); "
                "write {{ and }} for literal braces"
            ) from exc
        for f in fields:
            name = f.split(".")[0].split("[")[0]
            if not name or name.isdigit():
                raise ValueError(
                    f"the docstring of {self._fn.__qualname__} uses a positional placeholder "
                    f"{{{f}}}; name the parameter instead"
                )
            if name not in params:
                raise ValueError(
                    f"the docstring of {self._fn.__qualname__} refers to {{{name}}}, which is "
                    f"not a parameter (parameters: {', '.join(params) or 'none'})"
                )

    # ------------------------------------------------------------------------------ pieces
    @property
    def schema(self) -> Any:
        """The return annotation (or the ``schema=`` override), resolved lazily."""
        if self._schema_override is not None:
            return self._schema_override
        try:
            hints = typing.get_type_hints(self._fn, include_extras=True)
        except NameError as exc:
            raise TypeError(
                f"cannot resolve the return annotation of {self._fn.__qualname__}: {exc}"
            ) from exc
        if "return" not in hints or hints["return"] is type(None):
            raise TypeError(
                f"@structured function {self._fn.__qualname__} needs a return annotation: it is "
                "the schema of the output"
            )
        return hints["return"]

    def user_message(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """The user message for these arguments: the docstring formatted with them."""
        return self._template.format(**self._arguments(args, kwargs))

    def messages(self, *args: P.args, **kwargs: P.kwargs) -> list[dict[str, str]]:
        """The chat messages of a call: the system message (if any) and the user message."""
        return self._messages(self.user_message(*args, **kwargs))

    def _arguments(self, args: Any, kwargs: Any) -> dict[str, Any]:
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    def _messages(self, user: str) -> list[dict[str, str]]:
        system = [{"role": "system", "content": self._system}] if self._system else []
        return [*system, {"role": "user", "content": user}]

    def prompt(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """Exactly the text the model receives for these arguments: the messages with the
        schema's instruction, through the model's chat template (loads the default model when
        none is set, like a call)."""
        return self.model.render_prompt(
            self.messages(*args, **kwargs),
            self.schema,
            chat_template=self._options.get("chat_template", True),
            schema_in_prompt=self._options.get("schema_in_prompt", True),
        )

    @property
    def model(self) -> Model:
        """The model a call made here would use."""
        return self._model if self._model is not None else current_model()

    # ------------------------------------------------------------------------------ calling
    def content_free_messages(
        self, *args: P.args, **kwargs: P.kwargs
    ) -> list[dict[str, str]] | None:
        """The messages of a call with every text or number argument replaced by ``N/A``: the
        prompt without its content, which choice scoring is calibrated against (None when the
        docstring cannot be formatted that way)."""
        arguments = self._arguments(args, kwargs)
        blank = {
            k: "N/A" if isinstance(v, (str, int, float)) and not isinstance(v, bool) else v
            for k, v in arguments.items()
        }
        if blank == arguments:
            return None
        try:
            return self._messages(self._template.format(**blank))
        except (AttributeError, IndexError, KeyError, TypeError, ValueError):
            return None

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        messages = self.messages(*args, **kwargs)
        options = {"calibration": self.content_free_messages(*args, **kwargs), **self._options}
        schema = self.schema
        if self._model is None and _model_var.get() is None:
            _check_schema(schema)  # before Model.default() spends seconds loading
        if self._is_async:
            model = self.model  # resolved in the caller's context, before switching threads
            coroutine: R = self._acall(model, messages, schema, options)  # type: ignore[assignment]
            return coroutine
        value: R = self._generate(self.model, messages, schema, options)
        return value

    async def _acall(
        self, model: Model, messages: list[dict[str, str]], schema: Any, options: dict[str, Any]
    ) -> Any:
        loop = asyncio.get_running_loop()
        ctx = contextvars.copy_context()
        call = functools.partial(self._generate, model, messages, schema, options)
        return await loop.run_in_executor(None, ctx.run, call)

    @overload
    def stream(
        self: StructuredFunction[P, Coroutine[Any, Any, T]], *args: P.args, **kwargs: P.kwargs
    ) -> PartialStream[T]: ...
    @overload
    def stream(
        self: StructuredFunction[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> PartialStream[T]: ...
    def stream(self, *args: Any, **kwargs: Any) -> Any:
        """A streaming call: :class:`~structout.partial_stream.Snapshot` values of the object
        under construction (``Model.stream(..., partial=True)``); iterate with ``for`` or, in a
        coroutine, ``async for`` (both for ``def`` and ``async def`` functions)."""
        options = {k: v for k, v in self._options.items() if k != "return_result"}
        options.setdefault("calibration", self.content_free_messages(*args, **kwargs))
        stream: Callable[..., Any] = self.model.stream
        return stream(self.messages(*args, **kwargs), self.schema, partial=True, **options)

    @staticmethod
    def _generate(
        model: Model, messages: list[dict[str, str]], schema: Any, options: dict[str, Any]
    ) -> Any:
        generate: Callable[..., Any] = model.generate
        return generate(messages, schema, **options)

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        """Bind like a function, so ``@structured`` works on methods."""
        if instance is None:
            return self
        bound = functools.partial(self.__call__, instance)
        for name in ("prompt", "user_message", "messages", "stream"):
            setattr(bound, name, functools.partial(getattr(self, name), instance))
        return bound

    def __repr__(self) -> str:
        return f"<structured function {self._fn.__qualname__}>"


@overload
def structured(fn: Callable[P, R]) -> StructuredFunction[P, R]: ...


@overload
def structured(
    fn: None = None,
    *,
    model: Model | None = None,
    schema: Any = None,
    system: str | None = None,
    **options: Any,
) -> Callable[[Callable[P, R]], StructuredFunction[P, R]]: ...


def structured(
    fn: Callable[..., Any] | None = None,
    *,
    model: Model | None = None,
    schema: Any = None,
    system: str | None = None,
    **options: Any,
) -> Any:
    """Turn a typed, documented function into a structured-generation call.

    Options: ``model``, ``schema`` (instead of the return annotation), ``system`` (a system
    message), and any of ``max_new_tokens``, ``temperature``, ``top_p``, ``seed``,
    ``jump_forward``, ``return_result``, ``chat_template``, ``schema_in_prompt``, ``loop_guard``,
    ``score_choices``, ``calibration``, ``property_order`` (passed to
    :meth:`structout.Model.generate`). Usable bare (``@structured``) or called.
    """
    _check_options(options)
    if fn is not None:
        return StructuredFunction(fn, model, schema, system, options)

    def decorate(f: Callable[P, R]) -> StructuredFunction[P, R]:
        return StructuredFunction(f, model, schema, system, options)

    return decorate
