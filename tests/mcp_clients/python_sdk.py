"""Drives `capstan mcp serve` with the official MCP Python SDK (1.x or 2.x).

Usage: python_sdk.py CONFIG_JSON

CONFIG_JSON holds:
  transport   "stdio" or "http"
  command     [program, args...] (stdio), with "cwd" and "env"
  url         the endpoint (http)
  errlog      where the server's stderr goes (stdio)
  mode        "legacy" (initialize), "modern" (2026-07-28, no handshake),
              or "auto" (2.x: discover, then fall back)
  version     for "legacy" with SDK 1.x: the revision to ask for
  roots       a folder to offer as the client's root, or null
  steps       the steps to run, in order

Prints one JSON object: what each step saw. Anything unexpected raises, so
the process fails with the traceback.
"""

import json
import sys
from importlib.metadata import version as package_version

import anyio

SDK_MAJOR = int(package_version("mcp").split(".")[0])


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def text_of(result):
    data = dump(result)
    return {
        "isError": bool(data.get("isError")),
        "text": "".join(c.get("text", "") for c in data.get("content", [])),
    }


class Connection:
    """The SDK's session, whichever major version, behind one small API."""

    def __init__(self, session, protocol_version, server_name):
        self.session = session
        self.protocol_version = protocol_version
        self.server_name = server_name

    async def list_tools(self):
        return (await self.session.list_tools()).tools

    async def call(self, name, arguments, progress=None):
        return await self.session.call_tool(name, arguments, progress_callback=progress)

    async def ping(self):
        await self.session.send_ping()


def roots_callback(folder):
    if folder is None:
        return None
    from pydantic import FileUrl

    import mcp.types as types

    async def list_roots(_context):
        uri = FileUrl("file://" + folder)
        return types.ListRootsResult(roots=[types.Root(uri=uri, name="project")])

    return list_roots


async def connect_v1(config, stack):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    import mcp.client.session as client_session

    if config.get("version"):
        # Ask for this revision in `initialize`.
        client_session.types.LATEST_PROTOCOL_VERSION = config["version"]
    if config["transport"] == "stdio":
        params = StdioServerParameters(
            command=config["command"][0],
            args=config["command"][1:],
            env=config["env"],
            cwd=config["cwd"],
        )
        errlog = stack.enter_context(open(config["errlog"], "w"))
        read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
    else:
        from mcp.client.streamable_http import streamablehttp_client

        read, write, _ = await stack.enter_async_context(streamablehttp_client(config["url"]))
    session = await stack.enter_async_context(
        ClientSession(read, write, list_roots_callback=roots_callback(config.get("roots")))
    )
    init = await session.initialize()
    return Connection(session, init.protocolVersion, init.serverInfo.name)


async def connect_v2(config, stack):
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    if config["transport"] == "stdio":
        params = StdioServerParameters(
            command=config["command"][0],
            args=config["command"][1:],
            env=config["env"],
            cwd=config["cwd"],
        )
        errlog = stack.enter_context(open(config["errlog"], "w"))
        server = stdio_client(params, errlog=errlog)
    else:
        server = config["url"]
    mode = {"legacy": "legacy", "auto": "auto", "modern": "2026-07-28"}[config["mode"]]
    client = await stack.enter_async_context(
        Client(server, mode=mode, list_roots_callback=roots_callback(config.get("roots")))
    )
    info = client.server_info
    return Connection(client, client.protocol_version, info.name if info else None)


async def run(config):
    from contextlib import AsyncExitStack

    seen = {"sdk": package_version("mcp")}
    async with AsyncExitStack() as stack:
        connect = connect_v1 if SDK_MAJOR < 2 else connect_v2
        conn = await connect(config, stack)
        seen["protocolVersion"] = conn.protocol_version
        seen["serverName"] = conn.server_name
        for step in config["steps"]:
            seen[step] = await STEPS[step](conn)
    return seen


async def step_tools(conn):
    tools = await conn.list_tools()
    listed = {t.name: dump(t) for t in tools}
    return {"names": sorted(listed), "fs__read": listed.get("fs__read"), "fs__write": listed.get("fs__write")}


async def step_read(conn):
    return text_of(await conn.call("fs__read", {"path": "hello.txt"}))


async def step_write(conn):
    return text_of(await conn.call("fs__write", {"path": "written.txt", "content": "new"}))


async def step_invalid(conn):
    return text_of(await conn.call("fs__read", {"no_such_field": 1}))


async def step_tool_error(conn):
    return text_of(await conn.call("misbehave__fail", {"message": "it broke"}))


async def step_missing_file(conn):
    return text_of(await conn.call("fs__read", {"path": "missing.txt"}))


async def step_unknown(conn):
    try:
        await conn.call("nosuch__tool", {})
    except Exception as e:  # the SDK's error type differs between majors
        return {"raised": True, "message": str(e)}
    return {"raised": False}


async def step_concurrent(conn):
    results = [None] * 20

    async def one(n):
        results[n] = text_of(await conn.call("fs__read", {"path": f"many/f{n}.txt"}))

    async with anyio.create_task_group() as tg:
        for n in range(20):
            tg.start_soon(one, n)
    return results


async def step_progress(conn):
    reports = []

    async def progress(value, total, message):
        reports.append({"progress": value, "total": total, "message": message})

    result = text_of(await conn.call("misbehave__chatty", {"message": "hi"}, progress))
    return {"result": result, "reports": reports}


async def step_roots(conn):
    return text_of(await conn.call("fs__read", {"path": "only-in-root.txt"}))


async def step_cancel(conn):
    if SDK_MAJOR >= 2:
        # The 2.x client sends notifications/cancelled (or, stateless over
        # HTTP, closes the call's stream) when the call is cancelled.
        with anyio.move_on_after(1.5) as scope:
            await conn.call("misbehave__sleep", {"bytes": 25})
        cancelled = scope.cancelled_caught
    else:
        # The 1.x client sends nothing when a call is cancelled; its user
        # sends notifications/cancelled for the request's id.
        import mcp.types as types

        request_id = conn.session._request_id
        cancelled = False
        async with anyio.create_task_group() as tg:

            async def slow():
                await conn.call("misbehave__sleep", {"bytes": 25})

            tg.start_soon(slow)
            await anyio.sleep(1.5)
            await conn.session.send_notification(
                types.ClientNotification(
                    types.CancelledNotification(
                        method="notifications/cancelled",
                        params=types.CancelledNotificationParams(
                            requestId=request_id, reason="the test cancelled it"
                        ),
                    )
                )
            )
            tg.cancel_scope.cancel()
            cancelled = True
    after = text_of(await conn.call("fs__read", {"path": "hello.txt"}))
    return {"cancelled": cancelled, "after": after}


STEPS = {
    "tools": step_tools,
    "read": step_read,
    "write": step_write,
    "invalid": step_invalid,
    "tool_error": step_tool_error,
    "missing_file": step_missing_file,
    "unknown": step_unknown,
    "concurrent": step_concurrent,
    "progress": step_progress,
    "roots": step_roots,
    "cancel": step_cancel,
}


def main():
    config = json.loads(sys.argv[1])
    seen = anyio.run(run, config)
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
