"""Agent episodes: the model acts in the simulated world until it (or the user) says "finish conversation".

The loops follow upstream `CommonInference.multi_step_inference` / `multi_turn_inference`:
- at most `max_messages` dialogue messages (upstream 40), stopping after message 2 once one says
  "finish conversation";
- multi_step: the model sees the task and the execution results only (upstream never adds the agent's own
  messages to the history text); every model message goes to execution, and one without calls gets
  "Please do not ask me any questions, use the known conditions to solve the problem";
- multi_turn: the user simulator opens; a model message with calls goes to execution, any other to the user;
- the world is created at the first executed call, so an episode without one has an empty final state.
The outcome is what `scoring.score_category` takes for agent categories: `state` and `process` (one item per
message sent to execution: the calls written in ACEBench's Python format when it parsed, else the text).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from toolcall_repro.eval.acebench.agent.environment import Environment
from toolcall_repro.eval.acebench.prompts import agent_messages
from toolcall_repro.eval.acebench.simulator import FINISH, UserSimulator, UserSimulatorError
from toolcall_repro.toolcall import ToolCallParseError, format_tool_calls, parse_tool_calls, split_think

AgentFn = Callable[[list[dict]], str]
MAX_MESSAGES = 40
NO_QUESTIONS = "Please do not ask me any questions, use the known conditions to solve the problem"


def visible_answer(text: str) -> str:
    """The reply without its leading `<think>` block; a never-closed block leaves nothing."""
    try:
        return split_think(text)[1].strip()
    except ToolCallParseError:
        return "" if text.lstrip().startswith("<think>") else text.strip()


def _calls(text: str, fmt: str) -> list[dict] | None:
    try:
        calls = parse_tool_calls(text, fmt)
    except ToolCallParseError:
        return None
    return calls or None


def _process_item(text: str, calls: list[dict] | None) -> str:
    if calls:
        try:
            return format_tool_calls(calls, "python")
        except ValueError:
            pass  # a call Python cannot spell (odd argument names) is kept as the model wrote it
    return text


def _history_line(message: Mapping) -> str:
    prefix = {"user": "user:", "agent": "agent:", "execution": "execution result:"}[message["sender"]]
    body = message["message"]
    return prefix + (body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)) + "\n"


class _Episode:
    def __init__(self, category: str, entry: Mapping, fmt: str) -> None:
        self.category, self.entry, self.fmt = category, entry, fmt
        self.env: Environment | None = None
        self.process: list[str] = []
        self.dialogue: list[dict] = []

    def say(self, sender: str, recipient: str, message: object) -> dict:
        item = {"sender": sender, "recipient": recipient, "message": message}
        self.dialogue.append(item)
        return item

    def execute(self, calls: list[dict]) -> list[object]:
        if self.env is None:
            self.env = Environment(self.entry["involved_classes"], self.entry.get("initial_config", {}))
        return self.env.execute_all(calls)

    def outcome(self, error: str | None = None) -> dict:
        state = self.env.final_state() if self.env is not None else []
        return {"state": state, "process": self.process, "dialogue": self.dialogue, "error": error}


def _finished(index: int, message: Mapping) -> bool:
    return index > 1 and isinstance(message["message"], str) and FINISH in message["message"]


def run_multi_step(
    entry: Mapping, agent: AgentFn, fmt: str = "python", max_messages: int = MAX_MESSAGES
) -> dict:
    episode = _Episode("agent_multi_step", entry, fmt)
    episode.say("user", "agent", entry["question"])
    history = _history_line(episode.dialogue[0])
    for index in range(max_messages):
        last = episode.dialogue[-1]
        if index == 0 or last["sender"] == "execution":
            if index > 0:
                history += _history_line(last)
            answer = visible_answer(agent(agent_messages("agent_multi_step", entry, history)))
            message = episode.say("agent", "execution", answer)
        else:
            calls = _calls(last["message"], fmt)
            episode.process.append(_process_item(last["message"], calls))
            results = episode.execute(calls) if calls else NO_QUESTIONS
            message = episode.say("execution", "agent", results)
        if _finished(index, message):
            break
    return episode.outcome()


def run_multi_turn(
    entry: Mapping, agent: AgentFn, user: UserSimulator, fmt: str = "python", max_messages: int = MAX_MESSAGES
) -> dict:
    episode = _Episode("agent_multi_turn", entry, fmt)
    try:
        episode.say("user", "agent", user.start(entry))
    except UserSimulatorError as exc:
        return episode.outcome(error=str(exc))
    history = ""
    for index in range(max_messages):
        last = episode.dialogue[-1]
        history += _history_line(last)
        if last["recipient"] == "user":
            try:
                message = episode.say("user", "agent", user.reply(last["message"]))
            except UserSimulatorError as exc:
                return episode.outcome(error=str(exc))
        elif last["recipient"] == "agent":
            answer = visible_answer(agent(agent_messages("agent_multi_turn", entry, history)))
            message = episode.say("agent", "execution" if _calls(answer, fmt) else "user", answer)
        else:
            calls = _calls(last["message"], fmt) or []
            episode.process.append(_process_item(last["message"], calls))
            message = episode.say("execution", "agent", episode.execute(calls))
        if _finished(index, message):
            break
    return episode.outcome()


def run_agent_entry(
    category: str,
    entry: Mapping,
    agent: AgentFn,
    user: UserSimulator | None,
    fmt: str = "python",
    max_messages: int = MAX_MESSAGES,
) -> dict:
    if category == "agent_multi_step":
        return run_multi_step(entry, agent, fmt, max_messages)
    if category == "agent_multi_turn":
        if user is None:
            raise ValueError("agent_multi_turn needs a user simulator")
        return run_multi_turn(entry, agent, user, fmt, max_messages)
    raise ValueError(f"{category} is not an agent category")
