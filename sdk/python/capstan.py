"""capstan's Python SDK: write capstan tools, hooks and skills as functions.

This file is written into a plugin project by `capstan new` and refreshed by
`capstan plugin build`; edits to it are lost. It runs in two places: inside
the component that componentize-py builds (where the `wit_world` bindings
exist), and under a plain Python for your unit tests (where they do not, and
only the host calls `log`, `progress` and `fetch` need the component).

A tool is a typed, documented function:

    from capstan import tool, InvalidInput

    @tool(read_only=True)
    def hello(name: str, excitement: int = 1) -> str:
        \"\"\"Greets someone by name.

        Args:
            name: Who to greet.
            excitement: How many exclamation marks.
        \"\"\"
        if excitement < 0:
            raise InvalidInput("field `excitement`: must not be negative")
        return f"Hello, {name}" + "!" * excitement

The JSON Schema the model sees comes from the type hints (str, int, float,
bool, list[...], dict, Optional[...], Literal[...]) and the docstring's
`Args:` section, or from an explicit `schema=`. Each call's input is checked
against it before your function runs; a mismatch is `invalid-input` naming
the field. Raise `InvalidInput`, `Denied` or `Failed` to say why a call did
not succeed; any other exception becomes `failed` with its message.
"""

from __future__ import annotations

import errno
import inspect
import json
import re
import sys
import traceback
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

# The component's bindings. componentize-py keeps only the modules imported
# while it pre-initializes the app, so they are imported here, at the top;
# under plain Python (unit tests) they do not exist.
try:
    from componentize_py_types import Err as _Err, Ok as _Ok  # type: ignore
except ImportError:  # plain Python
    _Err = _Ok = None
try:
    from wit_world.imports import host as _host  # type: ignore
except ImportError:
    _host = None
try:  # only in a plugin whose manifest requests the network
    from wit_world.imports import outgoing_handler as _outgoing  # type: ignore
    from wit_world.imports import streams as _streams  # type: ignore
    from wit_world.imports import wasi_http_types as _http  # type: ignore
except ImportError:
    _outgoing = _streams = _http = None
try:
    from wit_world.exports import tool as _tool_wit  # type: ignore
except ImportError:
    _tool_wit = None
try:
    from wit_world.exports import hook as _hook_wit  # type: ignore
except ImportError:
    _hook_wit = None
try:
    from wit_world.exports import skill as _skill_wit  # type: ignore
except ImportError:
    _skill_wit = None

__all__ = [
    "tool",
    "hook",
    "skill",
    "Context",
    "Json",
    "ToolError",
    "InvalidInput",
    "Denied",
    "Failed",
    "Decision",
    "proceed",
    "allow",
    "ask",
    "deny",
    "modify",
    "add_context",
    "keep_going",
    "Response",
    "fetch",
    "log",
    "progress",
    "call_tool",
    "handle_event",
    "load_skill",
]


# --- errors -----------------------------------------------------------------


class ToolError(Exception):
    """Why a call did not succeed. The message is shown to the model."""

    kind = "failed"


class InvalidInput(ToolError):
    """The input was not valid. Name the field in the message."""

    kind = "invalid-input"


class Denied(ToolError):
    """The sandbox refused something the tool tried (a path, a host)."""

    kind = "denied"


class Failed(ToolError):
    """The tool ran and could not do what was asked."""

    kind = "failed"


# --- results and context ------------------------------------------------------


@dataclass
class Json:
    """A JSON result: `return Json({"temp": 21})`. Returning a dict or a
    list does the same."""

    value: Any


@dataclass
class Context:
    """What the host says about the call. Informative only: what the plugin
    may touch is decided by the sandbox."""

    call_id: str = "test-call"
    workspace: Optional[str] = None
    session_id: Optional[str] = None


# --- JSON Schema from type hints --------------------------------------------

_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _schema_of(hint: Any) -> dict:
    """The JSON Schema of a type hint."""
    if hint is inspect.Parameter.empty or hint is Any:
        return {}
    if hint in _SIMPLE:
        return {"type": _SIMPLE[hint]}
    if hint is dict:
        return {"type": "object"}
    if hint is list:
        return {"type": "array"}
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or (origin is not None and str(origin) == "<class 'types.UnionType'>"):
        rest = [a for a in args if a is not type(None)]
        inner = _schema_of(rest[0]) if len(rest) == 1 else {"anyOf": [_schema_of(a) for a in rest]}
        if type(None) in args and "type" in inner and isinstance(inner["type"], str):
            inner = dict(inner, type=[inner["type"], "null"])
        return inner
    if origin is list:
        return {"type": "array", "items": _schema_of(args[0])} if args else {"type": "array"}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema_of(args[1])} if len(args) == 2 else {"type": "object"}
    if origin is typing.Literal:
        kinds = {_SIMPLE.get(type(a)) for a in args}
        schema: dict = {"enum": list(args)}
        if len(kinds) == 1 and None not in kinds:
            schema["type"] = kinds.pop()
        return schema
    raise TypeError(f"capstan: cannot describe the type {hint!r} in a JSON Schema; use str, int, float, bool, list[...], dict, Optional[...] or Literal[...], or pass schema= to @tool")


def _docstring(func: Callable) -> tuple[str, dict[str, str]]:
    """The description (the docstring up to `Args:`) and each argument's
    description from a Google-style `Args:` section."""
    doc = inspect.getdoc(func) or ""
    described: dict[str, str] = {}
    parts = re.split(r"^\s*(?:Args|Arguments|Parameters):\s*$", doc, maxsplit=1, flags=re.M)
    if len(parts) == 2:
        current = None
        for line in parts[1].splitlines():
            match = re.match(r"^\s{0,8}(\w+)\s*(?:\([^)]*\))?:\s*(.*)$", line)
            if match and not line.startswith(" " * 9):
                current = match.group(1)
                described[current] = match.group(2).strip()
            elif current and line.strip():
                described[current] = (described[current] + " " + line.strip()).strip()
            elif not line.strip():
                current = None
    return parts[0].strip(), described


def _is_context(param: inspect.Parameter, hints: dict) -> bool:
    return hints.get(param.name) is Context or param.name == "ctx"


def _input_schema(func: Callable) -> dict:
    hints = typing.get_type_hints(func)
    _, described = _docstring(func)
    properties: dict = {}
    required: list = []
    for param in inspect.signature(func).parameters.values():
        if _is_context(param, hints):
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"capstan: tool {func.__name__}: *args and **kwargs cannot be described; name each field")
        schema = _schema_of(hints.get(param.name, inspect.Parameter.empty))
        if param.name in described:
            schema["description"] = described[param.name]
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
        elif param.default is not None:
            schema["default"] = param.default
        properties[param.name] = schema
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


# --- checking input against a schema -----------------------------------------


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "null":
        return value is None
    return True


def _describe(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check(value: Any, schema: dict, where: str = "") -> None:
    """Checks `value` against the subset of JSON Schema the SDK generates
    (type, properties, required, additionalProperties, items, enum, anyOf);
    raises InvalidInput naming the field."""
    name = f"field `{where}`" if where else "the input"
    if "anyOf" in schema:
        errors = []
        for option in schema["anyOf"]:
            try:
                check(value, option, where)
                break
            except InvalidInput as err:
                errors.append(str(err))
        else:
            raise InvalidInput(f"{name}: {_describe(value)} matches none of the allowed forms")
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_type_ok(value, k) for k in kinds):
            raise InvalidInput(f"{name}: expected {' or '.join(kinds)}, found {_describe(value)}")
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(json.dumps(v) for v in schema["enum"])
        raise InvalidInput(f"{name}: {_describe(value)} is not one of {allowed}")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                raise InvalidInput(f"missing field `{where + '.' if where else ''}{key}`")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            path = f"{where}.{key}" if where else key
            if key in properties:
                check(item, properties[key], path)
            elif extra is False:
                known = ", ".join(f"`{k}`" for k in properties) or "none"
                raise InvalidInput(f"unknown field `{path}` (known fields: {known})")
            elif isinstance(extra, dict):
                check(item, extra, path)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            check(item, schema["items"], f"{where}[{index}]")


# --- tools -----------------------------------------------------------------


@dataclass
class _Tool:
    name: str
    description: str
    schema: dict
    func: Callable
    hints: dict
    takes_context: Optional[str]
    explicit_schema: bool


_TOOLS: dict[str, _Tool] = {}
_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")


def tool(
    func: Optional[Callable] = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    schema: Optional[dict] = None,
    read_only: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
    open_world: bool = False,
):
    """Registers a function as a tool. Its name is the function's name (or
    `name=`), its description the docstring (or `description=`), its input
    schema generated from the type hints (or `schema=`, a JSON Schema object;
    the function then receives the input as keyword arguments, or as one
    `input` argument if it has exactly one). A parameter named `ctx` or
    annotated `Context` receives the call's context. The hints promise how
    the tool behaves; the sandbox enforces what it can reach either way."""

    def register(func: Callable) -> Callable:
        tool_name = name or func.__name__
        if not _NAME.match(tool_name):
            raise ValueError(f"capstan: tool name {tool_name!r} must be lowercase letters, digits, - and _, starting with a letter")
        if tool_name in _TOOLS:
            raise ValueError(f"capstan: two tools are called {tool_name!r}")
        summary, _ = _docstring(func)
        text = description or summary
        if not text:
            raise ValueError(f"capstan: tool {tool_name!r} needs a description: give the function a docstring or pass description=")
        hints = typing.get_type_hints(func)
        context = next((p.name for p in inspect.signature(func).parameters.values() if _is_context(p, hints)), None)
        _TOOLS[tool_name] = _Tool(
            name=tool_name,
            description=text,
            schema=schema if schema is not None else _input_schema(func),
            func=func,
            hints={"read_only": read_only, "destructive": destructive, "idempotent": idempotent, "open_world": open_world},
            takes_context=context,
            explicit_schema=schema is not None,
        )
        return func

    return register(func) if func is not None else register


def _run(t: _Tool, args: Any, ctx: Context) -> Any:
    if isinstance(args, dict):
        # JSON's 2.0 is a valid integer; hand the function an int.
        properties = t.schema.get("properties", {})
        args = {key: int(value) if isinstance(value, float) and properties.get(key, {}).get("type") in ("integer", ["integer", "null"]) else value
                for key, value in args.items()}
    if t.explicit_schema:
        params = [p for p in inspect.signature(t.func).parameters if p != t.takes_context]
        kwargs = {params[0]: args} if len(params) == 1 and params[0] == "input" else dict(args)
    else:
        kwargs = dict(args)
    if t.takes_context:
        kwargs[t.takes_context] = ctx
    return t.func(**kwargs)


def _as_error(err: BaseException) -> ToolError:
    """Maps an exception to the error the model sees."""
    if isinstance(err, ToolError):
        return err
    refused = {errno.EACCES, errno.EPERM, errno.EROFS, getattr(errno, "ENOTCAPABLE", errno.EACCES)}
    if isinstance(err, OSError) and (isinstance(err, PermissionError) or err.errno in refused):
        return Denied(f"not allowed: {err.filename or err} ({err.strerror or 'permission denied'}); the plugin has no grant for it")
    if isinstance(err, FileNotFoundError):
        return Failed(f"no such file: {err.filename or err}")
    traceback.print_exception(type(err), err, err.__traceback__, file=sys.stderr)
    frames = traceback.extract_tb(err.__traceback__)
    where = ""
    if frames:
        last = frames[-1]
        where = f" (at {last.filename.rsplit('/', 1)[-1]}:{last.lineno} in {last.name})"
    return Failed(f"{type(err).__name__}: {err}{where}")


def call_tool(name: str, input: Any, ctx: Optional[Context] = None) -> Any:
    """Calls tool `name` as the host would: `input` is JSON text or a value;
    it is checked against the tool's schema. Returns what the function
    returned; raises a ToolError. Useful in unit tests."""
    t = _TOOLS.get(name)
    if t is None:
        raise InvalidInput(f"unknown tool `{name}`; this plugin has {', '.join(sorted(_TOOLS)) or 'no tools'}")
    if isinstance(input, (str, bytes)):
        try:
            input = json.loads(input)
        except ValueError as err:
            raise InvalidInput(f"the input is not valid JSON: {err}") from None
    if not isinstance(input, dict) and not t.explicit_schema:
        raise InvalidInput(f"the input must be a JSON object, found {_describe(input)}")
    check(input, t.schema)
    try:
        return _run(t, input, ctx or Context())
    except BaseException as err:  # noqa: BLE001 - every failure goes back to the model
        if isinstance(err, (KeyboardInterrupt, SystemExit)):
            raise
        raise _as_error(err) from err


# --- hooks -----------------------------------------------------------------

EVENTS = [
    "session-start", "session-end", "user-prompt-submit", "pre-tool-use", "post-tool-use",
    "post-tool-use-failure", "permission-request", "stop", "subagent-start", "subagent-stop",
    "pre-compact", "post-compact", "notification",
]


@dataclass
class Decision:
    """What a hook wants to happen. Build one with proceed(), allow(),
    ask(), deny(), modify(), add_context() or keep_going()."""

    kind: str = "proceed"
    value: Optional[str] = None
    system_message: Optional[str] = None


def proceed(system_message: Optional[str] = None) -> Decision:
    """No opinion: carry on as if the hook had not run."""
    return Decision("proceed", None, system_message)


def allow(system_message: Optional[str] = None) -> Decision:
    """Permit the action without asking (never beats a deny rule)."""
    return Decision("allow", None, system_message)


def ask(reason: str, system_message: Optional[str] = None) -> Decision:
    """Ask the user, showing `reason`."""
    return Decision("ask", reason, system_message)


def deny(reason: str, system_message: Optional[str] = None) -> Decision:
    """Block the action; the model is told `reason`."""
    return Decision("deny", reason, system_message)


def modify(tool_input: dict, system_message: Optional[str] = None) -> Decision:
    """Run the tool with this input instead."""
    return Decision("modify", json.dumps(tool_input), system_message)


def add_context(text: str, system_message: Optional[str] = None) -> Decision:
    """Carry on, and give the model this extra context."""
    return Decision("add-context", text, system_message)


def keep_going(text: str, system_message: Optional[str] = None) -> Decision:
    """For `stop`: do not stop yet; `text` says what is left to do."""
    return Decision("keep-going", text, system_message)


@dataclass
class _Hook:
    event: str
    matcher: Optional[str]
    func: Callable


_HOOKS: list[_Hook] = []


def hook(event: str, matcher: Optional[str] = None):
    """Registers a function as a hook on `event` (Claude Code's names, in
    kebab case: "pre-tool-use", or "PreToolUse"). `matcher` picks tools for
    tool events: a name, `a|b`, or a regular expression. The function takes
    the event's payload (a dict) and returns a Decision (None means
    proceed)."""
    kebab = re.sub(r"(?<!^)(?=[A-Z])", "-", event).lower()
    if kebab not in EVENTS:
        raise ValueError(f"capstan: unknown hook event {event!r}; one of {', '.join(EVENTS)}")
    if matcher is not None:
        re.compile(matcher)

    def register(func: Callable) -> Callable:
        _HOOKS.append(_Hook(kebab, matcher, func))
        return func

    return register


def _matches(matcher: Optional[str], payload: dict) -> bool:
    name = payload.get("tool_name")
    if matcher is None or name is None:
        return True
    if matcher in name.split("|") or matcher == name:
        return True
    return re.fullmatch(matcher, name) is not None


_STRENGTH = {"deny": 6, "ask": 5, "modify": 4, "keep-going": 3, "allow": 2, "add-context": 1, "proceed": 0}


def handle_event(event: str, payload: Any) -> Decision:
    """Runs the hooks registered for `event` (payload: dict or JSON text)
    and combines their decisions: the strictest wins (deny, then ask, modify,
    keep-going, allow, add-context; contexts are joined). Useful in tests."""
    if isinstance(payload, (str, bytes)):
        payload = json.loads(payload)
    decisions = []
    for h in _HOOKS:
        if h.event == event and _matches(h.matcher, payload):
            result = h.func(payload)
            if result is None:
                result = proceed()
            if not isinstance(result, Decision):
                raise TypeError(f"hook {h.func.__name__} returned {type(result).__name__}; return a Decision such as capstan.proceed()")
            decisions.append(result)
    if not decisions:
        return proceed()
    strongest = max(decisions, key=lambda d: _STRENGTH[d.kind])
    if strongest.kind == "add-context":
        texts = [d.value for d in decisions if d.kind == "add-context" and d.value]
        strongest = Decision("add-context", "\n\n".join(texts), strongest.system_message)
    messages = [d.system_message for d in decisions if d.system_message]
    if messages:
        strongest = Decision(strongest.kind, strongest.value, "\n".join(messages))
    return strongest


# --- skills ------------------------------------------------------------------


@dataclass
class _Skill:
    name: str
    description: str
    when_to_use: Optional[str]
    argument_hint: Optional[str]
    user_invocable: bool
    model_invocable: bool
    allowed_tools: list
    resources: dict
    func: Callable


_SKILLS: dict[str, _Skill] = {}


def skill(
    func: Optional[Callable] = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    when_to_use: Optional[str] = None,
    argument_hint: Optional[str] = None,
    user_invocable: bool = True,
    model_invocable: bool = True,
    allowed_tools: Optional[list] = None,
    resources: Optional[dict] = None,
):
    """Registers a function computing a skill's Markdown text from the
    user's arguments (a string). Its name is the function's with `_` as
    `-`; `resources` maps relative paths to str or bytes content."""

    def register(func: Callable) -> Callable:
        skill_name = name or func.__name__.replace("_", "-")
        if not re.match(r"^[a-z0-9][a-z0-9-]*$", skill_name):
            raise ValueError(f"capstan: skill name {skill_name!r} must be lowercase letters, digits and -")
        summary, _ = _docstring(func)
        text = description or summary
        if not text:
            raise ValueError(f"capstan: skill {skill_name!r} needs a description: a docstring or description=")
        _SKILLS[skill_name] = _Skill(skill_name, text, when_to_use, argument_hint, user_invocable,
                                     model_invocable, list(allowed_tools or []), dict(resources or {}), func)
        return func

    return register(func) if func is not None else register


def load_skill(name: str, arguments: str = "") -> str:
    """The text of skill `name`. Useful in tests."""
    s = _SKILLS.get(name)
    if s is None:
        raise KeyError(f"unknown skill `{name}`; this plugin has {', '.join(sorted(_SKILLS)) or 'no skills'}")
    text = s.func(arguments)
    if not isinstance(text, str):
        raise TypeError(f"skill {name} returned {type(text).__name__}; return the Markdown text as a str")
    return text


# --- host calls and HTTP -------------------------------------------------------

_LEVELS = ["trace", "debug", "info", "warn", "error"]


def log(level: str, message: str) -> None:
    """Writes a line to the host's log ("trace", "debug", "info", "warn",
    "error"); shown to the user at warn and error. Outside the component it
    goes to stderr."""
    if level not in _LEVELS:
        raise ValueError(f"log level must be one of {', '.join(_LEVELS)}")
    if _host is None:
        print(f"[{level}] {message}", file=sys.stderr)
        return
    _host.log(getattr(_host.LogLevel, level.upper()), message)


def progress(message: str, done: int, total: Optional[int] = None) -> None:
    """Reports progress on a long call."""
    if _host is not None:
        _host.progress(message, done, total)


@dataclass
class Response:
    """An HTTP response."""

    status: int
    headers: dict = field(default_factory=dict)
    body: bytes = b""

    @property
    def text(self) -> str:
        """The body as UTF-8 text."""
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.body)

    @property
    def ok(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status < 300


def _http_bindings():
    if _http is None:
        raise Denied(
            "this plugin cannot use the network: add the hosts it needs to `net` under [capabilities] in plugin.toml and build it again"
        )
    return _http, _outgoing, _streams


def fetch(url: str, method: str = "GET", headers: Optional[dict] = None, body: Optional[bytes | str] = None,
          timeout: float = 30.0) -> Response:
    """Sends one HTTP request through wasi:http and returns the whole
    response. Works only for hosts granted under `net`; a refused host raises
    Denied, other failures Failed. Redirects are returned, not followed."""
    types, outgoing_handler, streams = _http_bindings()
    Err, Ok = _Err, _Ok
    match = re.match(r"^(https?)://([^/?#]+)([^#]*)", url)
    if not match:
        raise InvalidInput(f"not an http(s) URL: {url!r}")
    scheme, authority, path = match.group(1), match.group(2), match.group(3) or "/"
    if not path.startswith("/"):
        path = "/" + path
    methods = {"GET": types.Method_Get(), "POST": types.Method_Post(), "PUT": types.Method_Put(),
               "DELETE": types.Method_Delete(), "PATCH": types.Method_Patch(), "HEAD": types.Method_Head(),
               "OPTIONS": types.Method_Options()}
    fields = types.Fields.from_list([(k, str(v).encode()) for k, v in (headers or {}).items()])
    request = types.OutgoingRequest(fields)
    request.set_method(methods.get(method.upper(), types.Method_Other(method)))
    request.set_scheme(types.Scheme_Https() if scheme == "https" else types.Scheme_Http())
    request.set_authority(authority)
    request.set_path_with_query(path)
    options = types.RequestOptions()
    nanos = int(timeout * 1e9)
    for setter in (options.set_connect_timeout, options.set_first_byte_timeout, options.set_between_bytes_timeout):
        try:
            setter(nanos)
        except Err:
            pass
    outgoing_body = request.body()
    try:
        future = outgoing_handler.handle(request, options)
    except Err as err:
        raise _http_failure(err.value, url) from None
    if body is not None:
        data = body.encode() if isinstance(body, str) else body
        stream = outgoing_body.write()
        for start in range(0, len(data), 4096):
            stream.blocking_write_and_flush(data[start:start + 4096])
        stream.__exit__(None, None, None)
    types.OutgoingBody.finish(outgoing_body, None)
    while True:
        result = future.get()
        if result is not None:
            break
        pollable = future.subscribe()
        pollable.block()
        pollable.__exit__(None, None, None)
    inner = result.value if isinstance(result, Ok) else None
    if inner is None:
        raise Failed(f"request to {url} failed: the response was already taken")
    if isinstance(inner, Err):
        raise _http_failure(inner.value, url)
    response = inner.value
    status = response.status()
    header_map: dict = {}
    for key, value in response.headers().entries():
        header_map.setdefault(key.lower(), value.decode("latin-1"))
    incoming = response.consume()
    stream = incoming.stream()
    chunks = []
    while True:
        try:
            chunk = stream.blocking_read(65536)
        except Err as err:
            if isinstance(err.value, streams.StreamError_Closed):
                break
            raise Failed(f"reading the response from {url} failed") from None
        chunks.append(chunk)
    stream.__exit__(None, None, None)
    return Response(status, header_map, b"".join(chunks))


def _http_failure(code: Any, url: str) -> ToolError:
    name = type(code).__name__.replace("ErrorCode_", "")
    detail = getattr(code, "value", None)
    if name == "HttpRequestDenied":
        return Denied(f"request to {url} refused: its host is not granted to this plugin")
    if name == "DestinationIpProhibited":
        return Denied(f"request to {url} refused: the address is not allowed")
    text = re.sub(r"(?<!^)(?=[A-Z])", " ", name).lower()
    return Failed(f"request to {url} failed: {text}" + (f" ({detail})" if isinstance(detail, str) and detail else ""))


# --- the exports componentize-py binds ------------------------------------------


def _context(ctx: Any) -> Context:
    return Context(call_id=ctx.call_id, workspace=ctx.workspace, session_id=ctx.session_id)


def _content(result: Any, tool_module: Any) -> list:
    if result is None:
        return []
    if isinstance(result, str):
        return [tool_module.Content_Text(result)]
    if isinstance(result, Json):
        return [tool_module.Content_Json(json.dumps(result.value))]
    if isinstance(result, (dict, list, int, float, bool)):
        return [tool_module.Content_Json(json.dumps(result))]
    if isinstance(result, (tuple,)):
        return [c for item in result for c in _content(item, tool_module)]
    return [tool_module.Content_Text(str(result))]


class ToolExport:
    """The `capstan:plugin/tool` export, over the registered tools."""

    def describe(self) -> list:
        t = _tool_wit
        specs = []
        for item in _TOOLS.values():
            hints = t.ToolHints(0)
            for key, flag in (("read_only", t.ToolHints.READ_ONLY), ("destructive", t.ToolHints.DESTRUCTIVE),
                              ("idempotent", t.ToolHints.IDEMPOTENT), ("open_world", t.ToolHints.OPEN_WORLD)):
                if item.hints[key]:
                    hints |= flag
            specs.append(t.ToolSpec(item.name, item.description, json.dumps(item.schema), hints))
        return specs

    def call(self, name: str, input: str, ctx: Any) -> Any:
        t, Err = _tool_wit, _Err
        try:
            result = call_tool(name, input, _context(ctx))
        except ToolError as err:
            variant = {"invalid-input": t.ToolError_InvalidInput, "denied": t.ToolError_Denied}.get(err.kind, t.ToolError_Failed)
            raise Err(variant(str(err) or type(err).__name__))
        return t.ToolOutput(_content(result, t))


class HookExport:
    """The `capstan:plugin/hook` export, over the registered hooks."""

    def subscriptions(self) -> list:
        h = _hook_wit
        return [h.Subscription(getattr(h.Event, item.event.upper().replace("-", "_")), item.matcher) for item in _HOOKS]

    def handle(self, input: Any, ctx: Any) -> Any:
        h, Err = _hook_wit, _Err
        event = input.event.name.lower().replace("_", "-")
        try:
            decision = handle_event(event, input.payload)
        except Exception as err:  # noqa: BLE001 - a failing hook fails closed on the host
            traceback.print_exc(file=sys.stderr)
            raise Err(f"{type(err).__name__}: {err}")
        variants = {
            "proceed": lambda _: h.Decision_Proceed(), "allow": lambda _: h.Decision_Allow(),
            "ask": h.Decision_Ask, "deny": h.Decision_Deny, "modify": h.Decision_Modify,
            "add-context": h.Decision_AddContext, "keep-going": h.Decision_KeepGoing,
        }
        return h.HookOutput(variants[decision.kind](decision.value), decision.system_message)


class SkillExport:
    """The `capstan:plugin/skill` export, over the registered skills."""

    def list(self) -> list:
        s = _skill_wit
        return [s.SkillMeta(i.name, i.description, i.when_to_use, i.argument_hint, i.user_invocable,
                            i.model_invocable, i.allowed_tools) for i in _SKILLS.values()]

    def load(self, name: str, arguments: str) -> str:
        Err = _Err
        try:
            return load_skill(name, arguments)
        except Exception as err:  # noqa: BLE001
            raise Err(f"{type(err).__name__}: {err}")

    def resource(self, name: str, path: str) -> bytes:
        Err = _Err
        s = _SKILLS.get(name)
        if s is None:
            raise Err(f"unknown skill `{name}`")
        if path not in s.resources:
            raise Err(f"skill `{name}` has no resource `{path}`")
        value = s.resources[path]
        return value.encode() if isinstance(value, str) else bytes(value)
