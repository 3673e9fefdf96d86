"""Last round's surfaces as a hostile user meets them (issue 44): tools, MCP servers, ``serve``, edited programs.

- ``tools``: plain-def and async tools that hang, flood, return huge or hostile values, or are named badly;
- ``mcp``: stdio servers that die mid-call, write garbage on the protocol stream, hang, answer 5 MB, or
  never start; an HTTP server that is not there;
- ``serve``: slow clients (headers a line a second, a body a byte a second, a connection that sends
  nothing), clients that disconnect mid-request, many idle connections, oversized headers;
- ``program_edit``: ``promptgym serve`` and ``promptgym export-prompt`` on hand-edited program files
  (a Generator program and an agent with an MCP tool).

A case that held a resource past its limit (a connection, a thread, a child process) is ``leaked``; one
whose request never got an answer is ``lost``. Only fake and scripted models: nothing is downloaded.
"""

from __future__ import annotations

import json
import textwrap

from common import Case, Ran, snippet

HEAD = """
import asyncio, json, os, sys, threading, time
from surface_support import children_running, emit, report, serve, thread_count, tool_result, trickle
"""


def code(body: str) -> list[str]:
    return snippet(HEAD + textwrap.dedent(body))


def answer_is(expected) -> callable:
    def check(ran: Ran) -> str | None:
        got = ran.result().get("answer")
        return None if got == expected else f"answered {got!r}, expected {expected!r}"
    return check


def checked(field: str, test, why: str, outcome: str = "") -> callable:
    """A check on one RESULT field; ``outcome`` ("leaked", "lost") says what a failure counts as."""
    def check(ran: Ran) -> str | None:
        value = ran.result().get(field)
        return None if test(value) else f"{outcome + ': ' if outcome else ''}{why} ({field}={value!r})"
    return check


# -- tools ------------------------------------------------------------------------------------

TOOL_DEFS = '''
from promptgym.modules.tool import Tool

def stuck(seconds: float) -> dict:
    """Sleep.

    Args:
        seconds: How long.
    """
    time.sleep(seconds)
    return {"slept": seconds}

def healthy(x: int) -> dict:
    """Answer at once.

    Args:
        x: A number.
    """
    return {"x": x}
'''


def tool_case(name: str, body: str, expect: str = "ok", mention: tuple[str, ...] = (), check=None,
              timeout: float = 30.0) -> Case:
    return Case("tools", name, code(TOOL_DEFS + textwrap.dedent(body)), expect=expect, mention=mention, check=check,
                timeout=timeout)


def tool_cases() -> list[Case]:
    return [
        tool_case("plain def sleeping 30 s, timeout 0.5 s: the script ends on time", """
            async def main():
                return tool_result(await Tool(stuck, timeout=0.5)(seconds=30))
            report(main)
            """, check=checked("error", lambda e: e and "did not answer within 0.5 s" in e, "no timeout error"),
            timeout=20),
        tool_case("8 hung plain-def calls, then a healthy plain-def tool still answers", """
            async def main():
                hung = Tool(stuck, timeout=0.3)
                await asyncio.gather(*(hung(seconds=30) for _ in range(8)))
                return tool_result(await Tool(healthy, timeout=3)(x=7))
            report(main)
            os._exit(0)  # the exit itself is the case above
            """, check=answer_is({"x": 7})),
        tool_case("40 hung plain-def calls: threads stay bounded, the next call says why it can't run", """
            async def main():
                base = thread_count(os.getpid())
                hung = Tool(stuck, timeout=0.2)
                await asyncio.gather(*(hung(seconds=30) for _ in range(40)))
                result = tool_result(await Tool(healthy, timeout=1)(x=1))
                return {**result, "extra_threads": thread_count(os.getpid()) - base}
            report(main)
            os._exit(0)
            """, expect="error", mention=("past their timeout", "stuck"),
            check=checked("extra_threads", lambda n: n is not None and n <= 33, "more threads than the bound",
                          "leaked")),
        tool_case("async def hanging, timeout 0.5 s", """
            async def forever(x: int) -> dict:
                '''Never answer.

                Args:
                    x: Anything.
                '''
                await asyncio.sleep(3600)
            async def main():
                return tool_result(await Tool(forever, timeout=0.5)(x=1))
            report(main)
            """, expect="error", mention=("did not answer within 0.5 s",), timeout=20),
        tool_case("a parameter named training", """
            def lookup(query: str, training: bool) -> dict:
                '''Look up.

                Args:
                    query: What.
                    training: Which index.
                '''
                return {"query": query, "training": training}
            async def main():
                return tool_result(await Tool(lookup)(query="q", training=True))
            report(main)
            """, check=answer_is({"query": "q", "training": True})),
        tool_case("NaN and infinities in a result", """
            def numbers() -> dict:
                '''Odd floats.'''
                return {"nan": float("nan"), "inf": float("inf"), "values": [float("-inf"), 1.0]}
            async def main():
                result = tool_result(await Tool(numbers)())
                try:
                    json.dumps(result.get("answer"), allow_nan=False)
                    strict = True
                except ValueError:
                    strict = False
                return {**result, "strict_json": strict}
            report(main)
            """, check=checked("strict_json", lambda s: s is True, "NaN/Infinity reach the model, not JSON")),
        tool_case("a result that contains itself", """
            def loop() -> dict:
                '''A loop.'''
                value = {"a": 1}
                value["self"] = value
                return value
            async def main():
                return tool_result(await Tool(loop)())
            report(main)
            """, expect="error", mention=("contains itself",)),
        tool_case("a result nested 100000 deep", """
            def deep() -> list:
                '''Deep.'''
                value = []
                for _ in range(100000):
                    value = [value]
                return value
            async def main():
                return tool_result(await Tool(deep)())
            report(main)
            """, expect="error", mention=("deep",)),
        tool_case("a result whose text conversion raises", """
            class Hostile:
                def __str__(self):
                    raise RuntimeError("no text for you")
            def hostile() -> dict:
                '''Hostile.'''
                return {"value": Hostile()}
            async def main():
                return tool_result(await Tool(hostile)())
            report(main)
            """, expect="error", mention=("hostile", "no text for you")),
        tool_case("sys.exit() inside a plain-def tool", """
            def leave() -> dict:
                '''Leave.'''
                sys.exit(3)
            async def main():
                return tool_result(await Tool(leave)())
            report(main)
            """, expect="error", mention=("leave", "SystemExit")),
        tool_case("a 5 MB result", """
            def flood() -> dict:
                '''Flood.'''
                return {"text": "x" * 5_000_000}
            async def main():
                return tool_result(await Tool(flood)())
            report(main)
            """, expect="error", mention=("flood", "max_result_chars")),
        tool_case("a tool writing 20 MB to stdout while it runs", """
            def chatty(x: int) -> dict:
                '''Chatty.

                Args:
                    x: A number.
                '''
                for _ in range(200):
                    sys.stdout.write("y" * 100_000 + "\\n")
                return {"x": x}
            async def main():
                return tool_result(await Tool(chatty, timeout=20)(x=2))
            report(main)
            """, check=answer_is({"x": 2})),
        tool_case("the name 'my tool!'", """
            async def main():
                Tool(healthy, name="my tool!")
                return {"defined": True}
            report(main)
            """, expect="error", mention=("my tool!", "A-Za-z0-9_-")),
        tool_case("a name of 65 characters", """
            async def main():
                Tool(healthy, name="t" * 65)
                return {"defined": True}
            report(main)
            """, expect="error", mention=("t" * 65, "1,64")),
        tool_case("a result with text that is not Unicode (a lone surrogate, as from undecodable bytes)", """
            def undecodable() -> dict:
                '''A file name read with errors="surrogateescape".'''
                return {"name": b"report-\\xff.txt".decode("utf-8", "surrogateescape")}
            async def main():
                result = tool_result(await Tool(undecodable)())
                try:
                    json.dumps(result.get("answer"), ensure_ascii=False).encode("utf-8")
                    encodable = True
                except UnicodeEncodeError:
                    encodable = False
                return {**result, "utf8": encodable}
            report(main)
            """, check=checked("utf8", lambda ok: ok is True, "text no model request can carry reaches the model")),
        tool_case("an integer of 5000 digits in a result", """
            def huge_number() -> dict:
                '''Huge.'''
                return {"n": 10 ** 5000}
            async def main():
                return tool_result(await Tool(huge_number)())
            report(main)
            """, expect="error", mention=("huge_number", "4300")),
        tool_case("a tool that raises (control)", """
            def broken(x: int) -> dict:
                '''Broken.

                Args:
                    x: A number.
                '''
                raise KeyError("missing")
            async def main():
                return tool_result(await Tool(broken)(x=1))
            report(main)
            """, expect="error", mention=("broken failed", "KeyError")),
    ]


# -- MCP --------------------------------------------------------------------------------------

MCP_SERVER = '''
import os, sys, time
from mcp.server.mcpserver import MCPServer

server = MCPServer("hostile")

@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

@server.tool()
def die(x: int) -> int:
    """Exit mid-call."""
    os._exit(1)

@server.tool()
def garbage(x: int) -> str:
    """Write garbage on the protocol stream, then answer."""
    sys.stdout.write("this is not JSON-RPC\\n{\\"jsonrpc\\": \\"2.0\\", \\"id\\": \\"nope\\"}\\n")
    sys.stdout.flush()
    return "fine"

@server.tool()
def hang(x: int) -> int:
    """Never answer."""
    time.sleep(3600)
    return x

@server.tool()
def huge(x: int) -> str:
    """Answer 5 MB."""
    return "x" * 5_000_000

@server.tool()
def broken(x: int) -> int:
    """Raise inside the server."""
    raise RuntimeError("the database is down")

@server.tool()
def mute(x: int) -> int:
    """Close the protocol stream, keep running."""
    os.close(1)
    time.sleep(3600)
    return x

if __name__ == "__main__":
    server.run("stdio")
'''

MCP_CLIENT = '''
from promptgym.modules.mcp_tools import MultiServerMCPClient
SERVER = os.path.abspath("hostile_mcp.py")

async def call(tool_name, arguments, timeout=20.0, command=sys.executable, args=(SERVER,)):
    import inspect
    listing = {"list_timeout": 20} if "list_timeout" in inspect.signature(MultiServerMCPClient).parameters else {}
    client = MultiServerMCPClient({"s": {"transport": "stdio", "command": command, "args": list(args)}}, timeout=timeout,
                                  **listing)  # list_timeout: this branch's; the code before it has none
    tools = {tool.name: tool for tool in await client.get_tools(server_name="s")}
    result = tool_result(await tools[tool_name](**arguments))
    time.sleep(1.0)  # a stopped server has had time to go
    return {**result, "servers_left": len(children_running(SERVER))}
'''


def no_server_left(ran: Ran) -> str | None:
    left = ran.result().get("servers_left")
    return None if not left else f"leaked: {left} MCP server process(es) still running after the call"


def mcp_case(name: str, body: str, expect: str = "error", mention: tuple[str, ...] = (), check=no_server_left,
             timeout: float = 60.0, files: dict | None = None) -> Case:
    return Case("mcp", name, code(MCP_CLIENT + textwrap.dedent(body)), expect=expect, mention=mention, check=check,
                timeout=timeout, files={"hostile_mcp.py": MCP_SERVER, **(files or {})})


def mcp_cases() -> list[Case]:
    return [
        mcp_case("a call that works (control)", """
            async def main():
                return await call("add", {"a": 2, "b": 3})
            report(main)
            """, expect="ok", check=lambda ran: no_server_left(ran) or answer_is({"result": 5})(ran)),
        mcp_case("the server exits mid-call", """
            async def main():
                return await call("die", {"x": 1})
            report(main)
            """, mention=("die",)),
        mcp_case("the server writes garbage on the protocol stream mid-call", """
            async def main():
                return await call("garbage", {"x": 1})
            report(main)
            """, expect="ok", check=lambda ran: no_server_left(ran) or (
                None if ran.result().get("answer") == {"result": "fine"} or ran.result().get("failed")
                else f"answered {ran.result()}")),
        mcp_case("the server hangs mid-call, timeout 8 s", """
            async def main():
                return await call("hang", {"x": 1}, timeout=8.0)
            report(main)
            """, mention=("hang", "did not answer within 8 s")),
        mcp_case("the server answers 5 MB", """
            async def main():
                return await call("huge", {"x": 1})
            report(main)
            """, mention=("max_result_chars",)),
        mcp_case("the tool raises inside the server", """
            async def main():
                return await call("broken", {"x": 1})
            report(main)
            """, mention=("broken", "the database is down")),
        mcp_case("the server closes its output mid-call and keeps running, timeout 8 s", """
            async def main():
                return await call("mute", {"x": 1}, timeout=8.0)
            report(main)
            """, mention=("mute",)),
        mcp_case("the server command does not exist", """
            async def main():
                return await call("add", {"a": 1, "b": 2}, command="/nonexistent/mcp-server")
            report(main)
            """, mention=("/nonexistent/mcp-server",), check=None),
        mcp_case("the server exits at start", """
            async def main():
                return await call("add", {"a": 1, "b": 2}, args=("-c", "import sys; sys.exit(1)"))
            report(main)
            """, mention=("MCP", "s"), check=None),
        mcp_case("the server prints garbage and never speaks MCP", """
            async def main():
                return await call("add", {"a": 1, "b": 2}, args=("-c", "import time; print('hello, I am not MCP', flush=True); time.sleep(3600)"))
            report(main)
            """, mention=("MCP",), check=None, timeout=90),
        mcp_case("an HTTP server that is not there", """
            async def main():
                client = MultiServerMCPClient({"s": {"transport": "streamable_http", "url": "http://127.0.0.1:9/mcp"}})
                await client.get_tools(server_name="s")
                return {"listed": True}
            report(main)
            """, mention=("127.0.0.1:9",), check=None),
    ]


# -- serve ------------------------------------------------------------------------------------

SERVE_PROGRAM = '''
import promptgym as pg
from factories import Question, Answer

def save(path, api_base, name="qa"):
    lm = pg.LanguageModel(model="openai/fake", api_base=api_base, api_key="unused", cache=False, retries=0)
    program = pg.Sequential([pg.Input(data_model=Question), pg.Generator(data_model=Answer, language_model=lm)], name=name)
    program.save(path)
    return path
'''


def serve_case(name: str, body: str, server, expect: str = "error", mention: tuple[str, ...] = (), check=None,
               timeout: float = 90.0) -> Case:
    setup = SERVE_PROGRAM + f"OK_URL = {server.mode_url('ok')!r}\nSLOW_URL = {server.mode_url('slow', seconds=5)!r}\n"
    return Case("serve", name, code(setup + textwrap.dedent(body)), expect=expect, mention=mention, check=check,
                timeout=timeout)


def held(ran: Ran) -> str | None:
    result = ran.result()
    if result.get("sent") == result.get("of"):
        return f"leaked: the connection was held {result.get('held_s')} s, every piece accepted"
    return None


def serve_cases(server) -> list[Case]:
    return [
        serve_case("headers a line a second for 17 s", """
            HEADERS = [b"POST /v1/programs/qa/predict HTTP/1.1\\r\\n", b"Host: 127.0.0.1\\r\\n"] + [
                ("X-Slow-%d: %d\\r\\n" % (i, i)).encode() for i in range(15)]
            with serve([save("qa.json", OK_URL)]) as served:
                result = trickle(served.port, HEADERS, every_s=1.0)
            emit({"raised": "cut off" if result["sent"] < result["of"] else None, "message": result["answer"], **result})
            """, server, mention=("408",), check=held),
        serve_case("a body a byte a second", """
            head = b"POST /v1/programs/qa/predict HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Type: application/json\\r\\nContent-Length: 20\\r\\n\\r\\n"
            with serve([save("qa.json", OK_URL)]) as served:
                result = trickle(served.port, [head] + [b" "] * 20, every_s=1.0)
            emit({"raised": "cut off" if result["sent"] < result["of"] else None, "message": result["answer"], **result})
            """, server, check=held),
        serve_case("a connection that sends nothing for 15 s", """
            with serve([save("qa.json", OK_URL)]) as served:
                result = trickle(served.port, [b""] * 15, every_s=1.0, read_s=1.0)
                import socket as socket_module
                with socket_module.create_connection(("127.0.0.1", served.port), timeout=20) as idle:
                    started = time.monotonic()
                    try:
                        closed = idle.recv(100) is not None  # b"" or a 408: the server gave up on it
                    except OSError:
                        closed = False
                    waited = time.monotonic() - started
            emit({"raised": "closed" if closed and waited < 19 else None, "message": "idle connection closed by the server"
                  if closed else "held", "waited_s": round(waited, 1)})
            """, server, mention=("closed",),
            check=checked("waited_s", lambda s: s is not None and s < 19, "idle connection held", "leaked")),
        serve_case("20 clients disconnect mid-request, then a normal one", """
            import httpx
            with serve([save("slow.json", SLOW_URL, "slow"), save("qa.json", OK_URL)]) as served:
                def hang_up():
                    try:
                        httpx.post(served.url + "/v1/programs/slow/predict", json={"question": "q"}, timeout=0.5)
                    except httpx.HTTPError:
                        pass
                threads = [threading.Thread(target=hang_up) for _ in range(20)]
                [thread.start() for thread in threads]
                [thread.join() for thread in threads]
                ok = httpx.post(served.url + "/v1/programs/qa/predict", json={"question": "q"}, timeout=30)
                deadline = time.monotonic() + 15
                in_flight = None
                while time.monotonic() < deadline:
                    metrics = httpx.get(served.url + "/metrics", timeout=5).text
                    line = next((l for l in metrics.splitlines() if l.startswith("promptgym_requests_in_flight")), "x 0")
                    in_flight = float(line.split()[-1])
                    if in_flight == 0:
                        break
                    time.sleep(0.5)
                alive = served.process.poll() is None
                output = served.output
            emit({"raised": None, "status": ok.status_code, "in_flight": in_flight, "alive": alive,
                  "traceback": "Traceback" in output})
            """, server, expect="ok",
            check=lambda ran: (checked("in_flight", lambda n: n == 0, "requests counted in flight after their clients left",
                                       "leaked")(ran) or checked("status", lambda s: s == 200, "the next request failed",
                                                                 "lost")(ran)
                               or checked("traceback", lambda t: t is False, "a traceback in serve's log")(ran))),
        serve_case("300 idle connections, then a normal request", """
            import httpx, socket as socket_module
            with serve([save("qa.json", OK_URL)]) as served:
                idle = [socket_module.create_connection(("127.0.0.1", served.port)) for _ in range(300)]
                response = httpx.post(served.url + "/v1/programs/qa/predict", json={"question": "q"}, timeout=30)
                [sock.close() for sock in idle]
            emit({"raised": None, "status": response.status_code})
            """, server, expect="ok", check=checked("status", lambda s: s == 200, "refused under the cap", "lost")),
        serve_case("a body nested 50,000 deep", """
            import httpx
            body = '{"question": ' + "[" * 50000 + "]" * 50000 + "}"
            with serve([save("qa.json", OK_URL)]) as served:
                response = httpx.post(served.url + "/v1/programs/qa/predict", content=body,
                                      headers={"content-type": "application/json"}, timeout=30)
                alive = served.process.poll() is None
            emit({"raised": "refused" if response.status_code != 200 else None, "alive": alive,
                  "message": f"{response.status_code} {response.text[:200]}"})
            """, server, mention=("400", "nested too deeply"),
            check=checked("alive", lambda a: a is True, "serve died", "lost")),
        serve_case("a 5000-digit number in the body", """
            import httpx
            with serve([save("qa.json", OK_URL)]) as served:
                response = httpx.post(served.url + "/v1/programs/qa/predict", content='{"question": ' + "9" * 5000 + "}",
                                      headers={"content-type": "application/json"}, timeout=30)
            emit({"raised": "refused" if response.status_code != 200 else None,
                  "message": f"{response.status_code} {response.text[:200]}"})
            """, server, mention=("400", "digits")),
        serve_case("NaN for a string field", """
            import httpx
            with serve([save("qa.json", OK_URL)]) as served:
                response = httpx.post(served.url + "/v1/programs/qa/predict", content='{"question": NaN}',
                                      headers={"content-type": "application/json"}, timeout=30)
            emit({"raised": "refused" if response.status_code != 200 else None,
                  "message": f"{response.status_code} {response.text[:200]}"})
            """, server, mention=("422", "question")),
        serve_case("100 KB of request headers", """
            import httpx
            with serve([save("qa.json", OK_URL)]) as served:
                response = httpx.post(served.url + "/v1/programs/qa/predict", json={"question": "q"},
                                      headers={"X-Big": "b" * 100_000}, timeout=30)
            emit({"raised": "refused" if response.status_code != 200 else None,
                  "message": f"{response.status_code} {response.text[:100]}", "status": response.status_code})
            """, server, mention=("431",)),
    ]


# -- serve and export-prompt on hand-edited program files -----------------------------------------

BUILD_BOTH = '''
import asyncio, sys
import promptgym as pg
from factories import Question, Answer
from promptgym.modules.mcp_tools import MCPTool

lm = pg.LanguageModel(model="openai/fake", api_base="http://127.0.0.1:9/v1", api_key="unused")
program = pg.Sequential([pg.Input(data_model=Question),
                         pg.Generator(data_model=Answer, language_model=lm, name="answerer", instructions="Be brief.")],
                        name="qa")
program.save("qa.json")

async def agent_program():
    tool = MCPTool(connection={"transport": "stdio", "command": sys.executable, "args": ["server.py"]}, mcp_name="add",
                   input_schema={"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    inputs = pg.Input(data_model=Question)
    agent = pg.FunctionCallingAgent(data_model=Answer, tools=[tool], language_model=lm, name="agent")
    return pg.Program(inputs=inputs, outputs=await agent(inputs), name="agent")

asyncio.run(agent_program()).save("agent.json")
'''

GENERATOR = "[m for m in d['program']['config']['modules'] if m['class_name'] == 'Generator'][0]['config']"


def tool_config(d: dict) -> dict:
    """The MCP tool's config inside the saved agent program (for the edits)."""
    found = []

    def visit(value):
        if isinstance(value, dict):
            if value.get("class_name") == "MCPTool":
                found.append(value["config"])
            for item in value.values():
                visit(item)
        elif isinstance(value, list):
            for item in value:
                visit(item)
    visit(d)
    return found[0]


EDITS = {
    "instructions 12345": ("qa.json", "d['variables']['answerer/state']['instructions'] = 12345"),
    "examples a string": ("qa.json", "d['variables']['answerer/state']['examples'] = 'x'"),
    "Generator without data_model": ("qa.json", f"del {GENERATOR}['data_model']"),
    "modules not a list": ("qa.json", "d['program']['config']['modules'] = 5"),
    "class_name os.system": ("qa.json", "d['program']['class_name'] = 'os.system'"),
    "temperature 'hot'": ("qa.json", f"{GENERATOR}['temperature'] = 'hot'"),
    "a JSON array": ("qa.json", "d = [d]"),
    "cut in half": ("qa.json", "RAW = open('qa.json').read()[:len(open('qa.json').read()) // 2]"),
    "not UTF-8": ("qa.json", "RAW = b'\\xff\\xfe' + open('qa.json', 'rb').read()[2:]"),
    "agent: tool name 'bad name!'": ("agent.json", "tool_config(d)['name'] = 'bad name!'"),
    "agent: tool timeout -1": ("agent.json", "tool_config(d)['timeout'] = -1"),
    "agent: tool transport 'ftp'": ("agent.json", "tool_config(d)['connection']['transport'] = 'ftp'"),
}

EDIT = '''
import json, sys
sys.path.insert(0, ".")
from cases_surfaces import tool_config
path, change = sys.argv[1], sys.argv[2]
d = json.load(open(path))
RAW = None
exec(change)
if RAW is None:
    json.dump(d, open(path, "w"))
else:
    open(path, "wb" if isinstance(RAW, bytes) else "w").write(RAW)
'''

SERVE_ONCE = '''
import sys
from surface_support import emit, serve
try:
    with serve([sys.argv[1]]) as served:
        pass
    print(served.output)
    emit({"raised": None, "started": True})
except RuntimeError as error:
    print(error)
    emit({"raised": "exit", "message": str(error)[-400:]})
'''


def program_edit_cases() -> list[Case]:
    cases = []
    files = {"build.py": BUILD_BOTH, "edit.py": EDIT, "serve_once.py": SERVE_ONCE}
    for name, (target, change) in EDITS.items():
        prepare = f'"$PYTHON" build.py && "$PYTHON" edit.py {target} {json.dumps(change)}'
        for command, runner in (("serve", f'"$PYTHON" serve_once.py {target}'),
                                ("export-prompt", f'"$PYTHON" -m promptgym.cli.main export-prompt {target}')):
            if command == "export-prompt" and target == "agent.json":
                continue  # an agent has no Generator prompt to export
            cases.append(Case("program_edit", f"{command}: {name}", ["bash", "-c", f"{prepare} && {runner}"],
                              files=files, mention=(target,), exit_code=None if command == "serve" else 2,
                              timeout=120))
    cases.append(Case("program_edit", "serve: the agent program unedited (control)",
                      ["bash", "-c", '"$PYTHON" build.py && "$PYTHON" serve_once.py agent.json'], files=files,
                      expect="ok", check=checked("started", lambda s: s is True, "did not start"), timeout=120))
    return cases


def cases(server) -> list[Case]:
    return [*tool_cases(), *mcp_cases(), *serve_cases(server), *program_edit_cases()]


SURFACE_CATEGORIES = ("tools", "mcp", "serve", "program_edit")
