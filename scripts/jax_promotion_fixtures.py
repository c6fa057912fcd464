"""Promotion vectors from real jax for every dtype dtcast shares with it, x64 on and off.

Writes tests/fixtures/jax_lattice.json (the test suite reads it; it never runs Python):
  {"meta": {...}, "x64": {"promote_types": [[a, b, result]], "result_type": [[[ops], result]]},
   "no_x64": {...}}
where a result is a dtype name or "error: <message>". Operands use the fixtures' syntax:
`int8[2]` an array, `int8[]` a 0-dim array, `True`, `3`, `2.5`, `(1+2j)` Python scalars.

    python3 -m venv /tmp/jaxenv && /tmp/jaxenv/bin/pip install "jax[cpu]==0.10.2" ml_dtypes==0.6.0
    /tmp/jaxenv/bin/python scripts/jax_promotion_fixtures.py
"""
import json
import subprocess
import sys

NAMES = [
    "bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
    "float8_e4m3", "float8_e3m4", "float8_e4m3b11fnuz", "float6_e2m3fn", "float6_e3m2fn",
    "float4_e2m1fn", "int4", "uint4", "int2", "uint2", "int1", "uint1",
]
SCALARS = ["True", "3", "2.5", "(1+2j)"]

CHILD = r'''
import json, sys
import jax, jax.numpy as jnp, ml_dtypes, numpy as np
jax.config.update("jax_enable_x64", sys.argv[1] == "1")
NAMES, SCALARS = json.loads(sys.argv[2]), json.loads(sys.argv[3])
def dt(n):
    return np.dtype(getattr(ml_dtypes, n)) if hasattr(ml_dtypes, n) else np.dtype(n)
def name(d):
    return str(np.dtype(d))
def run(f):
    try:
        return name(f())
    except Exception as e:  # the message, as the other fixtures record it
        return "error: " + str(e).splitlines()[0][:160]
# Operands that jax cannot make reliably are NumPy arrays (strong, as jax arrays are): XLA has
# no float6 arrays (and a failed creation leaves later ones with wrong dtypes), and jax's array
# cache confuses int1, uint1 and bool (`jnp.zeros` of one returns another's dtype).
def make(name, shape):
    if name.startswith("float6") or name in ("int1", "uint1"):
        return np.zeros(shape, dt(name))
    return jnp.zeros(shape, dt(name))
ARRAYS = {}
for n in NAMES:
    ARRAYS[n + "[2]"] = make(n, (2,))
    ARRAYS[n + "[]"] = make(n, ())
def arg(o):
    if o in ARRAYS:
        return ARRAYS[o]
    return {"True": True, "3": 3, "2.5": 2.5, "(1+2j)": 1 + 2j}[o]
promote = [[a, b, run(lambda: jnp.promote_types(dt(a), dt(b)))] for a in NAMES for b in NAMES]
ops = [n + "[2]" for n in NAMES] + [n + "[]" for n in NAMES] + SCALARS
result = []
for a in ops:
    for b in ops:
        result.append([[a, b], run(lambda: jnp.result_type(arg(a), arg(b)))])
print(json.dumps({"promote_types": promote, "result_type": result}))
'''

def main():
    out = {}
    for key, flag in (("x64", "1"), ("no_x64", "0")):
        r = subprocess.run([sys.executable, "-c", CHILD, flag, json.dumps(NAMES), json.dumps(SCALARS)],
                           check=True, capture_output=True, text=True)
        out[key] = json.loads(r.stdout)
    import jax, ml_dtypes, numpy
    out["meta"] = {"jax": jax.__version__, "ml_dtypes": ml_dtypes.__version__,
                   "numpy": numpy.__version__, "generator": "scripts/jax_promotion_fixtures.py"}
    with open("tests/fixtures/jax_lattice.json", "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")

if __name__ == "__main__":
    main()
