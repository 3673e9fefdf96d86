"""``promptgym.ui``: the review page of ``promptgym ui``: runs (curves, prompts before and after,
comparisons, two runs side by side) and served traces (filter, read, rate, correct).

    from promptgym.traces import TraceStore
    from promptgym.ui import create_ui_app
    app = create_ui_app(runs=None, traces=TraceStore(":memory:"))   # then uvicorn.run(app, host="127.0.0.1")

See docs/ui.md.
"""

from promptgym.ui.app import create_ui_app
from promptgym.ui.sources import RunsSource, UnknownRunError

__all__ = ["RunsSource", "UnknownRunError", "create_ui_app"]
