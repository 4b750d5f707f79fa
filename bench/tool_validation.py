"""What checking a tool call's input against its schema costs, per call (valid and invalid input).

Run: .venv/bin/python bench/tool_validation.py
"""

from __future__ import annotations

import timeit

from tether import define_tool

FLAT = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}
"""What most tools declare: typed properties, some required (checked without jsonschema)."""
SIMPLE = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
    "additionalProperties": False,
}
NESTED = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "pattern": "^[a-z ]+$"},
        "filters": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "field": {"type": "string"},
                    "op": {"enum": ["eq", "lt", "gt"]},
                    "value": {"type": ["string", "number"]},
                },
                "required": ["field", "op", "value"],
            },
        },
        "limit": {"type": "integer"},
    },
    "required": ["query"],
}
CASES = [
    ("flat, valid", FLAT, {"city": "Oslo", "days": 3}),
    ("flat, invalid", FLAT, {"city": 3}),
    ("simple, valid", SIMPLE, {"city": "Oslo", "days": 3}),
    ("simple, invalid", SIMPLE, {"city": 3}),
    (
        "nested, valid",
        NESTED,
        {
            "query": "rain",
            "filters": [
                {"field": "a", "op": "eq", "value": 1},
                {"field": "b", "op": "lt", "value": "z"},
            ],
            "limit": 5,
        },
    ),
    ("nested, invalid", NESTED, {"query": "rain", "filters": [{"field": "a", "op": "ne"}]}),
]


def main() -> None:
    n = 5000
    for label, schema, value in CASES:
        check = define_tool(name="t", input_schema=schema, execute=lambda i: "ok").check_input
        best = min(timeit.repeat(lambda: check(value), number=n, repeat=7)) / n  # noqa: B023
        print(f"{label:<16} {best * 1e6:7.1f} µs per call")


if __name__ == "__main__":
    main()
