"""Agent scoring: final-state comparison (end-to-end accuracy) and milestone matching (process accuracy).

Follows upstream `agent_eval` / `agent_checker` / `agent_eval_process`:
- the model's final state must list as many classes as the ground truth; each ground-truth class is
  compared with the model's class of the same name; a ground-truth class with no such model class is not
  checked (upstream keeps the previous verdict; the data has misspelt class names, e.g. `ReminderAPI`);
- within a class, every saved attribute of the model must exist in the ground truth; a dict attribute
  is compared on the ground truth's keys only (extra model keys pass), anything else must be equal;
- process accuracy is 1 for an entry whose end state is correct, else the fraction of milestones found
  in order (greedy) among the agent's execution messages, the best over alternative milestone lists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from toolcall_repro.eval.acebench.checker import OK, Verdict


def validate_agent_output(output: object) -> Verdict:
    """An agent output is `{"state": [{class: {attr: value}}], "process": [str]}`."""
    if not isinstance(output, Mapping):
        return Verdict.fail(
            "malformed_output", f"agent output must be an object, got {type(output).__name__}"
        )
    state, process = output.get("state"), output.get("process")
    if not isinstance(state, list) or not all(isinstance(s, Mapping) and len(s) == 1 for s in state):
        return Verdict.fail("malformed_output", "state must be a list of one-key objects {class: attributes}")
    if not isinstance(process, list) or not all(isinstance(p, str) for p in process):
        return Verdict.fail("malformed_output", "process must be a list of strings")
    return OK


def _check_class(name: str, model_attrs: object, truth_attrs: Mapping) -> Verdict:
    if not isinstance(model_attrs, Mapping):
        return Verdict.fail("class_attributes", f"{name}: attributes are not an object")
    for attr, value in model_attrs.items():
        if attr not in truth_attrs:
            return Verdict.fail("class_attributes", f"{name}.{attr} is not in the ground truth")
        expected = truth_attrs[attr]
        if isinstance(expected, Mapping):
            if not isinstance(value, Mapping):
                return Verdict.fail(
                    "class_attributes", f"{name}.{attr}: expected an object, got {value!r:.200}"
                )
            for key, item in expected.items():
                if key not in value:
                    return Verdict.fail("class_attributes", f"{name}.{attr}[{key!r}] is missing")
                if item != value[key]:
                    return Verdict.fail(
                        "class_attributes",
                        f"{name}.{attr}[{key!r}]: expected {item!r:.200}, got {value[key]!r:.200}",
                    )
        elif expected != value:
            return Verdict.fail(
                "class_attributes", f"{name}.{attr}: expected {expected!r:.200}, got {value!r:.200}"
            )
    return OK


def check_final_state(model_state: Sequence[Mapping], truth_state: object) -> Verdict:
    truths = truth_state if isinstance(truth_state, list) else [truth_state]
    if len(truths) != len(model_state):
        return Verdict.fail(
            "wrong_class_count", f"{len(model_state)} classes in the final state, expected {len(truths)}"
        )
    by_name = {next(iter(s)): next(iter(s.values())) for s in model_state}
    for truth in truths:
        if not isinstance(truth, Mapping) or len(truth) != 1:
            return Verdict.fail("data", f"ground-truth state item is not a one-key object: {truth!r:.200}")
        ((name, attrs),) = truth.items()
        if name not in by_name:
            continue
        verdict = _check_class(name, by_name[name], attrs)
        if not verdict.valid:
            return verdict
    return OK


def _in_order_fraction(process: Sequence[str], milestones: Sequence[str]) -> float:
    if not milestones:
        return 1.0
    found, position = 0, 0
    for stone in milestones:
        while position < len(process):
            position += 1
            if process[position - 1].strip() == stone.strip():
                found += 1
                break
    return found / len(milestones)


def process_fraction(process: Sequence[str], milestones: Sequence) -> float:
    """Milestones found in order; alternatives (a list of lists) give the best fraction."""
    if milestones and all(isinstance(m, list) for m in milestones):
        return max(_in_order_fraction(process, alt) for alt in milestones)
    return _in_order_fraction(process, milestones)
