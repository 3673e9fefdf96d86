"""What an agent reads before the task: a working directory's ``AGENTS.md`` and the Agent Skills it may use.

``AGENTS.md`` (https://agents.md) is shown verbatim as the first user message.
Agent Skills (``<root>/<name>/SKILL.md``, a YAML-ish front matter with
``name`` and ``description``, then the body) are listed by name and
description; the agent reads a body on demand with the ``read_skill`` tool.
Both are read once, when the agent is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptgym.core.chat import ChatMessage, ChatRole
from promptgym.modules.tool import Tool

READ_SKILL = "read_skill"


def existing_directory(path: Any, what: str) -> str:
    """``path`` resolved, or a ValueError saying it is not a directory."""
    resolved = Path(path).expanduser().resolve()
    if not resolved.is_dir():
        raise ValueError(f"{what} {str(path)!r} is not an existing directory")
    return str(resolved)


def agents_md_message(workdir: str | None) -> ChatMessage | None:
    """The root ``AGENTS.md`` of ``workdir`` as a user message, or None (no workdir, no file, empty file)."""
    if not workdir:
        return None
    path = Path(workdir) / "AGENTS.md"
    text = path.read_text(encoding="utf-8").strip() if path.is_file() else ""
    return ChatMessage(role=ChatRole.USER, content=text) if text else None


@dataclass
class Skill:
    name: str
    description: str
    path: Path

    def body(self) -> str:
        return _split_front_matter(self.path.read_text(encoding="utf-8"))[1].strip()


def _split_front_matter(text: str) -> tuple[dict[str, str], str]:
    if not text.startswith("---"):
        return {}, text
    head, _, body = text[3:].partition("\n---")
    fields = {}
    for line in head.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            fields[key.strip()] = value.strip().strip("'\"")
    return fields, body.partition("\n")[2]  # what follows the closing --- line


def discover_skills(roots: list[str]) -> list[Skill]:
    """The skills under each root (``<root>/<dir>/SKILL.md``); a name seen in an earlier root wins."""
    found: dict[str, Skill] = {}
    for root in roots:
        for skill_file in sorted(Path(root).glob("*/SKILL.md")):
            fields, _ = _split_front_matter(skill_file.read_text(encoding="utf-8"))
            name = fields.get("name") or skill_file.parent.name
            found.setdefault(name, Skill(name, fields.get("description", ""), skill_file))
    return list(found.values())


def skills_message(skills: list[Skill]) -> ChatMessage | None:
    """The ``<available_skills>`` listing (names and descriptions, no paths) as a user message."""
    if not skills:
        return None
    entries = "\n".join(f"<skill>\n<name>{skill.name}</name>\n<description>{skill.description}</description>\n</skill>"
                        for skill in skills)
    text = (f"<available_skills>\n{entries}\n</available_skills>\n"
            f"Read a skill's instructions with the {READ_SKILL} tool before using it.")
    return ChatMessage(role=ChatRole.USER, content=text)


def read_skill_tool(skills: list[Skill]) -> Tool:
    """A tool that returns a skill's ``SKILL.md`` body by name (rebuilt from the agent's ``skills``, never saved)."""
    by_name = {skill.name: skill for skill in skills}

    async def read_skill(name: str) -> dict[str, Any]:
        """Read the full instructions of one of the available skills.

        Args:
            name: The skill's name, as listed in <available_skills>.
        """
        skill = by_name.get(name)
        if skill is None:
            return {"error": f"no skill named {name!r}; available: {', '.join(sorted(by_name)) or 'none'}"}
        return {"name": name, "content": skill.body()}

    return Tool(read_skill, name=READ_SKILL)


def prepend_once(messages: list[dict[str, Any]], message: ChatMessage | None) -> None:
    """Put ``message`` first unless the same one is already there (a trajectory fed back in keeps one copy)."""
    if message is None:
        return
    wire = message.get_json()
    if any(item.get("role") == wire["role"] and item.get("content") == wire["content"] for item in messages):
        return
    messages.insert(0, wire)
