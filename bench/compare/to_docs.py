#!/usr/bin/env python3
"""Moves one bench/compare/run.sh output into docs/benchmarks.md.

    bench/compare/run.sh > out.md
    bench/compare/to_docs.py out.md [docs/benchmarks.md]

What it replaces, and nothing else:
- the goal table of "The default profile: the goals" (the lines from its header row on) with the
  run's table of "The default profile's goals (this run)";
- the body of each of the run's "## " sections with the docs section of the same heading (the
  run's "Machine (this run)" and "The no-perf fallback" have docs headings of their own, NAMES
  below), up to the next "# " or "## " heading of the docs.

The words around the tables (the "Final run" paragraph, the bullets that read this run beside
the runs before it, the cross-run table) are the author's, not the run's: it prints what it
replaced and leaves them. A section of the run that the docs lack, or a docs section that
appears twice, is an error that writes nothing.
"""
import sys

# The run's heading -> the docs' heading, where they differ.
NAMES = {
    "Machine (this run)": "Side by side: machine (final run)",
    "The no-perf fallback: the sampler clock (goal 3)":
        "Side by side: the no-perf fallback, the sampler clock (goal 3)",
}
# The run's sections whose content the docs give elsewhere (the goal table cites the tests).
SKIP = {"Goal 1's tests (SIGKILL, aliasing)"}
GOALS = "The default profile's goals (this run)"
GOAL_HEADER = "| goal | figure (medians, this run) |"


def sections(lines):
    """The run's "## " sections: heading -> body lines (up to the next "## "), in order."""
    out, name = {}, None
    for line in lines:
        if line.startswith("## "):
            name = line[3:].strip()
            if name in out:
                raise SystemExit(f"to_docs: the run has two sections '{name}'")
            out[name] = []
        elif name is not None:
            out[name].append(line)
    return out


def trimmed(body):
    """A body without its leading and trailing blank lines."""
    body = list(body)
    while body and not body[-1].strip():
        body.pop()
    while body and not body[0].strip():
        body.pop(0)
    return body


def table_of(body):
    """The goal table's lines of the run's goal section."""
    start = next((i for i, b in enumerate(body) if b.startswith(GOAL_HEADER)), None)
    if start is None:
        raise SystemExit("to_docs: the run's goal section has no goal table")
    end = start
    while end < len(body) and body[end].startswith("|"):
        end += 1
    return body[start:end]


def replace_section(doc, heading, body):
    """doc with the body of "## heading" replaced (up to the next "# " or "## ")."""
    at = [i for i, d in enumerate(doc) if d.rstrip() == "## " + heading]
    if len(at) != 1:
        raise SystemExit(f"to_docs: the docs have {len(at)} sections '## {heading}'")
    end = at[0] + 1
    while end < len(doc) and not doc[end].startswith(("# ", "## ")):
        end += 1
    return doc[:at[0] + 1] + [""] + body + [""] + doc[end:]


def replace_goal_table(doc, table):
    at = [i for i, d in enumerate(doc) if d.startswith(GOAL_HEADER)]
    if len(at) != 1:
        raise SystemExit(f"to_docs: the docs have {len(at)} goal tables")
    end = at[0]
    while end < len(doc) and doc[end].startswith("|"):
        end += 1
    return doc[:at[0]] + table + doc[end:]


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    run_path = sys.argv[1]
    doc_path = sys.argv[2] if len(sys.argv) == 3 else "docs/benchmarks.md"
    with open(run_path, encoding="utf-8") as f:
        run = sections(f.read().splitlines())
    with open(doc_path, encoding="utf-8") as f:
        doc = f.read().splitlines()
    if GOALS not in run:
        raise SystemExit(f"to_docs: {run_path} has no section '{GOALS}': not a run's output")
    doc = replace_goal_table(doc, table_of(run[GOALS]))
    done = ["the goal table"]
    for name, body in run.items():
        if name == GOALS or name in SKIP:
            continue
        heading = NAMES.get(name, name)
        doc = replace_section(doc, heading, trimmed(body))
        done.append(heading)
    with open(doc_path, "w", encoding="utf-8") as f:
        f.write("\n".join(doc) + "\n")
    print(f"{doc_path}: replaced " + "; ".join(done), file=sys.stderr)
    print("Still by hand: the 'Final run' paragraph, the cross-run table's column and the "
          "bullets below it, and any 'this run' in the sections' prose.", file=sys.stderr)


if __name__ == "__main__":
    main()
