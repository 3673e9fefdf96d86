"""``FunctionCallingAgent``: a trainable agent that calls tools until it can answer.

    agent = FunctionCallingAgent(data_model=Answer, tools=[Tool(calculate)], language_model=lm, max_iterations=5)
    outputs = await agent(inputs)          # {"messages": [...the trajectory...], **Answer's fields}

Each step the model either calls tools (several calls of one step run
concurrently) or gives its answer. On a server that calls tools natively
(OpenAI-compatible: vLLM, llama.cpp server, Ollama, OpenAI) the step sends
``tools`` and reads ``tool_calls``, and a final call writes the answer in the
agent's ``data_model``, as synalinks does. On the embedded engine the step is a
grammar-constrained JSON choice among the tools' argument schemas and the
answer (:mod:`promptgym.modules.tool_calls`): a call to an unknown tool or with
arguments of the wrong type can't be decoded.

Trainable: the instructions and the demonstrations (whole successful
trajectories: the input, each tool call and result, the answer) live in
``agent.tool_calls_generator.state`` (``agent.prompt_variable``), which every
optimizer evolves like a Generator's. Each run is recorded in the trace under
the agent's name, so few-shot optimizers turn well-scored runs into
demonstrations and ``export_sft_data`` writes them as OpenAI ``tool_calls``
conversations.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from promptgym.core.chat import ChatMessage, ChatMessages, ChatRole, is_chat_messages
from promptgym.core.data_model import is_data_model_class
from promptgym.core.json_data_model import JsonDataModel
from promptgym.core.json_ops import concatenate_schema
from promptgym.core.schema import data_model_from_schema, describe_schema_fields, schema_of_value
from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.lm.defaults import get_default_language_model
from promptgym.lm.language_model import LanguageModel
from promptgym.lm.openai_engine import wire_tool_calls
from promptgym.modules.agent_context import (
    READ_SKILL,
    agents_md_message,
    discover_skills,
    existing_directory,
    prepend_once,
    read_skill_tool,
    skills_message,
)
from promptgym.modules.chain_of_thought import ChainOfThought
from promptgym.modules.generator import Generator, as_json
from promptgym.modules.module import Module
from promptgym.modules.symbolic import SymbolicDataModel
from promptgym.modules.tool import Tool
from promptgym.modules.tool_calls import choice_schema, constrained_turns, openai_tool_calls, parse_arguments
from promptgym.modules.tracing import record_step
from promptgym.modules.variable import Variable

logger = logging.getLogger("promptgym")

TOOL_CALLING_MODES = ("auto", "native", "constrained")


def get_default_instructions() -> str:
    """What the agent is told when no instructions are given."""
    return ("Work out the task step by step with the tools. Call a tool whenever it can compute or look up "
            "something you need, read its result, and do not repeat a call whose result you already have. "
            "When you have everything the task asks for, give the final answer.")


@register_builtin
class FunctionCallingAgent(Module):
    """An agent that calls ``tools`` until it can answer (synalinks' arguments).

    Args:
        data_model / schema: the final answer's DataModel (or JSON schema); without
            either the agent answers with an assistant message.
        language_model: the LanguageModel (default: ``set_default_language_model``'s).
        tools: ``Tool`` instances (or functions, wrapped in one).
        instructions: the starting instructions (trainable); ``final_instructions``
            those of the final answer (default: the same).
        examples: starting demonstrations, ``[(inputs, {"messages": [...], **answer}), ...]`` (trainable).
        autonomous: run tools and iterate until done (True), or take one step at a
            time on ``ChatMessages`` and hand tool calls back to the caller (False).
        max_iterations: tool-calling steps before the agent must answer; it then
            answers with what it has and the trace says ``"max_iterations_reached"``.
        return_inputs_with_trajectory: output the messages with the answer (True),
            or the answer alone (interactive mode: only the new messages).
        use_chain_of_thought: the step also writes its reasoning (``thinking``).
        workdir: a folder whose ``AGENTS.md`` is shown first; ``skills``: folders of Agent Skills.
        streaming: stream the final answer (no ``data_model`` only).
        tool_calling: ``"auto"`` (native on servers, constrained JSON on the embedded
            engine), ``"native"`` or ``"constrained"``.
        max_parallel_calls: at most this many calls in one constrained step.
        temperature, max_tokens, top_p, top_k, reasoning_effort: sampling of every call.

    ``prompt_template``, ``use_inputs_schema`` and ``use_outputs_schema`` are
    accepted for synalinks code.
    """

    def __init__(
        self,
        *,
        schema: dict[str, Any] | None = None,
        data_model: Any = None,
        language_model: LanguageModel | None = None,
        prompt_template: str | None = None,
        examples: list[Any] | None = None,
        instructions: str | None = None,
        final_instructions: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        use_inputs_schema: bool = False,
        use_outputs_schema: bool = False,
        reasoning_effort: str | None = None,
        use_chain_of_thought: bool = False,
        tools: list[Any] | None = None,
        autonomous: bool = True,
        return_inputs_with_trajectory: bool = True,
        max_iterations: int = 5,
        streaming: bool = False,
        workdir: str | None = None,
        skills: list[str] | None = None,
        tool_calling: str = "auto",
        max_parallel_calls: int = 4,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        super().__init__(name=name, description=description)
        self._check_arguments(tool_calling, max_iterations)
        if schema is None and data_model is not None:
            schema = data_model.get_schema() if (is_data_model_class(data_model) or hasattr(data_model, "get_schema")) \
                else None
        self.schema = schema
        self.data_model = data_model if is_data_model_class(data_model) else None
        self.workdir = existing_directory(workdir, "workdir") if workdir else None
        self.agents_md_message = agents_md_message(self.workdir)
        self.skills = [existing_directory(root, "skills folder") for root in skills or []]
        discovered = discover_skills(self.skills)
        self.skills_message = skills_message(discovered)
        self.extra_tools = [tool if isinstance(tool, Tool) or hasattr(tool, "openai_tool") else Tool(tool)
                            for tool in tools or []]
        builtin = [read_skill_tool(discovered)] if self.skills and READ_SKILL not in {t.name for t in self.extra_tools} \
            else []
        self.tools: dict[str, Tool] = self._tool_table([*builtin, *self.extra_tools])
        self.prompt_template = prompt_template
        self.instructions = instructions or get_default_instructions()
        self.final_instructions = final_instructions or self.instructions
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.top_p = top_p
        self.top_k = top_k
        self.use_inputs_schema = use_inputs_schema
        self.use_outputs_schema = use_outputs_schema
        self.reasoning_effort = reasoning_effort
        self.use_chain_of_thought = use_chain_of_thought
        self.autonomous = autonomous
        self.return_inputs_with_trajectory = return_inputs_with_trajectory
        self.max_iterations = max_iterations
        self.streaming = bool(streaming) and not self.schema
        self.tool_calling = tool_calling
        self.max_parallel_calls = max_parallel_calls
        self.language_model = language_model or get_default_language_model(f"FunctionCallingAgent {self.name!r}")
        step_class = ChainOfThought if use_chain_of_thought else Generator
        sampling = {"temperature": temperature, "max_tokens": max_tokens, "top_p": top_p, "top_k": top_k,
                    "reasoning_effort": reasoning_effort}
        self.tool_calls_generator = step_class(language_model=self.language_model, instructions=self.instructions,
                                               examples=examples, use_inputs_schema=use_inputs_schema,
                                               name=f"tool_calls_generator_{self.name}", **sampling)
        self.final_generator = Generator(schema=self.schema, language_model=self.language_model,
                                         instructions=self.final_instructions, streaming=self.streaming,
                                         name=f"final_generator_{self.name}", **sampling)
        self.tool_call_counts = {"calls": 0, "invalid": 0, "failed": 0}
        """Tool calls made by this agent: all, invalid (unknown tool, unreadable or wrong arguments), failed (an error)."""

    def _check_arguments(self, tool_calling: str, max_iterations: int) -> None:
        if tool_calling not in TOOL_CALLING_MODES:
            raise ValueError(f"{self.name}: tool_calling must be one of {', '.join(TOOL_CALLING_MODES)}, got {tool_calling!r}")
        if not (isinstance(max_iterations, int) and max_iterations >= 1):
            raise ValueError(f"{self.name}: max_iterations must be an integer >= 1, got {max_iterations!r}")

    def _tool_table(self, tools: list[Tool]) -> dict[str, Tool]:
        """The tools by name: public, distinct names, at least one."""
        table: dict[str, Tool] = {}
        for tool in tools:
            if tool.name.startswith("_"):
                raise ValueError(f"{self.name}: tool name {tool.name!r} starts with an underscore; tools the model sees "
                                 "need public names (rename the function or pass Tool(..., name=...))")
            if tool.name in table:
                raise ValueError(f"{self.name}: two tools are named {tool.name!r}")
            table[tool.name] = tool
        if not table:
            raise ValueError(f"{self.name}: an agent needs tools: pass tools=[Tool(my_function), ...]")
        return table

    # -- the trainable prompt ------------------------------------------------------------------

    labels_are_demonstrations = False
    """A labelled answer shows no tool call: demonstrations come from successful runs only."""

    @property
    def prompt_variable(self) -> Variable:
        return self.tool_calls_generator.state

    @property
    def native(self) -> bool:
        """Whether steps use the model's native tool calling (else the constrained JSON choice)."""
        if self.tool_calling != "auto":
            return self.tool_calling == "native"
        return self.language_model.native_tools

    def openai_tools(self) -> list[dict[str, Any]]:
        return [tool.openai_tool() for tool in self.tools.values()]

    def _sampling(self) -> dict[str, Any]:
        return {key: value for key, value in (("reasoning_effort", self.reasoning_effort), ("top_p", self.top_p),
                                              ("top_k", self.top_k)) if value is not None}

    def system_prompt(self, native: bool) -> str:
        """The step's system message: instructions, and for the constrained form the tools and the answer."""
        text = self.tool_calls_generator.instructions
        if native:
            return text
        lines = [text, "", "Tools:"]
        for tool in self.tools.values():
            parameters = describe_schema_fields(tool.get_tool_schema()) or "- (no arguments)"
            lines.append(f"* {tool.name}: {tool.description}\n  arguments:\n  " + parameters.replace("\n", "\n  "))
        lines.append("")
        lines.append('Each turn, answer with one JSON object: {"tool_calls": [{"tool_name": ..., "arguments": {...}}]} '
                     'to call tools (their results come back in the next message), or {"final_answer": ...} '
                     "once you can answer.")
        if self.schema:
            lines.append("The final answer has these fields:\n" + describe_schema_fields(self.schema))
        return "\n".join(lines)

    def demonstration_turns(self, example: dict[str, Any], native: bool) -> list[dict[str, Any]]:
        """One demonstration (input, its trajectory, its answer) as conversation turns."""
        inputs, outputs = example.get("inputs") or {}, example.get("outputs") or {}
        context, conversation = _split_conversation(inputs)
        trajectory = list(outputs.get("messages") or [])
        answer = {key: value for key, value in outputs.items() if key != "messages"}
        turns = [{"role": "user", "content": json.dumps(context, ensure_ascii=False)}] if context else []
        final: list[dict[str, Any]] = []
        if answer and self.schema:
            final = [{"role": "assistant", "content": json.dumps(answer if native else {"final_answer": answer},
                                                                  ensure_ascii=False)}]
        elif trajectory and _role(trajectory[-1]) == "assistant" and not trajectory[-1].get("tool_calls") and not native:
            last = trajectory.pop()
            final = [{"role": "assistant", "content": json.dumps({"final_answer": last.get("content") or ""},
                                                                 ensure_ascii=False)}]
        body = [*conversation, *trajectory]
        return [*turns, *(body if native else constrained_turns(body, self.use_chain_of_thought)), *final]

    async def step_messages(self, input_json: dict[str, Any], trajectory: list[dict[str, Any]],
                            native: bool) -> list[dict[str, Any]]:
        """What one step sends: system, demonstrations, the task, the trajectory so far."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": self.system_prompt(native)}]
        for example in await self.tool_calls_generator.demonstrations(input_json):
            messages.extend(self.demonstration_turns(example, native))
        context, conversation = _split_conversation(input_json)
        if context:
            messages.append({"role": "user", "content": json.dumps(context, ensure_ascii=False)})
        body = [*conversation, *trajectory]
        if native:
            messages.extend(_wire(message) for message in body)
        else:
            messages.extend(constrained_turns(body, self.use_chain_of_thought))
        return messages

    # -- one step --------------------------------------------------------------------------

    async def _step(self, input_json: dict[str, Any], trajectory: list[dict[str, Any]], step: int,
                    final_only: bool = False) -> tuple[dict[str, Any] | None, Any]:
        """(an assistant message with tool calls, None) or (None, the answer: a dict, a text, or None for native)."""
        native = self.native
        messages = await self.step_messages(input_json, trajectory, native)
        lm = self.language_model
        if native:
            if final_only:
                return None, None
            answer = await lm.respond(messages, tools=self.openai_tools(), temperature=self.temperature,
                                      max_tokens=self.max_tokens, **self._sampling())
            if not answer.tool_calls:
                return None, None
            calls = []
            for index, call in enumerate(answer.tool_calls):
                function = call.get("function") or {}
                arguments, problem = parse_arguments(function.get("arguments"))
                calls.append({"id": call.get("id") or f"call_{step}_{index}", "type": "function",
                              "function": {"name": function.get("name"),
                                           "arguments": arguments if problem is None else function.get("arguments")}})
            return {"role": "assistant", "content": answer.content or None, "tool_calls": calls}, None
        schema = choice_schema([{"name": tool.name, "parameters": tool.get_tool_schema()} for tool in self.tools.values()],
                               self.schema, thinking=self.use_chain_of_thought, max_calls=self.max_parallel_calls,
                               final_only=final_only)
        answer = await lm.respond(messages, schema=schema, temperature=self.temperature, max_tokens=self.max_tokens,
                                  **self._sampling())
        choice = answer.value
        if "tool_calls" in choice:
            return {"role": "assistant", "content": choice.get("thinking") or None,
                    "tool_calls": openai_tool_calls(choice, f"call_{step}")}, None
        return None, choice.get("final_answer")

    async def run_tool_calls(self, assistant_message: dict[str, Any]) -> list[dict[str, Any]]:
        """Run the message's tool calls concurrently; one ``tool`` message per call (errors included)."""
        calls = assistant_message.get("tool_calls") or []
        results = await asyncio.gather(*(self._run_one(call) for call in calls))
        return [{"role": "tool", "tool_call_id": call.get("id"), "content": result}
                for call, result in zip(calls, results)]

    async def _run_one(self, call: dict[str, Any]) -> dict[str, Any]:
        self.tool_call_counts["calls"] += 1
        function = call.get("function") or {}
        name = function.get("name")
        tool = self.tools.get(name)
        arguments, problem = parse_arguments(function.get("arguments"))
        if tool is None:
            problem = f"there is no tool named {name!r}; the tools are {', '.join(self.tools)}"
        elif problem is None and hasattr(tool, "argument_error"):
            problem = tool.argument_error(arguments)
            problem = f"invalid arguments for {name}: {problem}" if problem else None
        if problem is not None:
            self.tool_call_counts["invalid"] += 1
            return {"error": problem}
        try:
            # invoke(): the model's arguments in their own namespace (a tool parameter may be named `training`)
            result = await tool.invoke(arguments) if isinstance(tool, Tool) else await tool(**arguments)
        except Exception as error:  # noqa: BLE001 - a tool that is not a promptgym Tool may raise
            result = {"error": f"{name} failed: {type(error).__name__}: {error}"}
        content = result.get_json() if hasattr(result, "get_json") else result
        content = content if isinstance(content, dict) else {"result": content}
        if "error" in content and len(content) == 1:
            self.tool_call_counts["failed"] += 1
        return content

    # -- calls -----------------------------------------------------------------------------

    async def call(self, inputs: Any, training: bool = False) -> Any:
        if inputs is None:
            return None
        input_json = as_json(inputs)
        if not self.autonomous and not isinstance(input_json.get("messages"), list):
            raise ValueError(f"{self.name}: in interactive mode (autonomous=False) the agent reads ChatMessages "
                             "(a data model with a `messages` list)")
        input_json = dict(input_json)
        conversation = [_plain(message) for message in input_json.get("messages") or []]
        prepend_once(conversation, self.skills_message)
        prepend_once(conversation, self.agents_md_message)
        if "messages" in input_json or conversation:
            input_json["messages"] = conversation
        if self.autonomous:
            return await self._run_autonomous(input_json, training)
        return await self._run_interactive(input_json, training)

    async def _run_autonomous(self, input_json: dict[str, Any], training: bool) -> Any:
        conversation = list(input_json.get("messages") or [])
        produced: list[dict[str, Any]] = []
        answer: Any = None
        hit_limit = True
        for step in range(self.max_iterations):
            assistant, answer = await self._step(input_json, produced, step)
            if assistant is None:
                hit_limit = False
                break
            produced.append(assistant)
            produced.extend(await self.run_tool_calls(assistant))
        if hit_limit:
            logger.info("%s: max_iterations (%d) reached; answering with what it has", self.name, self.max_iterations)
            if not self.native:
                _, answer = await self._step(input_json, produced, self.max_iterations, final_only=True)
        return await self._finish(input_json, conversation, produced, answer, training, hit_limit)

    async def _final_answer(self, input_json: dict[str, Any], messages: list[dict[str, Any]], training: bool) -> Any:
        """The final generator's answer on the trajectory (native mode, as synalinks)."""
        context, _ = _split_conversation(input_json)
        trajectory = {**context, "messages": messages}
        schema = concatenate_schema(JsonDataModel(json=context, schema=_schema_of(context)).get_schema(),
                                    ChatMessages.get_schema())
        return await self.final_generator(JsonDataModel(json=trajectory, schema=schema), training=training)

    async def _finish(self, input_json: dict[str, Any], conversation: list[dict[str, Any]],
                      produced: list[dict[str, Any]], answer: Any, training: bool, hit_limit: bool) -> Any:
        messages = [*conversation, *produced]
        if answer is None:  # native: the final generator writes the answer
            final = await self._final_answer(input_json, messages, training)
            if self.streaming and not self.schema and not hasattr(final, "get_json"):
                return final  # a StreamingIterator, for the caller to drain
            answer = final.get_json() if final is not None else None
        if self.schema:
            answer_json = answer if isinstance(answer, dict) else {}
            if self.data_model is not None:
                answer_json = self.data_model.model_validate(answer_json).model_dump(mode="json")
            recorded = {"messages": produced, **answer_json}
            output = JsonDataModel(json={"messages": messages, **answer_json},
                                   schema=concatenate_schema(ChatMessages.get_schema(), self.schema), name=self.name) \
                if self.return_inputs_with_trajectory else JsonDataModel(json=answer_json, schema=self.schema,
                                                                          name=self.name)
        else:
            final_message = answer if isinstance(answer, dict) else {"role": "assistant", "content": answer}
            produced = [*produced, _plain(final_message)]
            recorded = {"messages": produced}
            output = _chat_messages([*conversation, *produced], self.name)
        if hit_limit:
            recorded["max_iterations_reached"] = True
        record_step(self.name, input_json, recorded)
        return output

    async def _run_interactive(self, input_json: dict[str, Any], training: bool) -> Any:
        conversation = list(input_json["messages"])
        new: list[dict[str, Any]] = []
        if conversation and _role(conversation[-1]) == "assistant" and conversation[-1].get("tool_calls"):
            new.extend(await self.run_tool_calls(conversation[-1]))
        trajectory = [*conversation, *new]
        step_input = {**input_json, "messages": trajectory}
        assistant, answer = await self._step(step_input, [], 0)
        returned = trajectory if self.return_inputs_with_trajectory else new
        if assistant is not None:
            record_step(self.name, input_json, {"messages": [*new, assistant]})
            return _chat_messages([*returned, assistant], self.name)
        if answer is None:
            final = await self._final_answer(step_input, trajectory, training)
            if self.streaming and not self.schema and not hasattr(final, "get_json"):
                return final
            answer = final.get_json() if final is not None else None
        if self.schema:
            answer_json = answer if isinstance(answer, dict) else {}
            record_step(self.name, input_json, {"messages": new, **answer_json})
            return JsonDataModel(json={"messages": returned, **answer_json},
                                 schema=concatenate_schema(ChatMessages.get_schema(), self.schema), name=self.name)
        final_message = _plain(answer if isinstance(answer, dict) else {"role": "assistant", "content": answer})
        record_step(self.name, input_json, {"messages": [*new, final_message]})
        return _chat_messages([*returned, final_message], self.name)

    # -- what it outputs -------------------------------------------------------------------

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> Any:
        if not self.autonomous and not is_chat_messages(inputs):
            raise ValueError(f"{self.name}: in interactive mode (autonomous=False) the agent reads ChatMessages "
                             "(a data model with a `messages` list)")
        if self.schema and self.autonomous:
            schema = concatenate_schema(ChatMessages.get_schema(), self.schema) \
                if self.return_inputs_with_trajectory else self.schema
            return SymbolicDataModel(schema=schema, name=self.name)
        return SymbolicDataModel(schema=ChatMessages.get_schema(), name=self.name)

    def output_data_model(self, input_data_model: Any) -> Any:
        schema = concatenate_schema(ChatMessages.get_schema(), self.schema) \
            if self.schema and self.return_inputs_with_trajectory else self.schema or ChatMessages.get_schema()
        return data_model_from_schema(schema)

    # -- fine-tuning data ------------------------------------------------------------------

    def sft_conversation(self, inputs: dict[str, Any], outputs: dict[str, Any],
                         examples: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """A recorded run as an OpenAI chat with ``tool_calls`` (arguments as JSON strings) and the ``tools`` list."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": self.system_prompt(native=True)}]
        for example in examples or []:
            messages.extend(_wire(turn) for turn in self.demonstration_turns(example, native=True))
        messages.extend(_wire(turn) for turn in self.demonstration_turns({"inputs": inputs, "outputs": outputs},
                                                                        native=True))
        return {"messages": [wire_tool_calls(message) for message in messages], "tools": self.openai_tools()}

    # -- serialization ---------------------------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        return {
            "name": self.name, "description": self.description, "schema": self.schema,
            "instructions": self.instructions, "final_instructions": self.final_instructions,
            "temperature": self.temperature, "max_tokens": self.max_tokens, "top_p": self.top_p, "top_k": self.top_k,
            "use_inputs_schema": self.use_inputs_schema, "use_outputs_schema": self.use_outputs_schema,
            "reasoning_effort": self.reasoning_effort, "use_chain_of_thought": self.use_chain_of_thought,
            "autonomous": self.autonomous, "return_inputs_with_trajectory": self.return_inputs_with_trajectory,
            "max_iterations": self.max_iterations, "streaming": self.streaming, "workdir": self.workdir,
            "skills": self.skills, "tool_calling": self.tool_calling, "max_parallel_calls": self.max_parallel_calls,
            "language_model": serialize_object(self.language_model),
            "tools": [serialize_object(tool) for tool in self.extra_tools],  # built-ins are rebuilt, never saved
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "FunctionCallingAgent":
        config = dict(config)
        config["language_model"] = deserialize_object(config["language_model"], expected="language model")
        config["tools"] = [deserialize_object(tool, expected="tool") for tool in config.get("tools") or []] or None
        return cls(**config)


def _role(message: dict[str, Any]) -> str:
    role = message.get("role")
    return getattr(role, "value", role) or ""


def _plain(message: Any) -> dict[str, Any]:
    """A message as a plain dict without empty fields (a ChatMessage, or a dict)."""
    data = message.get_json() if hasattr(message, "get_json") else dict(message)
    data["role"] = _role(data) or ChatRole.ASSISTANT.value
    return {key: value for key, value in data.items() if value is not None or key == "content"}


def _wire(message: dict[str, Any]) -> dict[str, Any]:
    """A trajectory message as a chat-completion message (content as text)."""
    wired = {"role": _role(message)}
    content = message.get("content")
    wired["content"] = content if isinstance(content, str) or content is None else json.dumps(content, ensure_ascii=False)
    for key in ("tool_calls", "tool_call_id", "name"):
        if message.get(key):
            wired[key] = message[key]
    return wired


def _split_conversation(input_json: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the input's fields other than ``messages``, its messages)."""
    context = {key: value for key, value in input_json.items() if key != "messages"}
    return context, list(input_json.get("messages") or [])


def _chat_messages(messages: list[dict[str, Any]], name: str) -> JsonDataModel:
    validated = ChatMessages(messages=[ChatMessage.model_validate(message) for message in messages])
    return JsonDataModel(json=validated.model_dump(mode="json"), schema=ChatMessages.get_schema(), name=name)


def _schema_of(value: dict[str, Any]) -> dict[str, Any]:
    return schema_of_value(value, title="Inputs")
