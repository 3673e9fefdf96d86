"""The data-model names are listed once, in their module's ``__all__``; the facades re-export them."""

import pytest

import promptgym
import promptgym.backend
from promptgym.core import base_models, chat, chat_completions


@pytest.mark.parametrize("module", [base_models, chat, chat_completions], ids=lambda m: m.__name__)
def test_all_lists_the_public_names_and_both_facades_export_them(module):
    defined = {name for name, value in vars(module).items()
               if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__}
    assert sorted(module.__all__) == sorted(defined)
    for name in module.__all__:
        assert getattr(promptgym.backend, name) is getattr(module, name)
        assert getattr(promptgym, name) is getattr(module, name)
        assert name in promptgym.__all__


def test_backend_keeps_synalinks_other_name_for_tool_call():
    assert promptgym.backend.ToolCalling is chat.ToolCall is promptgym.ToolCalling
