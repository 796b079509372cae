"""Agent episodes with scripted agents, the scripted user, and the OpenAI-compatible user over real HTTP."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from toolcall_repro.eval.acebench.agent.episode import NO_QUESTIONS, run_multi_step, run_multi_turn
from toolcall_repro.eval.acebench.data import load_category
from toolcall_repro.eval.acebench.scoring import score_category
from toolcall_repro.eval.acebench.simulator import (
    OpenAIUser,
    ScriptedUser,
    UserSimulatorError,
    make_user_simulator,
)


def scripted_agent(replies):
    """An agent that says the given replies in order (then 'finish conversation') and records its prompts."""
    prompts, queue = [], list(replies)

    def agent(messages):
        prompts.append(messages)
        return queue.pop(0) if queue else "finish conversation"

    agent.prompts = prompts
    return agent


@pytest.fixture(scope="module")
def multi_step(data_dir):
    return load_category(data_dir, "agent_multi_step")


@pytest.fixture(scope="module")
def multi_turn(data_dir):
    return load_category(data_dir, "agent_multi_turn")


def test_multi_step_replaying_milestones_scores_full_process(multi_step):
    entry = multi_step[4]  # Wi-Fi off; one milestone is not valid Python and stays as written
    agent = scripted_agent(["<think>first wifi</think>" + entry["mile_stone"][0], *entry["mile_stone"][1:]])
    outcome = run_multi_step(entry, agent)
    assert outcome["process"] == entry["mile_stone"]
    assert len(agent.prompts) == len(entry["mile_stone"]) + 1  # the last says "finish conversation"
    assert outcome["dialogue"][-1]["message"] == "finish conversation"
    score = score_category("agent_multi_step", [entry], [outcome])
    assert score.process_accuracy == 1.0
    # upstream never shows the agent its own earlier calls, only the execution results
    last_prompt = agent.prompts[-1][1]["content"]
    assert "execution result:" in last_prompt and "turn_on_wifi()" not in last_prompt


def test_multi_step_agent_that_never_calls_gets_the_fixed_reply_and_an_empty_state(multi_step):
    agent = scripted_agent(["Which pizza do you want?"] * 10)
    outcome = run_multi_step(multi_step[0], agent, max_messages=6)
    assert outcome["state"] == []
    assert [m["message"] for m in outcome["dialogue"] if m["sender"] == "execution"] == [NO_QUESTIONS] * 3
    assert outcome["process"] == ["Which pizza do you want?"] * 3
    assert score_category("agent_multi_step", [multi_step[0]], [outcome]).accuracy == 0.0


def test_multi_turn_with_the_scripted_user(multi_turn):
    entry = multi_turn[0]  # Grace messages Frank; the inbox is full
    user = ScriptedUser(replies=1)
    agent = scripted_agent(["Who should receive it?", *entry["mile_stone"], "Done, anything else?", "ok"])
    outcome = run_multi_turn(entry, agent, user)
    senders = [(m["sender"], m["recipient"]) for m in outcome["dialogue"]]
    assert senders[:3] == [("user", "agent"), ("agent", "user"), ("user", "agent")]
    assert outcome["dialogue"][0]["message"] == entry["question"]
    assert outcome["dialogue"][2]["message"] == "Yes. " + entry["question"]
    assert outcome["dialogue"][-1] == {
        "sender": "user",
        "recipient": "agent",
        "message": "finish conversation",
    }
    assert outcome["process"] == entry["mile_stone"]
    assert score_category("agent_multi_turn", [entry], [outcome]).accuracy == 1.0
    assert user.card()["kind"] == "scripted" and "not comparable" in user.card()["note"]


class _FakeChat(BaseHTTPRequestHandler):
    requests: list = []
    replies: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        if not type(self).replies:
            self.send_response(500)
            self.end_headers()
            return
        content = type(self).replies.pop(0)
        payload = {
            "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        }  # fmt: skip
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def chat_server():
    _FakeChat.requests, _FakeChat.replies = [], []
    server = HTTPServer(("127.0.0.1", 0), _FakeChat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1", _FakeChat
    server.shutdown()


def test_openai_user_drives_the_dialogue_over_http(multi_turn, chat_server):
    url, handler = chat_server
    handler.replies = ["I want to message Frank.", "finish conversation"]
    entry = multi_turn[3]
    user = make_user_simulator("openai", {"base_url": url, "model": "sim-1", "seed": 7, "timeout_s": 10})
    agent = scripted_agent(["What should it say?"])
    outcome = run_multi_turn(entry, agent, user)
    assert outcome["error"] is None
    user_lines = [m["message"] for m in outcome["dialogue"] if m["sender"] == "user"]
    assert user_lines == ["I want to message Frank.", "finish conversation"]
    first, second = handler.requests
    assert first["model"] == "sim-1" and first["seed"] == 7
    assert entry["question"] in first["messages"][0]["content"]
    assert first["messages"][1] == {"role": "user", "content": "Is there anything you need help with today?"}
    assert second["messages"][-1] == {"role": "user", "content": "What should it say?"}
    assert outcome["dialogue"][-1]["message"] == "finish conversation"
    assert user.card() == {"kind": "openai", "base_url": url, "model": "sim-1", "temperature": 0.001, "top_p": 1.0,
                           "max_tokens": 1000, "seed": 7,
                           "runs": "behind base_url, reached over the network from the scoring job"}  # fmt: skip


def test_a_failing_user_simulator_is_recorded_not_raised(multi_turn, chat_server):
    url, _ = chat_server  # no replies queued: the server answers 500
    user = OpenAIUser(base_url=url, model="sim-1", timeout_s=5)
    user._client = user._client.with_options(max_retries=0)
    outcome = run_multi_turn(multi_turn[3], scripted_agent([]), user)
    assert outcome["error"] and "user simulator request" in outcome["error"]
    assert outcome["state"] == []
    with pytest.raises(UserSimulatorError):
        user.start(multi_turn[3])


def test_simulator_settings_are_checked():
    with pytest.raises(ValueError, match="base_url and model"):
        make_user_simulator("openai", {"model": "m"})
    with pytest.raises(ValueError, match="unknown user-simulator settings"):
        make_user_simulator("openai", {"base_url": "http://x", "model": "m", "api_key": "secret"})
    with pytest.raises(ValueError, match="unknown user simulator"):
        make_user_simulator("claude", {})
