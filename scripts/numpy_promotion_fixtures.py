"""NumPy 2 (NEP 50) + ml_dtypes promotion vectors for every dtype dtcast shares with them.

Writes tests/fixtures/numpy_lattice.json (the test suite reads it; it never runs Python):
  {"meta": {...}, "promote_types": [[a, b, result]], "can_cast": [[from, to, casting, bool]],
   "result_type": [[[ops], result]], "result_type_many": [[[ops], result]],
   "kinds": {name: numpy kind char}}
A result is a dtype name or "error: <message>". Operands use the fixtures' syntax: `int8[2]` an
array, `int8[]` a 0-dim array, `True`, `3`, `2.5`, `(1+2j)` and the value-carrying `300`, `-1`,
`70000`, `1e300`. A result is `np.result_type(*operands)` (which never looks at values); where
that is an integer dtype, a Python int it cannot hold is NumPy's OverflowError, which arithmetic
raises when it converts the weak scalar (the rule of policies/numpy_result_type.json).

    python3 -m venv /tmp/npenv && /tmp/npenv/bin/pip install numpy==2.4.6 ml_dtypes==0.7.0
    /tmp/npenv/bin/python scripts/numpy_promotion_fixtures.py
"""
import json
import random

import ml_dtypes
import numpy as np

NAMES = [
    "bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
    "float8_e4m3", "float8_e3m4", "float8_e4m3b11fnuz", "float6_e2m3fn", "float6_e3m2fn",
    "float4_e2m1fn", "float8_e5m3fnu", "int4", "uint4", "int2", "uint2", "int1", "uint1", "complex32", "bcomplex32",
]
SCALARS = ["True", "3", "2.5", "(1+2j)", "300", "-1", "70000", "1e300"]
VALUES = {"True": True, "3": 3, "2.5": 2.5, "(1+2j)": 1 + 2j, "300": 300, "-1": -1,
          "70000": 70000, "1e300": 1e300}


def dt(n):
    return np.dtype(getattr(ml_dtypes, n)) if hasattr(ml_dtypes, n) else np.dtype(n)


def run(f):
    try:
        return str(np.dtype(f()))
    except Exception as e:  # the message's first line, as the other fixtures record it
        return "error: " + str(e).splitlines()[0][:160]


def arg(o):
    if o.endswith("[]"):
        return np.zeros((), dt(o[:-2]))
    if o.endswith("[2]"):
        return np.zeros((2,), dt(o[:-3]))
    return VALUES[o]


def result_of(ops):
    """np.result_type, then NEP 50's conversion of each Python int to an integer result."""
    def typed():
        t = np.result_type(*ops)
        for v in ops:
            if isinstance(v, int) and not isinstance(v, bool) and t.kind in "iu":
                info = np.iinfo(t)
                if not info.min <= v <= info.max:
                    raise OverflowError(f"Python integer {v} out of bounds for {t}")
        return t
    return run(typed)


def result(a, b):
    return result_of([arg(a), arg(b)])


def main():
    out = {
        "meta": {"numpy": np.__version__, "ml_dtypes": ml_dtypes.__version__,
                 "generator": "scripts/numpy_promotion_fixtures.py"},
        "kinds": {n: dt(n).kind for n in NAMES},
        "promote_types": [[a, b, run(lambda: np.promote_types(dt(a), dt(b)))]
                          for a in NAMES for b in NAMES],
        "can_cast": [[a, b, c, bool(np.can_cast(dt(a), dt(b), casting=c))]
                     for a in NAMES for b in NAMES
                     for c in ("no", "equiv", "safe", "same_kind", "unsafe")],
    }
    ops = [n + "[2]" for n in NAMES] + [n + "[]" for n in NAMES] + SCALARS
    out["result_type"] = [[[a, b], result(a, b)] for a in ops for b in ops]
    # Three to five operands through np.result_type (whose reduction is not a fold of pairs), from
    # a fixed seed; Python ints here have small magnitude, so their values play no part.
    rng = random.Random(1)
    small = [o for o in ops if o not in ("300", "-1", "70000", "1e300")]
    # Half of them from the builtin dtypes, bfloat16 and the two float8 types (NAMES[:17]), which
    # mix with each other more often, so that more rows have an answer.
    common = [o for o in small if o.split("[")[0] in NAMES[:17] or "[" not in o]
    many = [rng.sample(pool, rng.randint(3, 5)) for pool in (small, common) for _ in range(2000)]
    out["result_type_many"] = [[m, result_of(list(map(arg, m)))] for m in many]
    with open("tests/fixtures/numpy_lattice.json", "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
