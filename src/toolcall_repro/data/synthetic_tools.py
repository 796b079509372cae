"""The synthetic tool library: typed tools, templated requests, tool results and summaries.

Designed for a tiny model with a ~1k-token vocabulary: every argument value appears literally in the
request (string enums from small vocabularies, small integers with at most two digits, booleans said as
on/off or a word), so the call is learnable by copying; optional parameters appear only when the request
mentions them, so the model also learns to omit them.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field

CITIES = ("paris", "tokyo", "lima", "oslo", "cairo", "rome")
DAYS = ("monday", "tuesday", "friday", "sunday")
ROOMS = ("kitchen", "bedroom", "office", "garage")


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "enum" | "int" | "bool"
    description: str
    values: tuple = ()  # enum values
    low: int = 0
    high: int = 0
    required: bool = True
    default: object = None
    words: tuple = ()  # bool: (word for False, word for True)

    def sample(self, rng: random.Random) -> object:
        if self.kind == "enum":
            return rng.choice(self.values)
        if self.kind == "int":
            return rng.randint(self.low, self.high)
        return rng.random() < 0.5

    def say(self, value: object) -> str:
        if self.kind == "bool":
            return self.words[int(bool(value))]
        return str(value)

    def json_schema(self) -> dict:
        schema: dict = {"description": self.description}
        if self.kind == "enum":
            schema.update(type="string", enum=list(self.values))
        elif self.kind == "int":
            schema.update(type="integer", minimum=self.low, maximum=self.high)
        else:
            schema["type"] = "boolean"
        if not self.required:
            schema["default"] = self.default
        return schema

    def xlam_spec(self) -> dict:
        base = {"enum": "str", "int": "int", "bool": "bool"}[self.kind]
        spec: dict = {"description": self.description, "type": base if self.required else f"{base}, optional"}
        if not self.required:
            spec["default"] = self.default
        return spec


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    params: tuple[Param, ...]
    # request templates; a template names the optional parameters it mentions, the rest are omitted
    templates: tuple[str, ...]
    result: dict = field(default_factory=dict)  # result key -> Param used to draw its value
    summary: str = "done."

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)

    def schema_tool(self, dict_word: str = "object") -> dict:
        """JSON-Schema description (ToolACE writes the top-level type as "dict")."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": {
                "type": dict_word,
                "properties": {p.name: p.json_schema() for p in self.params},
                "required": [p.name for p in self.params if p.required],
            },
        }

    def xlam_tool(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "parameters": {p.name: p.xlam_spec() for p in self.params},
        }


def _enum(name, values, description, **kw) -> Param:
    return Param(name, "enum", description, values=tuple(values), **kw)


def _int(name, low, high, description, **kw) -> Param:
    return Param(name, "int", description, low=low, high=high, **kw)


def _bool(name, words, description, **kw) -> Param:
    return Param(name, "bool", description, words=tuple(words), **kw)


_SKY = _enum("sky", ("sunny", "rainy", "cloudy"), "")
_PRICE = _int("price", 10, 99, "")
_STATUS = _enum("status", ("ok", "done"), "")

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "get_weather",
        "get the weather in a city",
        (
            _enum("city", CITIES, "the city"),
            _enum("unit", ("celsius", "fahrenheit"), "the unit", required=False, default="celsius"),
        ),
        ("what is the weather in {city}", "weather in {city} in {unit} please"),
        {"sky": _SKY, "degrees": _int("degrees", 1, 30, "")},
        "it is {sky} in {city}.",
    ),
    ToolSpec(
        "set_alarm",
        "set an alarm",
        (
            _int("hour", 1, 12, "the hour"),
            _enum("label", ("work", "gym", "school"), "the label", required=False, default="work"),
        ),
        ("set an alarm for {hour}", "wake me at {hour} for {label}"),
        {"status": _STATUS},
        "the alarm is set for {hour}.",
    ),
    ToolSpec(
        "book_table",
        "book a table at a restaurant",
        (
            _enum("restaurant", ("luigi", "sakura", "bistro", "taco"), "the restaurant"),
            _int("people", 1, 9, "number of people"),
            _enum("day", DAYS, "the day"),
        ),
        ("book a table at {restaurant} for {people} on {day}", "table for {people} at {restaurant} on {day}"),
        {"status": _STATUS},
        "your table at {restaurant} is booked.",
    ),
    ToolSpec(
        "play_music",
        "play music",
        (
            _enum("genre", ("jazz", "rock", "pop", "blues"), "the genre"),
            _int("volume", 1, 9, "the volume", required=False, default=5),
        ),
        ("play some {genre}", "play {genre} at volume {volume}"),
        {"status": _STATUS},
        "playing {genre}.",
    ),
    ToolSpec(
        "send_message",
        "send a message to a contact",
        (
            _enum("contact", ("anna", "ben", "chen", "dina"), "the contact"),
            _enum("text", ("hello", "running late", "see you soon", "thanks"), "the message"),
        ),
        ("send {contact} a message saying {text}", "tell {contact} {text}"),
        {"status": _STATUS},
        "the message to {contact} is sent.",
    ),
    ToolSpec(
        "convert_currency",
        "convert money between currencies",
        (
            _int("amount", 1, 99, "the amount"),
            _enum("source", ("usd", "eur", "yen", "gbp"), "from currency"),
            _enum("target", ("usd", "eur", "yen", "gbp"), "to currency"),
        ),
        ("convert {amount} {source} to {target}", "how much is {amount} {source} in {target}"),
        {"result": _PRICE},
        "{amount} {source} is {result} {target}.",
    ),
    ToolSpec(
        "set_light",
        "turn a light on or off",
        (_enum("room", ROOMS, "the room"), _bool("on", ("off", "on"), "on or off")),
        ("turn {on} the light in the {room}", "switch the {room} light {on}"),
        {"status": _STATUS},
        "the {room} light is {on}.",
    ),
    ToolSpec(
        "set_thermostat",
        "set the heating in a room",
        (_enum("room", ROOMS, "the room"), _int("degrees", 16, 26, "the temperature")),
        ("set the {room} to {degrees} degrees", "heat the {room} to {degrees}"),
        {"status": _STATUS},
        "the {room} is set to {degrees} degrees.",
    ),
    ToolSpec(
        "get_news",
        "get news stories",
        (
            _enum("topic", ("sports", "science", "music", "travel"), "the topic"),
            _int("count", 1, 5, "how many", required=False, default=3),
        ),
        ("any {topic} news", "show me {count} {topic} stories"),
        {"stories": _int("stories", 1, 5, "")},
        "here are {stories} {topic} stories.",
    ),
    ToolSpec(
        "translate",
        "translate a word",
        (
            _enum("word", ("apple", "house", "water", "friend"), "the word"),
            _enum("language", ("french", "spanish", "german", "italian"), "the language"),
        ),
        ("how do you say {word} in {language}", "translate {word} to {language}"),
        {"status": _STATUS},
        "that is the {language} word for {word}.",
    ),
    ToolSpec(
        "find_flight",
        "find a flight",
        (
            _enum("origin", CITIES, "from city"),
            _enum("destination", CITIES, "to city"),
            _enum("day", DAYS, "the day"),
        ),
        ("find a flight from {origin} to {destination} on {day}", "fly {origin} to {destination} on {day}"),
        {"price": _PRICE},
        "a flight to {destination} costs {price}.",
    ),
    ToolSpec(
        "add_todo",
        "add a task to the todo list",
        (
            _enum("task", ("laundry", "groceries", "homework", "dishes"), "the task"),
            _enum("priority", ("low", "high"), "the priority"),
        ),
        ("add {task} to my list with {priority} priority", "remind me to do the {task}, {priority} priority"),
        {"status": _STATUS},
        "{task} is on your list.",
    ),
    ToolSpec(
        "call_taxi",
        "call a taxi",
        (
            _enum("destination", ("airport", "station", "hotel", "office"), "where to"),
            _int("passengers", 1, 4, "number of passengers"),
        ),
        ("get a taxi to the {destination} for {passengers}", "taxi for {passengers} to the {destination}"),
        {"minutes": _int("minutes", 2, 9, "")},
        "a taxi comes in {minutes} minutes.",
    ),
    ToolSpec(
        "get_stock",
        "get a stock price",
        (_enum("symbol", ("acme", "globex", "initech", "umbrella"), "the company"),),
        ("what is the price of {symbol}", "how is {symbol} stock doing"),
        {"price": _PRICE},
        "{symbol} is at {price}.",
    ),
    ToolSpec(
        "set_timer",
        "set a timer",
        (_int("minutes", 1, 60, "the minutes"),),
        ("set a timer for {minutes} minutes", "timer {minutes} minutes"),
        {"status": _STATUS},
        "the timer is set.",
    ),
    ToolSpec(
        "find_recipe",
        "find a recipe",
        (
            _enum("dish", ("pasta", "soup", "salad", "curry"), "the dish"),
            _bool("vegan", ("", "vegan"), "vegan only", required=False, default=False),
        ),
        ("find a {dish} recipe", "find a {vegan} {dish} recipe"),
        {"minutes": _int("minutes", 10, 60, "")},
        "the {dish} takes {minutes} minutes.",
    ),
)
TOOLS_BY_NAME = {t.name: t for t in TOOLS}
POLITE = ("", "please ", "can you ")
QUESTION_WORDS = ("what", "how", "any", "weather", "table", "taxi", "timer", "fly")
THANKS = ("thanks", "thank you", "great thanks")
WELCOME = ("you are welcome.", "happy to help.")


def template_fields(template: str) -> list[str]:
    return [f for _, f, _, _ in string.Formatter().parse(template) if f]


@dataclass(frozen=True)
class Request:
    """One user request and the call that answers it."""

    text: str
    call: dict  # {"name", "arguments"}

    @property
    def tool(self) -> ToolSpec:
        return TOOLS_BY_NAME[self.call["name"]]


def sample_request(tool: ToolSpec, rng: random.Random, polite: bool = True) -> Request:
    template = rng.choice(tool.templates)
    mentioned = set(template_fields(template))
    arguments: dict = {}
    for p in tool.params:
        if p.required or p.name in mentioned:
            value = p.sample(rng)
            if p.kind == "bool" and not p.required:
                value = True  # an optional flag is mentioned only to switch it on
            if p.name == "target" and "source" in arguments:
                value = rng.choice([v for v in p.values if v != arguments["source"]])
            if p.name == "destination" and "origin" in arguments and p.values == CITIES:
                value = rng.choice([v for v in p.values if v != arguments["origin"]])
            arguments[p.name] = value
    said = {name: tool.param(name).say(value) for name, value in arguments.items()}
    prefix = rng.choice(POLITE) if polite and not template.startswith(QUESTION_WORDS) else ""
    text = prefix + template.format(**said)
    return Request(" ".join(text.split()), {"name": tool.name, "arguments": arguments})


def tool_result(request: Request, rng: random.Random) -> dict:
    return {key: p.sample(rng) for key, p in request.tool.result.items()}


def summary(request: Request, result: dict) -> str:
    tool = request.tool
    said = {name: tool.param(name).say(value) for name, value in request.call["arguments"].items()}
    fields = {p.name: "" for p in tool.params} | said | {k: str(v) for k, v in result.items()}
    return " ".join(tool.summary.format(**fields).split())


def pick_tools(rng: random.Random, needed: list[str], total: int) -> list[ToolSpec]:
    """The needed tools plus distractors, in a random order (so position never gives the answer away)."""
    names = list(dict.fromkeys(needed))
    others = [t.name for t in TOOLS if t.name not in names]
    names += rng.sample(others, max(0, min(total - len(names), len(others))))
    rng.shuffle(names)
    return [TOOLS_BY_NAME[n] for n in names]
