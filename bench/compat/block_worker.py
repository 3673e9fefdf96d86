"""Runs doc blocks under the shim (the runner starts one process per page).

    python block_worker.py CHECKOUT BLOCKS.json RESULTS.jsonl

Each block runs as a script (``__name__ == "__main__"``, top-level ``await``
allowed) in a fresh namespace and an empty working directory, with the
language model answered by the stand-in ``litellm`` (placeholder JSON that
fits the requested schema). It passes if it runs to the end.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import inspect
import json
import os
import shutil
import sys
import tempfile
import traceback
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def run_block(code: str) -> None:
    import promptgym
    from promptgym.lm.defaults import clear_defaults

    if hasattr(promptgym, "clear_session"):
        promptgym.clear_session()
    clear_defaults()
    # The block runs as `python block.py` would: its globals are the __main__ module's (pydantic resolves a
    # DataModel's annotations there), and the guides assume `import synalinks` was run before it.
    main = types.ModuleType("__main__")
    main.__dict__.update({"__builtins__": __builtins__, "synalinks": importlib.import_module("synalinks")})
    previous = sys.modules["__main__"]
    sys.modules["__main__"] = main
    try:
        compiled = compile(code, "<doc block>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(compiled, main.__dict__)  # noqa: S307 - the block is the thing measured
        if inspect.iscoroutine(result):
            asyncio.run(result)
    finally:
        sys.modules["__main__"] = previous


def main() -> None:
    checkout, blocks_file, results = sys.argv[1:]
    import litellm_bridge
    import public_api
    import shim
    from harness_testing import harness_modules

    litellm_bridge.install()
    shim.install(public_api.PublicApi(Path(checkout)), harness_modules(Path(checkout)))
    home = os.getcwd()
    for block in json.loads(Path(blocks_file).read_text()):
        workdir = tempfile.mkdtemp(prefix="compat-block-")
        os.environ["PROMPTGYM_CACHE_DIR"] = os.path.join(workdir, ".cache")
        os.chdir(workdir)
        try:
            run_block(block["code"])
            outcome, detail = "passed", ""
        except BaseException as error:  # noqa: BLE001 - SystemExit from a block is a failure too
            outcome = "failed"
            frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == "<doc block>"]
            where = f" (block line {frames[-1].lineno})" if frames else ""
            detail = f"{type(error).__name__}: {error}"[:1200] + where
        finally:
            os.chdir(home)
            shutil.rmtree(workdir, ignore_errors=True)
        with open(results, "a") as handle:
            handle.write(json.dumps({"block": block["id"], "outcome": outcome, "detail": detail}) + "\n")


if __name__ == "__main__":
    main()
