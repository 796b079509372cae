"""One agent episode's world: the involved scenario classes, call dispatch and the saved final state.

Mirrors upstream `execute_agent_func_call`: each involved class is one instance, loaded with its own
initial config and then the `BaseApi` one; a call runs on every instance that offers the method (so
`turn_on_wifi` flips every instance's flag) and returns the last result; a failing call returns
"Error during execution: ..." instead of raising. Calls arrive parsed; nothing is evaluated, and only
the names in each class's `API` whitelist can be reached.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence

from toolcall_repro.eval.acebench.agent.phone import BaseApi, FoodPlatform, MessageApi, ReminderApi
from toolcall_repro.eval.acebench.agent.travel import Travel

SCENARIO_CLASSES = {
    "BaseApi": BaseApi,
    "MessageApi": MessageApi,
    "ReminderApi": ReminderApi,
    "FoodPlatform": FoodPlatform,
    "Travel": Travel,
}


class UnknownScenarioError(ValueError):
    """An agent entry names a scenario class we do not simulate."""


def json_safe(value: object) -> object:
    """The value as the JSON result file would hold it (int keys become strings, tuples lists)."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


class Environment:
    def __init__(self, involved_classes: Sequence[str], initial_config: Mapping | None = None) -> None:
        initial_config = initial_config or {}
        unknown = [name for name in involved_classes if name not in SCENARIO_CLASSES]
        if unknown:
            raise UnknownScenarioError(
                f"unknown scenario classes {unknown}; known: {sorted(SCENARIO_CLASSES)}"
            )
        self.instances: dict[str, object] = {}
        for name in involved_classes:
            instance = SCENARIO_CLASSES[name]()
            instance.load_scenario(copy.deepcopy(dict(initial_config.get(name, {}))))
            instance.load_scenario(copy.deepcopy(dict(initial_config.get("BaseApi", {}))))
            self.instances[name] = instance

    def execute(self, call: Mapping) -> object:
        """Run one parsed call; returns a JSON-safe result or an error string."""
        name, arguments = call.get("name"), call.get("arguments")
        targets = [inst for inst in self.instances.values() if name in type(inst).API]
        if not targets:
            return f"Error during execution: no function named {name!r}"
        if not isinstance(arguments, Mapping):
            return f"Error during execution: arguments of {name} are not keyword arguments"
        result: object = None
        try:
            for instance in targets:
                result = getattr(instance, name)(**copy.deepcopy(dict(arguments)))
        except Exception as exc:  # the simulated tool's failure is reported to the agent, as upstream does
            return f"Error during execution: {type(exc).__name__}: {exc}"
        return json_safe(result)

    def execute_all(self, calls: Sequence[Mapping]) -> list[object]:
        return [self.execute(call) for call in calls]

    def final_state(self) -> list[dict]:
        """`[{class: {saved attribute: value}}]` in involved-class order, as upstream writes it."""
        return [
            {name: json_safe({attr: getattr(inst, attr) for attr in type(inst).SAVED})}
            for name, inst in self.instances.items()
        ]
