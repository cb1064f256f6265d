#!/usr/bin/env python3
"""Precision check: the reference's alternative variant passed the whole suite while taking the
other reading wherever the ambiguity register accepts several.

    ci/precision-check.py RECOMMENDED.json ALTERNATIVE.json

Both files are `run --json` results. The check fails when the alternative run did not pass, when
it did not take each reading listed in EXPECTED (so the variant really differs where it claims
to), or when any section 9 refusal carries the same code in both runs (the alternative answers
codes of its own). Exit status: 0 when all hold, 1 otherwise, 2 on bad input.
"""
import json
import sys

# Ambiguity id -> the reading the alternative variant takes (see features/ambiguities.yaml).
EXPECTED = {
    "restore-outcome-unknown": "repair-required",
    "scrubbed-stream-event-shape": "marker-added",
    "scrubbed-index-shape": "repoints",
    "notice-in-reply-summary": "notice-is-a-reply",
    "notice-marks-sync-dirty": "notice-dirty",
    "refusal-records-operation": "failed-operation",
    "tombstone-rewound-at": "beside-message-recall",
    "tail-fork-below-target": "refuse",
    "reply-thread-broadcast-scope": "parent-and-thread",
    "plan-persist-vs-scope-lock": "plan-under-lock",
    "failed-fanout-rows": "failed-is-unfinished",
}


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        print(f"precision-check: cannot read `{path}`: {e}", file=sys.stderr)
        sys.exit(2)
    if data.get("format") != "rewind-conformance-results":
        print(f"precision-check: `{path}` is not a results file", file=sys.stderr)
        sys.exit(2)
    return data


def readings(data):
    taken = {}
    for scenario in data["scenarios"]:
        for ambiguity, reading in scenario.get("readings", {}).items():
            taken.setdefault(ambiguity, set()).add(reading)
    return taken


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    recommended, alternative = load(sys.argv[1]), load(sys.argv[2])
    problems = []
    bad = [s for s in alternative["scenarios"] if s["verdict"] not in ("passed", "not_applicable")]
    for s in bad:
        problems.append(f"{s['feature']}:{s['line']} {s['name']}: {s['verdict']} -- {s.get('failure')}")
    taken = readings(alternative)
    base = readings(recommended)
    for ambiguity, reading in EXPECTED.items():
        if reading not in taken.get(ambiguity, set()):
            problems.append(
                f"the alternative variant never took reading `{reading}` of `{ambiguity}` "
                f"(took {sorted(taken.get(ambiguity, []))}, the recommended run {sorted(base.get(ambiguity, []))})"
            )
    codes_a = recommended.get("refusalCodes", {})
    codes_b = alternative.get("refusalCodes", {})
    if not codes_b:
        problems.append("the alternative run recorded no refusal codes")
    for message, code in codes_b.items():
        if codes_a.get(message) == code:
            problems.append(f"both variants answer `{message}` with code `{code}`")
    for p in problems:
        print(f"precision-check: {p}")
    differing = sum(1 for a in EXPECTED if EXPECTED[a] in taken.get(a, set()))
    print(
        f"precision-check: the alternative variant passed {len(alternative['scenarios']) - len(bad)}"
        f"/{len(alternative['scenarios'])} scenarios taking {differing}/{len(EXPECTED)} other readings "
        f"and {len(codes_b)} codes of its own: {'ok' if not problems else 'FAILED'}"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
