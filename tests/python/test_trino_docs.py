"""Trino's documented function examples (trino_doc_cases.py) through Trino's Python
client against a running cluster (FLOTILLA_URL), with a pass count per document.

Each case ends one of three ways: it passes (the documented value, or the documented
error); it is refused (an error where Trino documents a value); or it is wrong (a value
other than the documented one, or a value where Trino documents an error). A wrong
answer is the worst outcome: any one not listed in DISAGREEMENTS fails the run, as
does an overall pass count under the floor below (raised as functions land).

    FLOTILLA_URL=http://127.0.0.1:8080 python3 tests/python/test_trino_docs.py [-v]

With FLOTILLA_DOCS_REPORT=FILE it writes every case's outcome there as JSON lines.
"""

import datetime
import decimal
import json
import math
import os
import sys
import urllib.parse
from collections import Counter

import trino
import trino.dbapi

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trino_doc_cases as cases  # noqa: E402
import trino_function_names as names  # noqa: E402

# The overall pass count this build must reach; raised as functions land.
FLOOR = 407

# Wrong answers known and not yet fixed, each with its reason. Each is a defect to
# remove, listed so that a new one fails the run.
DISAGREEMENTS = {
    "SELECT ARRAY[1, 1.2, 4]": "a literal 1.2 is a double, not Trino's decimal(2,1)",
    "SELECT ARRAY[1, 1.2, 4][2]": "a literal 1.2 is a double, not Trino's decimal(2,1)",
    "SELECT MAP(ARRAY['key1', 'key2', 'key3' ], ARRAY[23, 34.63, 45.837])":
        "a literal 34.63 is a double, not Trino's decimal",
    "SELECT COALESCE(CAST(ROW(NULL, NULL) AS ROW(integer, integer)), ROW(1, 2))":
        "a row whose fields are all null is not null to COALESCE",
    "SELECT typeof(123)": "an integer literal is a bigint, not Trino's integer",
    "SELECT typeof('cat')": "a string literal is an unbounded varchar, not Trino's varchar(3)",
}


def connect(url, time_zone=None):
    u = urllib.parse.urlparse(url)
    kwargs = dict(host=u.hostname, port=u.port, http_scheme=u.scheme, user="docs", catalog="tpch", schema="tiny")
    if time_zone:
        kwargs["timezone"] = time_zone
    return trino.dbapi.connect(**kwargs)


def parse_tz(text):
    """`YYYY-MM-DD HH:MM:SS[.fraction] ZONE` -> (wall-clock datetime, zone text)."""
    date, time, zone = text.split(" ", 2)
    hms, _, fraction = time.partition(".")
    # Trino's Python client rounds a fraction finer than microseconds half up.
    micros = round(decimal.Decimal("0." + fraction) * 1_000_000, 0) if fraction else 0
    wall = datetime.datetime.fromisoformat(f"{date} {hms}") + datetime.timedelta(microseconds=int(micros))
    return wall, zone


def zone_matches(value, zone):
    tzinfo = value.tzinfo
    name = getattr(tzinfo, "key", None) or getattr(tzinfo, "zone", None) or str(tzinfo)
    if name == zone or (zone == "UTC" and name in ("UTC", "Etc/UTC", "Z", "+00:00")):
        return True
    if zone[:1] in "+-" and ":" in zone:
        sign = 1 if zone[0] == "+" else -1
        hours, minutes = zone[1:].split(":")
        offset = datetime.timedelta(hours=int(hours), minutes=int(minutes)) * sign
        return value.utcoffset() == offset
    return False


def same(expected, actual):
    if isinstance(expected, tuple) and expected[:1] == ("tz",):
        if not isinstance(actual, datetime.datetime) or actual.tzinfo is None:
            return False
        wall, zone = parse_tz(expected[1])
        return actual.replace(tzinfo=None) == wall and zone_matches(actual, zone)
    if isinstance(expected, tuple) and expected[:1] == ("approx",):
        _, x, rel = expected
        return isinstance(actual, float) and math.isclose(actual, x, rel_tol=rel)
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, float):
        if not isinstance(actual, float):
            return False
        if math.isnan(expected) or math.isinf(expected):
            return str(expected) == str(actual)
        return math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(expected, decimal.Decimal):
        # Exact, scale included: DECIMAL '3.0' is not 3.
        return isinstance(actual, decimal.Decimal) and expected.as_tuple() == actual.as_tuple()
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, tuple):
        return isinstance(actual, tuple) and len(expected) == len(actual) and all(map(same, expected, actual))
    if isinstance(expected, list):
        return isinstance(actual, list) and len(expected) == len(actual) and all(map(same, expected, actual))
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or len(expected) != len(actual):
            return False
        return all(k in actual and same(v, actual[k]) for k, v in expected.items())
    return type(expected) is type(actual) and expected == actual


def same_rows(expected, rows):
    if len(expected) != len(rows):
        return False
    rows = [tuple(r) for r in rows]
    if not expected.unordered:
        return all(same(tuple(e), r) for e, r in zip(expected, rows))
    left = list(rows)
    for e in expected:
        match = next((i for i, r in enumerate(left) if same(tuple(e), r)), None)
        if match is None:
            return False
        left.pop(match)
    return True


def run(url, case):
    """(outcome, detail) for one case: outcome is pass, refused or wrong."""
    expected, time_zone = case.expected, None
    if isinstance(expected, tuple) and expected[:1] == ("session_tz",):
        _, time_zone, expected = expected
    conn = connect(url, time_zone)
    try:
        cur = conn.cursor()
        cur.execute(case.sql)
        rows = cur.fetchall()
    except Exception as e:  # the client raises its own error types
        name = getattr(e, "error_name", None)
        message = getattr(e, "message", None) or str(e)
        if isinstance(expected, cases.Error):
            if expected.name is None or expected.name == name:
                return "pass", name
            return "wrong", f"error {name}, documented {expected.name}: {message[:160]}"
        return "refused", f"{name}: {message[:200]}"
    finally:
        conn.close()
    if isinstance(expected, cases.Error):
        return "wrong", f"returned {rows!r:.200}, documented an error"
    if isinstance(expected, cases.Rows):
        ok = same_rows(expected, rows)
    else:
        ok = len(rows) == 1 and len(rows[0]) >= 1 and same(expected, rows[0][0])
    if ok:
        return "pass", None
    return "wrong", f"returned {rows!r:.200}, documented {expected!r:.200}"


# Documented names that are Trino syntax rather than functions in a registry.
SYNTAX = {"if", "try", "cast", "try_cast", "extract", "localtime", "localtimestamp"}

# Documented functions the dialect writes as another call (`coordinator::dialect::calls`).
REWRITTEN = {
    "listagg", "reduce_agg", "count_if", "max_by", "min_by", "geometric_mean", "histogram", "multimap_agg",
    "map_agg", "date", "slice", "to_utf8", "mod", "current_timezone", "array_last",
}

# Documented functions flotilla does not have, and why.
ABSENT = {
    "checksum": "not yet: an order-independent hash of a group's values",
    "map_union": "not yet: an aggregate merging a group's maps",
    "kurtosis": "not yet",
    "skewness": "not yet",
    "approx_most_frequent": "not yet: an approximate top-k sketch",
    "approx_set": "the HyperLogLog type is not a type here",
    "merge": "the sketch types it merges are not types here",
    "numeric_histogram": "not yet: an approximate histogram sketch",
    "qdigest_agg": "the qdigest type is not a type here",
    "tdigest_agg": "the tdigest type is not a type here",
    "parse_datetime": "not yet: a Joda-Time parse into a timestamp with its zone",
    "t_pdf": "not yet: Student's t distribution",
    "t_cdf": "not yet: Student's t distribution",
    "beta_cdf": "not yet: the beta distribution",
    "inverse_beta_cdf": "not yet: the beta distribution",
    "word_stem": "not yet: a Snowball stemmer per language",
    "normalize": "not yet: Unicode normalization forms",
}


def registered(url):
    """The function names the cluster's registry answers `SHOW FUNCTIONS` with."""
    conn = connect(url)
    cur = conn.cursor()
    cur.execute("SHOW FUNCTIONS")
    return {row[0].lower() for row in cur.fetchall()}


def check_names(url):
    """Every documented function exists, is syntax or a rewrite, or is listed absent."""
    have = registered(url)
    unknown, present, total = [], 0, 0
    for doc, documented in names.DOCUMENTED.items():
        for name in documented:
            total += 1
            if name in have or name in SYNTAX or name in REWRITTEN:
                present += 1
            elif name not in ABSENT:
                unknown.append(f"{doc}.{name}")
    stale = [n for n in ABSENT if n in have]
    print(f"documented functions: {present} of {total} present, {len(ABSENT)} listed absent")
    if unknown:
        print(f"documented functions neither present nor listed absent: {', '.join(unknown)}")
    if stale:
        print(f"listed absent yet registered: {', '.join(stale)}")
    return not unknown and not stale


def main():
    url = os.environ["FLOTILLA_URL"]
    verbose = "-v" in sys.argv
    outcomes = Counter()
    report = open(os.environ["FLOTILLA_DOCS_REPORT"], "w") if os.environ.get("FLOTILLA_DOCS_REPORT") else None
    wrong = []
    for case in cases.CASES:
        outcome, detail = run(url, case)
        outcomes[(case.doc, outcome)] += 1
        if report:
            report.write(json.dumps({"doc": case.doc, "sql": case.sql, "outcome": outcome, "detail": detail}) + "\n")
        if outcome == "wrong" and case.sql not in DISAGREEMENTS:
            wrong.append((case, detail))
        if verbose and outcome != "pass":
            print(f"  {outcome:7} [{case.doc}] {case.sql}\n          {detail}")
    docs = sorted({c.doc for c in cases.CASES})
    print(f"{'document':12} {'pass':>5} {'of':>4} {'refused':>8} {'wrong':>6}")
    for doc in docs:
        total = sum(n for (d, _), n in outcomes.items() if d == doc)
        p, r, w = (outcomes[(doc, o)] for o in ("pass", "refused", "wrong"))
        print(f"{doc:12} {p:5} {total:4} {r:8} {w:6}")
    passed = sum(n for (_, o), n in outcomes.items() if o == "pass")
    print(f"{'overall':12} {passed:5} {len(cases.CASES):4} ({100 * passed / len(cases.CASES):.1f}%)")
    failed = False
    for case, detail in wrong:
        print(f"WRONG ANSWER [{case.doc}] {case.sql}\n    {detail}")
        failed = True
    if passed < FLOOR:
        print(f"{passed} cases pass, fewer than the floor of {FLOOR}")
        failed = True
    if not check_names(url):
        failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
