"""The README's table of blueprints, made from the catalog (a test holds the README to it):
`python tests/foundation/readme_table.py` prints it."""

from __future__ import annotations

HEADER = [
    "blueprint | model | accelerator | runtime | instance | $/hour",
    "---|---|---|---|---|--:",
]


def rows() -> list[str]:
    """One line per catalog blueprint: the model's Hugging Face name, where it runs, and what its
    serving nodes cost an hour at the starting replicas, on demand (`llmctl blueprints list`)."""
    from llmctl.blueprints.describe import summaries

    return [
        f"{row['name']} | {row['model'].split('/')[-1]} | {row['accelerator']} | {row['runtime']} | "
        f"{row['instance_type']} | {row['hourly_usd']:.2f}"
        for row in summaries()
    ]


if __name__ == "__main__":
    print("\n".join([*HEADER, *rows()]))
